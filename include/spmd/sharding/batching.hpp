#pragma once
// Batch iteration over one rank's shard: rows [0, n) of in-memory arrays.
//
// A step is global-step sized: the rank consumes d*B rows per step (d local devices, B rows
// per device), device-major: device j gets the step's rows j*B .. (j+1)*B - 1. Modes:
//  - DropRemainder: floor(n / (d*B)) full steps; the last n mod d*B rows are never seen.
//  - KeepRemainder: full steps, then one smaller step of the r = n mod d*B remaining rows,
//    dealt B per device in device order (devices past the end get 0 rows). The last step
//    has another shape: a second compiled program / buffer set; single-rank use only.
//  - PadWithMask: ceil(n / (d*B)) steps of d*B rows; the last one is padded with zero rows
//    whose mask is 0. `steps` may ask for more (e.g. pad_step_count over global sizes, so
//    that every rank runs the same number of steps); the extra steps are all padding.
//  - InfinitePad: like PadWithMask, then endless all-padding steps (mask all 0). The loop
//    ends when every rank is out of real rows: see step_sync.hpp (count_real_rows).
// In every mode the real rows of a step are its leading rows: padding only ever follows them.
//
// Memory: full steps and keep-remainder's last step are views into the shard, no copy. A
// step with padding is served from one padding buffer per column of d*B rows, allocated at
// the first padded step and reused (only the rows that held data are re-zeroed).
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "spmd/sharding/host_array.hpp"

namespace spmd::sharding {

enum class BatchMode { DropRemainder, KeepRemainder, PadWithMask, InfinitePad };

// "drop-remainder", "keep-remainder", "pad", "infinite-pad" (the --strategy spellings).
const char* to_string(BatchMode mode);
// Parses those spellings; throws spmd::Error naming the valid ones.
BatchMode parse_batch_mode(const std::string& text);

struct BatchGeometry {
  int devices = 1;                // d: local devices of this rank (>= 1)
  std::int64_t device_batch = 1;  // B: rows per device per step (>= 1)
  std::int64_t step_rows() const { return static_cast<std::int64_t>(devices) * device_batch; }
  // Throws spmd::Error naming the field and the constraint.
  void validate() const;
};

// Steps a rank with `shard_rows` rows runs on its own: floor for DropRemainder, ceil for
// the others (for InfinitePad: the steps that hold real rows).
std::int64_t local_step_count(BatchMode mode, std::int64_t shard_rows, const BatchGeometry& geometry);

// Steps of PadWithMask when `global_rows` are split over `process_count` ranks with
// split_for_process: the largest shard decides, ceil(ceil(N / P) / (d*B)). Computed from
// global sizes only, so every rank gets the same number.
std::int64_t pad_step_count(std::int64_t global_rows, int process_count, const BatchGeometry& geometry);

// Where one device's rows of a step lie.
struct DeviceRows {
  std::int64_t first = 0;      // offset of the device's first row within the step's batch
  std::int64_t rows = 0;       // rows it gets: B (fewer only in keep-remainder's last step)
  std::int64_t real_rows = 0;  // of which real; the others are zero padding with mask 0
  friend bool operator==(const DeviceRows&, const DeviceRows&) = default;
};

// Layout of one step, from sizes alone (no data).
struct StepLayout {
  std::int64_t step = 0;
  std::int64_t shard_first = 0;  // shard row of the step's first row (n when all padding)
  std::int64_t rows = 0;         // rows of the step's batch: d*B, or r in keep-remainder's last step
  std::int64_t real_rows = 0;    // real (shard) rows: shard rows [shard_first, shard_first + real_rows)
  std::vector<DeviceRows> devices;  // d entries
};

// Layout of step `step` (0-based). For DropRemainder / KeepRemainder the step must be below
// local_step_count; for PadWithMask / InfinitePad any step >= 0 (later ones are padding).
StepLayout plan_step(BatchMode mode, std::int64_t shard_rows, const BatchGeometry& geometry, std::int64_t step);

// One device's part of a step.
struct DeviceBatch {
  std::int64_t rows = 0;
  std::int64_t real_rows = 0;
  std::vector<ConstHostView> columns;  // each [rows, ...]: its leading real_rows rows are data
  std::span<const std::uint8_t> mask;  // [rows]: 1 for the real rows, 0 for padding
};

// One step of the batcher.
struct Batch {
  StepLayout layout;
  bool padded = false;                 // the views point into the padding buffers
  std::vector<ConstHostView> columns;  // each [layout.rows, ...], device-major
  std::span<const std::uint8_t> mask;  // [layout.rows]
  std::vector<DeviceBatch> devices;    // d entries, views into `columns` and `mask`
  std::int64_t rows() const { return layout.rows; }
  std::int64_t real_rows() const { return layout.real_rows; }
};

struct BatcherOptions {
  BatchMode mode = BatchMode::PadWithMask;
  BatchGeometry geometry;
  // PadWithMask only: the number of steps to run, >= local_step_count (typically
  // pad_step_count of the global sizes). Unset: local_step_count.
  std::optional<std::int64_t> steps;
};

class ShardBatcher {
 public:
  // columns: this rank's arrays, each [shard_rows, ...] (the same leading size, checked);
  // viewed, not copied: they must outlive the batcher. shard_rows may be 0. Throws
  // spmd::Error for an invalid geometry, a column of another size, or `steps` outside its range.
  ShardBatcher(std::int64_t shard_rows, std::vector<ConstHostView> columns, BatcherOptions options);

  // The next step, or nullptr after the last one (never for InfinitePad). The batch and its
  // views stay valid until the next call of next() or the end of the batcher.
  const Batch* next();

  // Real rows of step `step` (0-based), from sizes alone; 0 past the last step. What a count
  // barrier sums ahead of the steps.
  std::int64_t real_rows_of_step(std::int64_t step) const;

  // Steps next() yields in total; nullopt for InfinitePad.
  std::optional<std::int64_t> step_count() const;
  std::int64_t shard_rows() const { return shard_rows_; }
  const BatcherOptions& options() const { return options_; }

 private:
  void fill_padded(const StepLayout& layout);

  std::int64_t shard_rows_;
  std::vector<ConstHostView> shard_;
  BatcherOptions options_;
  std::optional<std::int64_t> steps_;
  std::int64_t next_step_ = 0;
  Batch current_;
  std::vector<HostArray> padding_;  // per column, [d*B, ...]; empty until a padded step
  std::int64_t dirty_rows_ = 0;     // leading rows of the padding buffers that may hold data
  std::vector<std::uint8_t> ones_;  // [d*B] all 1: the mask of a full step
  std::vector<std::uint8_t> padded_mask_;  // [d*B] mask of the current padded step
};

}  // namespace spmd::sharding
