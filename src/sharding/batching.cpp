#include "spmd/sharding/batching.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

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

StepLayout plan_step(BatchMode mode, std::int64_t shard_rows, const BatchGeometry& geometry, std::int64_t step) {
  geometry.validate();
  require_rows(shard_rows);
  const bool bounded = mode == BatchMode::DropRemainder || mode == BatchMode::KeepRemainder;
  if (step < 0 || (bounded && step >= local_step_count(mode, shard_rows, geometry)))
    throw Error("batching: step " + std::to_string(step) + " is outside the " + to_string(mode) + " steps of a shard of " +
                std::to_string(shard_rows) + " rows");
  const std::int64_t B = geometry.device_batch;
  StepLayout layout;
  layout.step = step;
  layout.shard_first = std::min(step * geometry.step_rows(), shard_rows);
  layout.real_rows = std::min(geometry.step_rows(), shard_rows - layout.shard_first);
  // Keep-remainder's last step is as long as its data; every other step is d*B rows.
  layout.rows = mode == BatchMode::KeepRemainder ? layout.real_rows : geometry.step_rows();
  layout.devices.resize(static_cast<std::size_t>(geometry.devices));
  for (int j = 0; j < geometry.devices; ++j) {
    DeviceRows& dev = layout.devices[static_cast<std::size_t>(j)];
    dev.first = std::min(j * B, layout.rows);
    dev.rows = std::min(B, layout.rows - dev.first);
    dev.real_rows = std::clamp(layout.real_rows - j * B, std::int64_t{0}, B);
  }
  return layout;
}

ShardBatcher::ShardBatcher(std::int64_t shard_rows, std::vector<ConstHostView> columns, BatcherOptions options)
    : shard_rows_(shard_rows), shard_(std::move(columns)), options_(std::move(options)) {
  options_.geometry.validate();
  require_rows(shard_rows_);
  for (std::size_t k = 0; k < shard_.size(); ++k) {
    if (shard_[k].rank() == 0 || shard_[k].rows() != shard_rows_)
      throw Error("batching: column " + std::to_string(k) + " has shape " + to_string(shard_[k].shape()) +
                  ", but the shard has " + std::to_string(shard_rows_) + " rows");
  }
  const std::int64_t needed = local_step_count(options_.mode, shard_rows_, options_.geometry);
  if (options_.steps) {
    if (options_.mode != BatchMode::PadWithMask)
      throw Error(std::string("batching: a fixed step count applies to the pad strategy only, not ") + to_string(options_.mode));
    if (*options_.steps < needed)
      throw Error("batching: " + std::to_string(*options_.steps) + " steps cannot hold this rank's " +
                  std::to_string(shard_rows_) + " rows at " + std::to_string(options_.geometry.step_rows()) +
                  " rows per step (" + std::to_string(needed) + " steps needed); padding must never drop data");
  }
  if (options_.mode != BatchMode::InfinitePad) steps_ = options_.steps.value_or(needed);
  ones_.assign(static_cast<std::size_t>(options_.geometry.step_rows()), 1);
}

std::optional<std::int64_t> ShardBatcher::step_count() const { return steps_; }

std::int64_t ShardBatcher::real_rows_of_step(std::int64_t step) const {
  if (step < 0) throw Error("batching: negative step " + std::to_string(step));
  if (steps_ && step >= *steps_) return 0;
  // plan_step's real_rows, without building the per-device layout.
  const std::int64_t first = std::min(step * options_.geometry.step_rows(), shard_rows_);
  return std::min(options_.geometry.step_rows(), shard_rows_ - first);
}

void ShardBatcher::fill_padded(const StepLayout& layout) {
  if (padding_.empty()) {
    padding_.reserve(shard_.size());
    for (const auto& column : shard_) {
      Shape shape = column.shape();
      shape[0] = options_.geometry.step_rows();
      padding_.emplace_back(column.dtype(), std::move(shape));
    }
    padded_mask_.assign(ones_.size(), 0);
  }
  for (std::size_t k = 0; k < shard_.size(); ++k) {
    const std::size_t row_bytes = shard_[k].row_bytes();
    std::byte* dst = padding_[k].view().bytes();
    const std::int64_t real = layout.real_rows;
    if (real > 0) std::memcpy(dst, shard_[k].slice_rows(layout.shard_first, real).bytes(), static_cast<std::size_t>(real) * row_bytes);
    if (dirty_rows_ > real)
      std::memset(dst + static_cast<std::size_t>(real) * row_bytes, 0, static_cast<std::size_t>(dirty_rows_ - real) * row_bytes);
  }
  dirty_rows_ = layout.real_rows;
  std::fill(padded_mask_.begin(), padded_mask_.end(), 0);
  std::fill_n(padded_mask_.begin(), layout.real_rows, 1);
}

const Batch* ShardBatcher::next() {
  if (steps_ && next_step_ >= *steps_) return nullptr;
  Batch& b = current_;
  b.layout = plan_step(options_.mode, shard_rows_, options_.geometry, next_step_++);
  const StepLayout& layout = b.layout;
  b.padded = layout.real_rows < layout.rows;
  b.columns.clear();
  if (b.padded) {
    fill_padded(layout);
    for (auto& buffer : padding_) b.columns.push_back(std::as_const(buffer).view());
    b.mask = std::span<const std::uint8_t>(padded_mask_.data(), static_cast<std::size_t>(layout.rows));
  } else {
    for (const auto& column : shard_) b.columns.push_back(column.slice_rows(layout.shard_first, layout.rows));
    b.mask = std::span<const std::uint8_t>(ones_.data(), static_cast<std::size_t>(layout.rows));
  }
  b.devices.resize(layout.devices.size());
  for (std::size_t j = 0; j < layout.devices.size(); ++j) {
    const DeviceRows& rows = layout.devices[j];
    DeviceBatch& dev = b.devices[j];
    dev.rows = rows.rows;
    dev.real_rows = rows.real_rows;
    dev.columns.clear();
    for (const auto& column : b.columns) dev.columns.push_back(column.slice_rows(rows.first, rows.rows));
    dev.mask = b.mask.subspan(static_cast<std::size_t>(rows.first), static_cast<std::size_t>(rows.rows));
  }
  return &b;
}

}  // namespace spmd::sharding
