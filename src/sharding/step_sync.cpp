#include "spmd/sharding/step_sync.hpp"

#include <span>
#include <vector>

#include "spmd/runtime/check.hpp"
#include "spmd/runtime/collectives.hpp"

namespace spmd::sharding {

GlobalRowCount count_real_rows(const runtime::Context& ctx, std::int64_t local_real_rows) {
  std::int64_t count = local_real_rows;
  runtime::allreduce_sum(ctx, std::span<std::int64_t>(&count, 1));
  return {count};
}

GlobalRowCount count_real_rows(const runtime::Context& ctx, const StepLayout& step) {
  // The rank's devices are summed here, then one integer crosses the ranks: the psum over
  // every device, without building a per-device list on every step.
  std::int64_t local = 0;
  for (const DeviceRows& device : step.devices) local += device.real_rows;
  return count_real_rows(ctx, local);
}

WindowedCountBarrier::WindowedCountBarrier(const runtime::Context& ctx, int window)
    : ctx_(ctx), window_(window) {
  if (window < 1 || window > kMaxWindow)
    throw Error("count barrier: the window must be 1 to " + std::to_string(kMaxWindow) + " steps, got " + std::to_string(window));
  counts_.resize(static_cast<std::size_t>(window));
}

void WindowedCountBarrier::sum_window(std::int64_t first_step) {
  const std::int64_t expected = window_first_ < 0 ? 0 : window_first_ + window_;
  if (first_step != expected)
    throw Error(runtime::rank_tag() + ": internal: count barrier window starts at step " + std::to_string(first_step) +
                " after the window of step " + std::to_string(window_first_));
  window_first_ = first_step;
  runtime::allreduce_sum(ctx_, std::span<std::int64_t>(counts_));
}

void WindowedCountBarrier::check_order(std::int64_t step) const {
  if (window_first_ < 0 || step < window_first_ || step >= window_first_ + window_)
    throw Error(runtime::rank_tag() + ": internal: count barrier asked for step " + std::to_string(step) +
                " outside its current window (first step " + std::to_string(window_first_) + ")");
}

void require_equal_step_counts(const runtime::Context& ctx, std::int64_t local_steps, const std::string& what) {
  // One allreduce gives both extremes: max(s) and max(-s) = -min(s).
  std::int64_t extremes[2] = {local_steps, -local_steps};
  runtime::allreduce_max(ctx, std::span<std::int64_t>(extremes, 2));
  const std::int64_t max_steps = extremes[0], min_steps = -extremes[1];
  if (min_steps == max_steps) return;

  // Every rank saw the same extremes, so all of them take this path: the gather is safe.
  std::vector<std::int64_t> steps(static_cast<std::size_t>(ctx.size()));
  runtime::allgather_bytes(ctx, &local_steps, sizeof local_steps, steps.data());
  constexpr int kListed = 16;
  std::string per_rank;
  for (int r = 0; r < ctx.size() && r < kListed; ++r)
    per_rank += (r ? ", " : "") + std::string("rank ") + std::to_string(r) + ": " + std::to_string(steps[static_cast<std::size_t>(r)]);
  if (ctx.size() > kListed) per_rank += ", ... (" + std::to_string(ctx.size() - kListed) + " more ranks)";
  throw CollectiveError(what + ": ranks would run different numbers of steps (min " + std::to_string(min_steps) + ", max " +
                        std::to_string(max_steps) + "; " + per_rank +
                        "), and a collective inside the step loop would deadlock. Use --strategy infinite-pad: every rank "
                        "pads with masked batches and all stop together when the global count of real rows is 0.");
}

}  // namespace spmd::sharding
