// Ranks with different amounts of data stay in step: infinite padding with the count
// barrier, and the step-count disagreement check. Runs under 1..4 ranks; the watchdog
// (30 s) turns a deadlock into a failure.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "spmd/runtime/context.hpp"
#include "spmd/runtime/error.hpp"
#include "spmd/sharding/pad_shard_unpad.hpp"
#include "spmd/sharding/step_sync.hpp"

namespace {

using namespace spmd::sharding;

spmd::runtime::ContextOptions cpu_devices(int devices) {
  return {"cpu", devices, 30.0};
}

// Same on every rank, so that no rank needs the others' data to know its expectations.
struct Case {
  std::string name;
  std::function<std::int64_t(int rank)> rows;
};

std::vector<Case> cases() {
  return {
      {"r*7+1", [](int r) { return std::int64_t{r} * 7 + 1; }},
      {"rank 0 empty", [](int r) { return r == 0 ? std::int64_t{0} : std::int64_t{r} * 13 + 2; }},
      {"last rank heavy", [](int r) { return r == 3 ? std::int64_t{40} : std::int64_t{r}; }},
      {"all empty", [](int) { return std::int64_t{0}; }},
  };
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

TEST(ShardingStepSync, InfinitePaddingCountsEveryRowOnceAndAllRanksStopTogether) {
  for (const int d : {1, 2}) {
    const spmd::runtime::Context ctx(MPI_COMM_WORLD, cpu_devices(d));
    for (const std::int64_t B : {1, 3}) {
      for (const Case& c : cases()) {
        SCOPED_TRACE(c.name + " d=" + std::to_string(d) + " B=" + std::to_string(B));
        const BatchGeometry g{d, B};
        std::int64_t global_rows = 0, longest = 0;
        for (int r = 0; r < ctx.size(); ++r) {
          global_rows += c.rows(r);
          longest = std::max(longest, ceil_div(c.rows(r), g.step_rows()));
        }
        // This rank's shard: a column of global-offset ids (+1, so padding's 0 is no id).
        const std::int64_t n = c.rows(ctx.rank());
        std::int64_t offset = 0;
        for (int r = 0; r < ctx.rank(); ++r) offset += c.rows(r);
        HostArray ids(DType::Int64, {n});
        for (std::int64_t i = 0; i < n; ++i) ids.data<std::int64_t>()[static_cast<std::size_t>(i)] = offset + i + 1;

        const StepPlan plan(BatchMode::InfinitePad, n, g);
        PadShardUnpad wrapper(d);
        const std::vector<std::uint8_t> ones(static_cast<std::size_t>(g.step_rows()), 1);
        std::int64_t steps = 0, counted = 0, local_seen = 0, local_id_sum = 0;
        for (;;) {
          const StepLayout layout = plan.layout(steps);
          const GlobalRowCount count = count_real_rows(ctx, layout);
          EXPECT_EQ(count.real_rows, count_real_rows(ctx, layout.real_rows).real_rows);
          if (count.all_done()) break;
          const ConstHostView mask(DType::UInt8, {layout.real_rows}, reinterpret_cast<const std::byte*>(ones.data()));
          const Shards& batch = wrapper.shard({ConstHostView(ids).slice_rows(layout.shard_first, layout.real_rows), mask},
                                              plan.min_device_batch());
          ++steps;
          counted += count.real_rows;
          const auto v = batch[0].data<std::int64_t>();
          const auto m = batch[1].data<std::uint8_t>();
          EXPECT_EQ(v.size(), static_cast<std::size_t>(g.step_rows()));
          for (std::size_t i = 0; i < v.size(); ++i) {
            if (m[i]) {
              ++local_seen;
              local_id_sum += v[i];
            } else {
              EXPECT_EQ(v[i], 0);
            }
          }
          ASSERT_LE(steps, global_rows + 1) << "the loop does not terminate";
        }
        EXPECT_EQ(counted, global_rows);
        EXPECT_EQ(steps, longest) << "every rank runs as many steps as the longest shard needs";
        EXPECT_EQ(local_seen, n);
        EXPECT_EQ(local_id_sum, n * (2 * offset + n + 1) / 2) << "each of this rank's rows exactly once";
        // Every rank ran the same number of steps.
        std::int64_t extremes[2] = {steps, -steps};
        MPI_Allreduce(MPI_IN_PLACE, extremes, 2, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
        EXPECT_EQ(extremes[0], -extremes[1]);
      }
    }
  }
}

TEST(ShardingStepSync, WindowedBarrierStopsAtTheSameStepAsThePerStepOne) {
  for (const int d : {1, 2}) {
    const spmd::runtime::Context ctx(MPI_COMM_WORLD, cpu_devices(d));
    for (const std::int64_t B : {1, 3}) {
      for (const int window : {1, 2, 3, 5, 64}) {
        for (const Case& c : cases()) {
          SCOPED_TRACE(c.name + " d=" + std::to_string(d) + " B=" + std::to_string(B) + " window=" + std::to_string(window));
          const BatchGeometry g{d, B};
          const std::int64_t n = c.rows(ctx.rank());
          const StepPlan plan(BatchMode::InfinitePad, n, g);
          WindowedCountBarrier barrier(ctx, window);
          EXPECT_EQ(barrier.window(), window);
          std::int64_t step = 0;
          for (;; ++step) {
            const StepLayout layout = plan.layout(step);
            EXPECT_EQ(plan.real_rows_of_step(step), layout.real_rows);
            const GlobalRowCount windowed =
                barrier.count(step, [&](std::int64_t s) { return plan.real_rows_of_step(s); });
            // The per-step barrier on the same step, in between: both count the same.
            EXPECT_EQ(windowed.real_rows, count_real_rows(ctx, layout).real_rows) << "step " << step;
            if (windowed.all_done()) break;
            ASSERT_LE(step, 1000) << "the loop does not terminate";
          }
          std::int64_t longest = 0;
          for (int r = 0; r < ctx.size(); ++r) longest = std::max(longest, ceil_div(c.rows(r), g.step_rows()));
          EXPECT_EQ(step, longest);
        }
      }
    }
  }
  const spmd::runtime::Context ctx(MPI_COMM_WORLD, cpu_devices(1));
  EXPECT_THROW(WindowedCountBarrier(ctx, 0), spmd::Error);
  EXPECT_THROW(WindowedCountBarrier(ctx, WindowedCountBarrier::kMaxWindow + 1), spmd::Error);
  // Steps out of order are a programming error, refused locally (no collective runs).
  WindowedCountBarrier barrier(ctx, 4);
  const auto none = [](std::int64_t) { return std::int64_t{1}; };
  EXPECT_THROW(barrier.count(1, none), spmd::Error);
  EXPECT_EQ(barrier.count(0, none).real_rows, ctx.size());
  EXPECT_EQ(barrier.count(3, none).real_rows, ctx.size());
  EXPECT_THROW(barrier.count(5, none), spmd::Error);
}

// 1 if fn threw a CollectiveError mentioning --strategy infinite-pad, 0 if it returned.
int throws_pointing_to_infinite_pad(const std::function<void()>& fn) {
  try {
    fn();
    return 0;
  } catch (const spmd::CollectiveError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("--strategy infinite-pad"), std::string::npos) << m;
    EXPECT_NE(m.find("rank 0: "), std::string::npos) << m;
    return 1;
  }
}

TEST(ShardingStepSync, StepCountDisagreementThrowsOnEveryRank) {
  const spmd::runtime::Context ctx(MPI_COMM_WORLD, cpu_devices(2));
  const BatchGeometry g{2, 3};
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    // pad mode with local step counts: differ exactly when some shard needs more steps.
    std::int64_t lo = -1, hi = -1;
    for (int r = 0; r < ctx.size(); ++r) {
      const std::int64_t s = local_step_count(BatchMode::PadWithMask, c.rows(r), g);
      lo = lo < 0 ? s : std::min(lo, s);
      hi = std::max(hi, s);
    }
    const std::int64_t mine = local_step_count(BatchMode::PadWithMask, c.rows(ctx.rank()), g);
    const int threw = throws_pointing_to_infinite_pad([&] { require_equal_step_counts(ctx, mine, "eval --strategy pad"); });
    EXPECT_EQ(threw, lo != hi ? 1 : 0);
    // A count derived from global sizes is the same everywhere: no error.
    std::int64_t global_rows = 0;
    for (int r = 0; r < ctx.size(); ++r) global_rows += c.rows(r);
    const std::int64_t global_steps = pad_step_count(global_rows, ctx.size(), g);
    EXPECT_EQ(throws_pointing_to_infinite_pad([&] { require_equal_step_counts(ctx, global_steps, "eval"); }), 0);
  }
  // Direct: counts equal to the rank differ as soon as there are two ranks.
  EXPECT_EQ(throws_pointing_to_infinite_pad([&] { require_equal_step_counts(ctx, ctx.rank(), "test"); }), ctx.size() > 1 ? 1 : 0);
  EXPECT_EQ(throws_pointing_to_infinite_pad([&] { require_equal_step_counts(ctx, 5, "test"); }), 0);
}

}  // namespace
