#include "spmd/workloads/padded_eval.hpp"

#include <algorithm>
#include <numeric>
#include <string>

#include "spmd/runtime/error.hpp"

namespace spmd::workloads {

namespace {
sharding::PadShardUnpadOptions wrapper_options(const PaddedEvalOptions& o, std::size_t statics) {
  if (o.step_rows < 1) throw Error("padded evaluation: step rows must be >= 1, got " + std::to_string(o.step_rows));
  if (o.batched_columns.empty() && !o.with_mask)
    throw Error("padded evaluation: no batched argument (no block column and no mask)");
  sharding::PadShardUnpadOptions po;
  po.devices = o.devices;
  po.static_argnums.resize(statics);
  std::iota(po.static_argnums.begin(), po.static_argnums.end(), 0);
  po.static_return = o.static_return;
  return po;
}
}  // namespace

PaddedEvalLoop::PaddedEvalLoop(Step step, PaddedEvalOptions options, std::vector<sharding::Arg> statics)
    : step_(std::move(step)),
      options_(std::move(options)),
      statics_(statics.size()),
      args_(std::move(statics)),
      ones_(options_.with_mask ? static_cast<std::size_t>(options_.step_rows) : 0, 1),
      wrapped_([this](const sharding::ShardedArgs& a) { return step_(a, *current_); }, wrapper_options(options_, statics_)) {
  if (!step_) throw Error("padded evaluation: the step function is empty");
}

std::int64_t PaddedEvalLoop::run(const runtime::Context& ctx, RowBlocks& blocks, std::int64_t rows, std::int64_t steps,
                                 const OnOutput& on_output) {
  const PaddedEvalOptions& o = options_;
  BlockReader reader(blocks, o.step_rows);
  // Placeholders for the batched arguments, replaced by views every step (no allocation).
  args_.resize(statics_ + o.batched_columns.size() + (o.with_mask ? 1 : 0), sharding::ConstHostView());
  const sharding::NamedArgs no_kwargs;
  std::int64_t s = 0;
  for (; s < steps; ++s) {
    if (o.step_phase) ctx.set_step_phase(o.step_phase, s);
    if (const int stop = reader.agree_at(ctx, s); stop && o.stop_on_request) {
      stop_signal_ = stop;
      break;
    }
    PaddedStep step;
    step.step = s;
    step.first = std::min(rows, s * o.step_rows);
    step.rows = std::min(o.step_rows, rows - step.first);
    step.block = reader.rows(step.first, step.rows);
    const bool readable = step.block != nullptr;
    if (!readable) {
      // This rank's rows cannot be read: the step still runs, all padding, for the
      // collectives inside it (an in-step psum); the agreement ends every rank.
      step.rows = 0;
      step.block = reader.rows(step.first, 0);
    }
    step.device_batch = device_batch_for(step.rows);
    std::size_t k = statics_;
    for (std::size_t j = 0; j < o.batched_columns.size(); ++j) {
      const std::uint8_t padding = j < o.padding_bytes.size() ? o.padding_bytes[j] : 0;
      args_[k++] = sharding::Arg(step.block->columns.at(o.batched_columns[j]).slice_rows(step.offset(), step.rows))
                       .padded_with(padding);
    }
    if (o.with_mask)
      args_[k] = sharding::ConstHostView(sharding::DType::UInt8, {step.rows}, reinterpret_cast<const std::byte*>(ones_.data()));
    current_ = &step;
    auto outputs = wrapped_(args_, no_kwargs, {o.min_device_batch});
    current_ = nullptr;
    if (on_output && readable) on_output(step, outputs);
  }
  reader.agree(ctx);
  return s;
}

}  // namespace spmd::workloads
