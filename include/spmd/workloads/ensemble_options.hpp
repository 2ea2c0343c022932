#pragma once
// What defines one ensemble run, apart from the loop that runs it (ensemble.hpp) and the
// members it trains (ensemble_trainer.hpp), which both read it.
#include <cstdint>
#include <string>

#include "spmd/data/dataset.hpp"
#include "spmd/models/cnn_config.hpp"
#include "spmd/optim/sgd.hpp"
#include "spmd/workloads/option_list.hpp"

namespace spmd::workloads {

// Defaults are the member initializers; constraints, help and what defines a checkpoint are
// in the declarations (ensemble_options.cpp, workloads/option_list.hpp).
struct EnsembleOptions {
  std::string train, test;
  data::DatasetKeys keys{"images", "labels"};       // of --train, resolved
  data::DatasetKeys test_keys{"images", "labels"};  // of --test (one file may hold /train/* and /test/*)
  int epochs = 1;
  int batch_size = 32;
  optim::SgdMomentum sgd;  // learning rate 0.1, momentum 0.9
  std::uint64_t seed = 0;
  std::int64_t train_limit = 0;  // 0: every training example
  std::int64_t test_limit = 0;   // 0: every test example
  int eval_batch = 512;          // test-set batch per device (padded, masked)
  // Each member's architecture. height, width or channels 0: taken from the training images
  // ([N, H, W, C], or [N, H, W] as C = 1); classes 0: 1 + the largest training label.
  models::CnnConfig model{0, 0, 0, {32, 64}, {256}, 0};
  data::FeatureScale input_scale{data::FeatureScale::Mode::Auto, 1.0, true};  // images
  std::string checkpoint;        // written after every epoch (and on SIGTERM/SIGINT)
  bool resume = false;
  bool overwrite = false;        // replace an existing checkpoint with a new training
  std::string metrics_csv;       // "": not written
  int progress_every = 0;        // steps between progress lines (0: 10 lines per epoch)
  bool quiet = false;

  static const std::vector<Option<EnsembleOptions>>& declared();
  // The rules between members; throws spmd::Error naming the option. Looks at --checkpoint
  // (exists when resumed; refused when it would be replaced by accident).
  void validate() const;
};

// The text that defines a run of `members` members (the options declared `defines`: seed,
// optimiser, training data and its size): stored in the checkpoint and compared on --resume,
// which refuses a checkpoint whose text differs. The layout of the members may change; their
// count may not.
std::string ensemble_defining_options(const EnsembleOptions& options, int members);
// The same lines for a default-constructed EnsembleOptions: what a checkpoint written before an
// option was marked `defines` (input-scale) was made with, since it lacks that line.
std::string ensemble_defining_defaults();

}  // namespace spmd::workloads
