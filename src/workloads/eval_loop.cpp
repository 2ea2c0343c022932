#include "spmd/workloads/eval_loop.hpp"

#include <algorithm>
#include <optional>
#include <string>

#include "spmd/runtime/error.hpp"
#include "spmd/sharding/step_sync.hpp"

namespace spmd::workloads {

EvalLoop::EvalLoop(int devices, EvalLoopOptions options) : options_(std::move(options)), wrapper_(devices) {
  if (options_.columns.empty() && !options_.with_mask)
    throw Error("evaluation loop: no batched argument (no block column and no mask)");
}

std::int64_t EvalLoop::run(const runtime::Context& ctx, RowBlocks& blocks, const sharding::StepPlan& plan,
                           const Step& step) {
  const EvalLoopOptions& o = options_;
  const std::int64_t step_rows = plan.geometry().step_rows();
  BlockReader reader(blocks, step_rows);
  std::optional<sharding::WindowedCountBarrier> barrier;  // infinite padding's count barrier
  if (!plan.steps()) barrier.emplace(ctx, o.count_window);
  const auto real_rows_of_step = [&](std::int64_t s) { return plan.real_rows_of_step(s); };
  if (o.with_mask) ones_.assign(static_cast<std::size_t>(step_rows), 1);
  std::int64_t s = 0;
  for (;; ++s) {
    if (plan.steps() && s >= *plan.steps()) break;
    if (o.step_phase) ctx.set_step_phase(o.step_phase, s);
    if (barrier && barrier->count(s, real_rows_of_step).all_done()) break;
    if (o.agreements) {
      // Every rank runs this step: a failed read elsewhere ends it here, and a signal stops it.
      if (const int stop = reader.agree_at(ctx, s); stop && o.stop_on_request) {
        stop_signal_ = stop;
        break;
      }
    }
    const std::int64_t first = std::min(plan.shard_rows(), s * step_rows);
    std::int64_t rows = plan.real_rows_of_step(s);
    const RowBlock* block = reader.rows(first, rows);
    const bool readable = block != nullptr;
    if (!readable) {
      if (!o.agreements) break;  // no collective to keep in step with: agreed below
      rows = 0;
      block = reader.rows(first, 0);
    }
    args_.clear();
    for (const EvalColumn& c : o.columns)
      args_.emplace_back(block->columns.at(c.column).slice_rows(first - block->first, rows), c.padding, c.padding_byte);
    if (o.with_mask)
      args_.emplace_back(sharding::ConstHostView(sharding::DType::UInt8, {rows}, reinterpret_cast<const std::byte*>(ones_.data())));
    const sharding::Shards& shards = wrapper_.shard(args_, plan.min_device_batch());
    step(EvalStep{s, first, shards, readable});
  }
  reader.agree(ctx);
  return s;
}

}  // namespace spmd::workloads
