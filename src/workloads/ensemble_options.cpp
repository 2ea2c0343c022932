#include "spmd/workloads/ensemble_options.hpp"

#include "spmd/data/file_identity.hpp"
#include "spmd/workloads/report.hpp"

namespace spmd::workloads {

std::string ensemble_defining_options(const EnsembleOptions& o, int members) {
  return "members=" + std::to_string(members) + "\nseed=" + std::to_string(o.seed) +
         "\nbatch-size=" + std::to_string(o.batch_size) + "\nlearning-rate=" + format("%.9g", o.sgd.learning_rate) +
         "\nmomentum=" + format("%.9g", o.sgd.momentum) + "\ntrain=" + data::checkpoint_data_identity(o.train) +
         "\ntrain-limit=" + std::to_string(o.train_limit) + "\n";
}

}  // namespace spmd::workloads
