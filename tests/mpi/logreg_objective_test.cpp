// The data-parallel logreg objective on CPU devices gives the same bits as the one-thread
// serial objective (logreg_value_and_grad), for every rank count ctest runs this binary
// under and 1-3 devices per rank, with row counts that leave ranks and devices with
// partial chunks, single chunks or nothing at all.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "spmd/data/dataset.hpp"
#include "spmd/models/logreg.hpp"
#include "spmd/runtime/context.hpp"
#include "spmd/workloads/logreg_objective.hpp"
#include "logreg_test_problem.hpp"

using namespace spmd;

namespace {

// Both precisions: float32 (W rounded to float for the kernels) and float64 (W as it is).
template <class Scalar>
void expect_same_bits_as_serial_on_every_layout(models::LogregPrecision precision) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int F = 19, C = 4;
  const std::int64_t R = models::kLogregChunkRows;
  for (std::int64_t N : {std::int64_t{1}, R - 1, R, 3 * R + 1, 5 * R + 7, 9 * R - 3}) {
    const auto problem = test::make_logreg_problem(N, F, C, -1.0f);
    const auto& x = problem.x;
    std::vector<Scalar> W(x.begin(), x.end());
    std::vector<double> serial_grad(x.size());
    models::LogregWorkspace ws;
    const double serial = models::logreg_value_and_grad(problem.X.data(), problem.y.data(), N, F, C, W.data(), 0.01,
                                                        serial_grad.data(), ws);
    const data::LoadedShard shard = test::logreg_shard(problem, rank, size);
    for (int devices : {1, 2, 3}) {
      runtime::ContextOptions options;
      options.backend = "cpu";
      options.devices_per_rank = devices;
      options.hang_timeout_s = 120.0;
      runtime::Context ctx(MPI_COMM_WORLD, options);
      workloads::DataParallelLogreg objective(ctx, shard, C, 0.01, precision);
      std::vector<double> grad(x.size());
      const std::string layout = std::string(models::to_string(precision)) + ", N " + std::to_string(N) + ", " +
                                 std::to_string(size) + " rank(s) x " + std::to_string(devices) + " device(s)";
      for (int repeat = 0; repeat < 2; ++repeat) {  // buffers are reused: the second call too
        const double value = objective.value_and_grad(x, grad);
        EXPECT_EQ(std::memcmp(&value, &serial, sizeof(double)), 0)
            << layout << ": value " << value << " serial " << serial;
        for (std::size_t i = 0; i < x.size(); ++i)
          ASSERT_EQ(std::memcmp(&grad[i], &serial_grad[i], sizeof(double)), 0)
              << layout << ": grad[" << i << "] " << grad[i] << " serial " << serial_grad[i];
      }
      EXPECT_EQ(objective.evaluations(), 2);
    }
  }
}

TEST(LogregObjective, SameBitsAsSerialOnEveryLayout) {
  expect_same_bits_as_serial_on_every_layout<float>(models::LogregPrecision::float32);
}

TEST(LogregObjective, Float64SameBitsAsSerialOnEveryLayout) {
  expect_same_bits_as_serial_on_every_layout<double>(models::LogregPrecision::float64);
}

TEST(LogregObjective, InterceptFromTheOnesColumnSameBitsOnEveryLayout) {
  // A shard with a column of ones (data::OnesColumn::append): the weights are W' = [W; b],
  // l2 skips b's row; the same bits as the serial sums finalised with F penalised rows.
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int F = 11, C = 3, Fa = F + 1;
  const double l2 = 0.05;
  const std::int64_t R = models::kLogregChunkRows;
  for (std::int64_t N : {R - 1, 3 * R + 1}) {
    auto problem = test::make_logreg_problem(N, Fa, C, -1.0f);
    for (std::int64_t i = 0; i < N; ++i) problem.X[static_cast<std::size_t>(i * Fa + F)] = 1.0f;
    for (int c = 0; c < C; ++c) problem.x[static_cast<std::size_t>(F * C + c)] = 1.5 * (c - 1);  // b
    const auto& x = problem.x;
    std::vector<float> W(x.begin(), x.end());
    const std::int64_t chunks = (N + R - 1) / R;
    const std::size_t record = models::logreg_partials_size(Fa, C);
    std::vector<double> parts(static_cast<std::size_t>(chunks) * record), total(record), serial_grad(x.size());
    models::LogregWorkspace ws;
    models::logreg_range_partials(problem.X.data(), problem.y.data(), N, Fa, C, W.data(), R, parts.data(), ws);
    models::logreg_sum_partials(parts.data(), chunks, Fa, C, total.data());
    const double serial = models::logreg_finalize(total.data(), N, Fa, C, W.data(), l2, F, serial_grad.data());

    data::LoadedShard shard = test::logreg_shard(problem, rank, size);
    shard.sample_shape = {F};
    shard.sample_size = F;
    shard.ones_column = true;
    for (int devices : {1, 3}) {
      runtime::ContextOptions options;
      options.backend = "cpu";
      options.devices_per_rank = devices;
      options.hang_timeout_s = 120.0;
      runtime::Context ctx(MPI_COMM_WORLD, options);
      workloads::DataParallelLogreg objective(ctx, shard, C, l2);
      EXPECT_EQ(objective.features(), Fa);
      std::vector<double> grad(x.size());
      const double value = objective.value_and_grad(x, grad);
      const std::string layout = "N " + std::to_string(N) + ", " + std::to_string(size) + " rank(s) x " +
                                 std::to_string(devices) + " device(s)";
      EXPECT_EQ(std::memcmp(&value, &serial, sizeof(double)), 0) << layout << ": value " << value << " serial " << serial;
      // EXPECT, not ASSERT: every rank must go on to the next layout's collectives.
      std::size_t differ = 0;
      while (differ < x.size() && std::memcmp(&grad[differ], &serial_grad[differ], sizeof(double)) == 0) ++differ;
      EXPECT_EQ(differ, x.size()) << layout << ": grad[" << differ << "] differs from the serial one";
    }
  }
}

TEST(LogregObjective, RankRowsAreWholeChunksAsEvenAsChunksAllow) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const std::int64_t R = models::kLogregChunkRows;
  for (std::int64_t N : std::vector<std::int64_t>{1, R + 1, 50000, 60000, 10 * R}) {
    const auto mine = workloads::logreg_rank_rows(N, rank, size);
    EXPECT_EQ(mine.first % R == 0 || mine.size == 0, true) << "N " << N;
    // Within half a chunk of an even share at both ends (before clamping to N).
    const double even = static_cast<double>(N) / size;
    if (mine.size > 0) EXPECT_LE(std::abs(static_cast<double>(mine.first) - rank * even), R / 2.0 + 1e-9) << N;
    long long rows = mine.size, total = 0;
    MPI_Allreduce(&rows, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    EXPECT_EQ(total, N);
  }
}

}  // namespace
