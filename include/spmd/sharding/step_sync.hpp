#pragma once
// Keeping ranks in step. A collective inside the step loop deadlocks when ranks run
// different numbers of steps, so:
//  - count_real_rows is the infinite-padding barrier: every rank calls it at the start of
//    every step with its count of real rows; the global sum (exact int64) is the same on
//    every rank, and when it is 0 all ranks leave the loop together;
//  - WindowedCountBarrier is the same barrier with one allreduce per window of steps (what
//    the eval workload uses: on a fast model a synchronisation per step costs more than the
//    padding);
//  - require_equal_step_counts checks, before a fixed-length loop, that every rank would run
//    the same number of steps, and otherwise throws on every rank (no rank is left waiting).
//
// Infinite-padding loop:
//   const StepPlan plan(BatchMode::InfinitePad, n_local, g);
//   for (std::int64_t step = 0;; ++step) {
//     const StepLayout layout = plan.layout(step);
//     if (count_real_rows(ctx, layout).all_done()) break;
//     ... step on layout's rows ...
//   }
#include <cstdint>
#include <string>
#include <vector>

#include "spmd/runtime/context.hpp"
#include "spmd/sharding/step_plan.hpp"

namespace spmd::sharding {

struct GlobalRowCount {
  std::int64_t real_rows = 0;  // real rows of this step summed over every device of every rank
  bool all_done() const { return real_rows == 0; }
};

// Collective over ctx.comm(): sums local_real_rows over ranks.
GlobalRowCount count_real_rows(const runtime::Context& ctx, std::int64_t local_real_rows);
// Collective: psum of the step's per-device real rows over devices and ranks.
GlobalRowCount count_real_rows(const runtime::Context& ctx, const StepLayout& step);

// The count barrier summed for a window of steps at once. At the first step of each window
// every rank contributes its real rows of each of the window's steps (known from sizes, as
// StepPlan::real_rows_of_step gives them), and one allreduce of `window` integers gives
// the global count of each. The loop stops at the first step whose global count is 0: the
// same step as with count_real_rows on every step (window = 1), with 1/window of the
// collectives, and ranks synchronise once per window instead of once per step (on a fast
// model every synchronisation makes each rank wait for the slowest one's jitter).
//   WindowedCountBarrier barrier(ctx, 16);
//   for (std::int64_t step = 0;; ++step) {
//     if (barrier.count(step, [&](std::int64_t s) { return plan.real_rows_of_step(s); }).all_done()) break;
//     ... step on plan.layout(step)'s rows ...
//   }
class WindowedCountBarrier {
 public:
  // Beyond this the window's counts (8 bytes a step) outweigh the synchronisation saved.
  static constexpr int kMaxWindow = 4096;
  // 1 <= window <= kMaxWindow (throws spmd::Error otherwise).
  WindowedCountBarrier(const runtime::Context& ctx, int window);
  // The global count of `step`. Steps must come in order from 0, one call each; collective
  // at the first step of each window (step % window == 0), local otherwise.
  template <class RealRowsOfStep>
  GlobalRowCount count(std::int64_t step, RealRowsOfStep&& local_real_rows) {
    const std::int64_t offset = step % window_;
    if (offset == 0) {
      for (std::int64_t i = 0; i < window_; ++i) counts_[static_cast<std::size_t>(i)] = local_real_rows(step + i);
      sum_window(step);
    } else {
      check_order(step);
    }
    return {counts_[static_cast<std::size_t>(offset)]};
  }
  int window() const { return static_cast<int>(window_); }

 private:
  void sum_window(std::int64_t first_step);
  void check_order(std::int64_t step) const;

  const runtime::Context& ctx_;
  std::int64_t window_;
  std::vector<std::int64_t> counts_;  // global counts of the current window's steps
  std::int64_t window_first_ = -1;    // first step of the current window
};

// Collective: min and max of local_steps over ranks. When they differ, every rank throws the
// same spmd::CollectiveError, naming `what` (e.g. "eval with --strategy pad"), each rank's
// step count, and the way out (--strategy infinite-pad).
void require_equal_step_counts(const runtime::Context& ctx, std::int64_t local_steps, const std::string& what);

}  // namespace spmd::sharding
