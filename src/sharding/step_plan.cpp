#include "spmd/sharding/step_plan.hpp"

#include <algorithm>

#include "spmd/runtime/error.hpp"
#include "spmd/sharding/pad_shard_unpad.hpp"
#include "spmd/sharding/split.hpp"

namespace spmd::sharding {

const char* to_string(BatchMode mode) {
  switch (mode) {
    case BatchMode::DropRemainder: return "drop-remainder";
    case BatchMode::KeepRemainder: return "keep-remainder";
    case BatchMode::PadWithMask: return "pad";
    case BatchMode::InfinitePad: return "infinite-pad";
  }
  return "unknown";
}

BatchMode parse_batch_mode(const std::string& text) {
  for (const auto mode : {BatchMode::DropRemainder, BatchMode::KeepRemainder, BatchMode::PadWithMask, BatchMode::InfinitePad})
    if (text == to_string(mode)) return mode;
  throw Error("batch strategy must be one of drop-remainder, keep-remainder, pad, infinite-pad (got '" + text + "')");
}

void BatchGeometry::validate() const {
  if (devices < 1) throw Error("batch geometry: devices (local devices per rank) must be >= 1, got " + std::to_string(devices));
  if (device_batch < 1)
    throw Error("batch geometry: device_batch (rows per device per step) must be >= 1, got " + std::to_string(device_batch));
}

namespace {
std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

void require_rows(std::int64_t shard_rows) {
  if (shard_rows < 0) throw Error("batching: shard rows must be >= 0, got " + std::to_string(shard_rows));
}
}  // namespace

std::int64_t local_step_count(BatchMode mode, std::int64_t shard_rows, const BatchGeometry& geometry) {
  geometry.validate();
  require_rows(shard_rows);
  const std::int64_t step = geometry.step_rows();
  return mode == BatchMode::DropRemainder ? shard_rows / step : ceil_div(shard_rows, step);
}

std::int64_t pad_step_count(std::int64_t global_rows, int process_count, const BatchGeometry& geometry) {
  geometry.validate();
  return ceil_div(largest_split(global_rows, process_count), geometry.step_rows());
}

StepPlan::StepPlan(BatchMode mode, std::int64_t shard_rows, const BatchGeometry& geometry,
                   std::optional<std::int64_t> steps, std::int64_t min_device_batch)
    : mode_(mode), shard_rows_(shard_rows), geometry_(geometry) {
  geometry_.validate();
  require_rows(shard_rows_);
  if (min_device_batch < 0 || (min_device_batch > 0 && mode != BatchMode::PadWithMask))
    throw Error("step plan: a min device batch (" + std::to_string(min_device_batch) +
                ") applies to the pad strategy only and must be >= 0");
  min_device_batch_ = mode == BatchMode::KeepRemainder ? 0 : min_device_batch > 0 ? min_device_batch : geometry_.device_batch;
  const std::int64_t needed = local_step_count(mode, shard_rows_, geometry_);
  if (steps) {
    if (mode == BatchMode::PadWithMask && *steps < needed)
      throw Error("step plan: " + std::to_string(*steps) + " steps cannot hold this rank's " + std::to_string(shard_rows_) +
                  " rows at " + std::to_string(geometry_.step_rows()) + " rows per step (" + std::to_string(needed) +
                  " steps needed); padding must never drop data");
    if (mode == BatchMode::DropRemainder && (*steps < 0 || *steps > needed))
      throw Error("step plan: drop-remainder runs at most this rank's " + std::to_string(needed) + " full steps, not " +
                  std::to_string(*steps));
    if (mode == BatchMode::KeepRemainder || mode == BatchMode::InfinitePad)
      throw Error(std::string("step plan: a fixed step count applies to pad and drop-remainder, not ") + to_string(mode));
  }
  if (mode != BatchMode::InfinitePad) steps_ = steps.value_or(needed);
}

std::int64_t StepPlan::real_rows_of_step(std::int64_t step) const {
  if (step < 0) throw Error("step plan: negative step " + std::to_string(step));
  if (steps_ && step >= *steps_) return 0;
  const std::int64_t first = std::min(step * geometry_.step_rows(), shard_rows_);
  return std::min(geometry_.step_rows(), shard_rows_ - first);
}

std::int64_t StepPlan::dropped_rows() const {
  return steps_ ? std::max<std::int64_t>(0, shard_rows_ - *steps_ * geometry_.step_rows()) : 0;
}

StepLayout StepPlan::layout(std::int64_t step) const {
  if (step < 0 || (steps_ && mode_ != BatchMode::PadWithMask && step >= *steps_))
    throw Error("step plan: step " + std::to_string(step) + " is outside the " + to_string(mode_) + " steps of a shard of " +
                std::to_string(shard_rows_) + " rows");
  StepLayout layout;
  layout.step = step;
  layout.shard_first = std::min(step * geometry_.step_rows(), shard_rows_);
  layout.real_rows = real_rows_of_step(step);
  layout.device_batch = device_batch_for(layout.real_rows, geometry_.devices, min_device_batch_);
  layout.rows = geometry_.devices * layout.device_batch;
  layout.devices.resize(static_cast<std::size_t>(geometry_.devices));
  for (int j = 0; j < geometry_.devices; ++j) {
    DeviceRows& dev = layout.devices[static_cast<std::size_t>(j)];
    dev.first = j * layout.device_batch;
    dev.rows = layout.device_batch;
    dev.real_rows = std::clamp(layout.real_rows - dev.first, std::int64_t{0}, layout.device_batch);
  }
  return layout;
}

}  // namespace spmd::sharding
