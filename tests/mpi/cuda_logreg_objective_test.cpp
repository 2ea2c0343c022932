// The data-parallel logreg objective on GPUs gives the same bits as on CPUs, for every rank
// count (ctest runs this binary under several) and 1 or 2 devices per rank: the CUDA
// shards follow the CPU kernels' arithmetic, and chunk sums are ordered the same way.
// Skipped visibly where no GPU is visible (every rank sees the same machine's answer).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "spmd/backends/backend.hpp"
#include "spmd/data/dataset.hpp"
#include "spmd/models/logreg.hpp"
#include "spmd/runtime/context.hpp"
#include "spmd/runtime/devices.hpp"
#include "spmd/workloads/logreg_objective.hpp"
#include "logreg_test_problem.hpp"

using namespace spmd;

namespace {

struct Objective {
  double value = 0;
  std::vector<double> grad;
};

Objective evaluate(const std::string& backend, int devices_per_rank, const data::LoadedShard& shard, int classes,
                   const std::vector<double>& x) {
  runtime::ContextOptions options;
  options.backend = backend;
  options.select = &backends::select_platform;
  options.devices_per_rank = devices_per_rank;
  options.hang_timeout_s = 120.0;
  runtime::Context ctx(MPI_COMM_WORLD, options);
  workloads::DataParallelLogreg objective(ctx, shard, classes, 0.01);
  Objective out;
  out.grad.resize(x.size());
  out.value = objective.value_and_grad(x, out.grad);
  return out;
}

TEST(CudaLogregObjective, SameBitsAsCpuOnEveryLayout) {
  // Probes the driver, then loads the CUDA module: what `spmd --backend cuda` does.
  if (const auto cuda = backends::select_platform("cuda"); !cuda.error.empty()) GTEST_SKIP() << "no GPU: " << cuda.error;
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int F = 37, C = 5;
  const std::int64_t R = models::kLogregChunkRows;
  // One row; whole chunks; one more and one fewer row than whole chunks.
  for (std::int64_t N : {std::int64_t{1}, 3 * R, 3 * R + 1, 2 * R - 1}) {
    // The same global data and weights on every rank; each keeps its rows.
    const auto problem = test::make_logreg_problem(N, F, C, 0.0f);
    const auto& x = problem.x;
    const data::LoadedShard shard = test::logreg_shard(problem, rank, size);
    for (int devices : {1, 2}) {
      const Objective cpu = evaluate("cpu", devices, shard, C, x);
      const Objective gpu = evaluate("cuda", devices, shard, C, x);
      const std::string layout = "N " + std::to_string(N) + ", " + std::to_string(size) + " rank(s) x " +
                                 std::to_string(devices) + " device(s)";
      EXPECT_EQ(std::memcmp(&gpu.value, &cpu.value, sizeof(double)), 0)
          << layout << ": value GPU " << gpu.value << " CPU " << cpu.value;
      for (std::size_t i = 0; i < x.size(); ++i)
        ASSERT_EQ(std::memcmp(&gpu.grad[i], &cpu.grad[i], sizeof(double)), 0)
            << layout << ": grad[" << i << "] GPU " << gpu.grad[i] << " CPU " << cpu.grad[i];
    }
  }
}

}  // namespace
