// An SPMD program of its own on the installed SPMD Kit: evaluates the rule "class 1 when
// feature 0 > 0" over a labelled HDF5 file (spmd data make-classification's X, y), every row
// counted exactly once on any number of ranks.
//
//   mpirun -np 2 ./padded_count data.h5 [ROWS_PER_STEP]
//
// Each rank takes its contiguous rows (split_for_process) and runs the same number of steps,
// derived from global sizes (pad_step_count, the step plan): a rank with fewer rows pads its last steps with
// masked zero rows, so a step always has the same shape and the collective reads inside the
// loop always match. The counts are int64 summed over ranks (exact); the count barrier sums
// each step's real rows over ranks, and all of them must add up to the file's rows.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <span>
#include <string>
#include <vector>

#include "spmd/data/dataset.hpp"
#include "spmd/runtime/collectives.hpp"
#include "spmd/runtime/context.hpp"
#include "spmd/runtime/error.hpp"
#include "spmd/runtime/mpi.hpp"
#include "spmd/sharding/split.hpp"
#include "spmd/sharding/step_plan.hpp"
#include "spmd/sharding/step_sync.hpp"

namespace {

using spmd::sharding::BatchMode;

struct Counts {  // summed over ranks as int64: the same on every layout
  std::int64_t rows = 0, correct = 0, positives = 0, padding = 0, barrier_rows = 0;
};

// One step of fixed shape [step_rows, features]: the real rows first, then masked zero rows,
// as a device program compiled for one shape would see them.
void count_step(const std::vector<float>& x, const std::vector<std::int64_t>& y, const std::vector<std::uint8_t>& mask,
                std::int64_t features, Counts& counts) {
  for (std::size_t r = 0; r < mask.size(); ++r) {
    const std::int64_t predicted = x[r * static_cast<std::size_t>(features)] > 0.0f ? 1 : 0;
    counts.rows += mask[r];
    counts.correct += mask[r] * (predicted == y[r] ? 1 : 0);
    counts.positives += mask[r] * (y[r] == 1 ? 1 : 0);
    counts.padding += 1 - mask[r];
  }
}

Counts evaluate(const spmd::runtime::Context& ctx, const std::string& path, std::int64_t rows_per_step) {
  spmd::data::ShardReader reader(ctx, path, {"X", "y"});  // collective; checks the datasets
  const std::int64_t n = reader.shape().rows, features = reader.shape().sample_size;
  const spmd::sharding::RowRange mine = spmd::sharding::split_for_process(n, ctx.rank(), ctx.size());
  const spmd::sharding::BatchGeometry geometry{.devices = 1, .device_batch = rows_per_step};
  geometry.validate();
  const std::int64_t steps = spmd::sharding::pad_step_count(n, ctx.size(), geometry);
  const spmd::sharding::StepPlan plan(BatchMode::PadWithMask, mine.size, geometry, steps);

  std::vector<float> x(static_cast<std::size_t>(geometry.step_rows() * features));
  std::vector<std::int64_t> y(static_cast<std::size_t>(geometry.step_rows()));
  std::vector<std::uint8_t> mask(y.size());
  Counts counts;
  for (std::int64_t step = 0; step < steps; ++step) {
    const auto layout = plan.layout(step);
    const std::int64_t first = mine.first + layout.shard_first, real = layout.real_rows;
    // Collective reads: every rank calls them at every step, with 0 rows when it has none.
    reader.read_features(first, real, std::span<float>(x.data(), static_cast<std::size_t>(real * features)));
    reader.read_labels(first, real, std::span<std::int64_t>(y.data(), static_cast<std::size_t>(real)));
    std::fill(x.begin() + real * features, x.end(), 0.0f);
    std::fill(y.begin() + real, y.end(), 0);
    std::fill(mask.begin(), mask.end(), 0);
    std::fill(mask.begin(), mask.begin() + real, 1);
    count_step(x, y, mask, features, counts);
    counts.barrier_rows += spmd::sharding::count_real_rows(ctx, real).real_rows;
  }
  // barrier_rows is already global (the same on every rank); the rest is summed here.
  std::vector<std::int64_t> sums{counts.rows, counts.correct, counts.positives, counts.padding};
  spmd::runtime::allreduce_sum(ctx, sums);
  if (sums[0] != n || counts.barrier_rows != n)
    throw spmd::CollectiveError(path + ": counted " + std::to_string(sums[0]) + " rows (barrier " +
                                std::to_string(counts.barrier_rows) + ") of " + std::to_string(n));
  if (ctx.is_root())
    std::printf("# %s: %lld rows over %d ranks, %lld steps of %lld rows per rank\n", path.c_str(),
                static_cast<long long>(n), ctx.size(), static_cast<long long>(steps),
                static_cast<long long>(rows_per_step));
  return {sums[0], sums[1], sums[2], sums[3], counts.barrier_rows};
}

}  // namespace

int main(int argc, char** argv) {
  spmd::runtime::Mpi mpi(&argc, &argv);
  if (argc < 2 || argc > 3) {
    if (mpi.rank() == 0) std::fprintf(stderr, "usage: padded_count FILE.h5 [ROWS_PER_STEP]\n");
    return 2;
  }
  try {
    const spmd::runtime::Context ctx(MPI_COMM_WORLD, {});  // CPU, one device per rank
    const Counts c = evaluate(ctx, argv[1], argc == 3 ? std::stoll(argv[2]) : 64);
    if (ctx.is_root())
      std::printf("rows %lld correct %lld positives %lld padding %lld accuracy %.6f\n",
                  static_cast<long long>(c.rows), static_cast<long long>(c.correct),
                  static_cast<long long>(c.positives), static_cast<long long>(c.padding),
                  static_cast<double>(c.correct) / static_cast<double>(c.rows));
    return 0;
  } catch (const spmd::CollectiveError& e) {  // every rank has it: rank 0 reports, all exit
    if (mpi.rank() == 0) std::fprintf(stderr, "padded_count: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {  // this rank alone: end the job, no rank left waiting
    std::fprintf(stderr, "padded_count: error on rank %d: %s\n", mpi.rank(), e.what());
    spmd::runtime::abort_job(1);
  }
}
