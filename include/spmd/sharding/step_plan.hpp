#pragma once
// The step plan: which of a rank's rows each step takes and how each device's share is
// padded, from sizes alone (no data). One plan serves every strategy of Flax's full-dataset
// evaluation guide; they differ only in the number of steps and the shortest device batch:
//
//  - DropRemainder: floor(n / (d*B)) full steps; the last n mod d*B rows are never seen.
//  - KeepRemainder: full steps, then one smaller step of the r = n mod d*B remaining rows
//    (min device batch 0: its shape is that of its data). A second shape: a second compiled
//    program / buffer set; one device in total only.
//  - PadWithMask: ceil(n / (d*B)) steps, the last padded to the full shape. `steps` may ask
//    for more (pad_step_count over global sizes, so that every rank runs the same number of
//    steps); the extra steps are all padding.
//  - InfinitePad: like PadWithMask, then endless all-padding steps. The loop ends when every
//    rank is out of real rows: see step_sync.hpp (the count barrier).
//
// Step s takes the rank's rows [s*d*B, (s+1)*d*B) cut at n: b real rows, which
// pad_shard_unpad's rule shards over the d devices: b_dev = max(ceil(b / d), m) rows each
// (m: the min device batch, B for every strategy but keep-remainder), device i holding rows
// i*b_dev .. of the step, its real ones first. The real rows of a step are its leading rows:
// padding only ever follows them.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

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
  std::int64_t first = 0;      // offset of the device's first row within the step's padded batch
  std::int64_t rows = 0;       // rows it gets: b_dev
  std::int64_t real_rows = 0;  // of which real (its leading ones); the others are padding
  friend bool operator==(const DeviceRows&, const DeviceRows&) = default;
};

// Layout of one step.
struct StepLayout {
  std::int64_t step = 0;
  std::int64_t shard_first = 0;  // shard row of the step's first row (n when all padding)
  std::int64_t rows = 0;         // rows of the padded batch: d * b_dev
  std::int64_t real_rows = 0;    // b: shard rows [shard_first, shard_first + real_rows)
  std::int64_t device_batch = 0;    // b_dev
  std::vector<DeviceRows> devices;  // d entries
};

class StepPlan {
 public:
  // The plan of `mode` for a shard of `shard_rows` rows. steps: PadWithMask's count (>= the
  // local one, typically pad_step_count) or DropRemainder's (<= the local one: the smallest
  // shard's, so that every rank runs the same steps); unset: the local count. min_device_batch
  // (PadWithMask only; 0: B) lowers the short last step's rows per device (pad_shard_unpad's
  // min_device_batch). Throws spmd::Error for an invalid geometry, a negative size, a step
  // count that drops data under padding or another misuse.
  StepPlan(BatchMode mode, std::int64_t shard_rows, const BatchGeometry& geometry,
           std::optional<std::int64_t> steps = std::nullopt, std::int64_t min_device_batch = 0);

  // Steps in total; nullopt for InfinitePad (the count barrier ends it).
  std::optional<std::int64_t> steps() const { return steps_; }
  // Real rows of step `step` (>= 0); 0 past the last step. What a count barrier sums ahead.
  std::int64_t real_rows_of_step(std::int64_t step) const;
  // Layout of step `step` (0-based); below steps(), any step >= 0 for InfinitePad.
  StepLayout layout(std::int64_t step) const;

  BatchMode mode() const { return mode_; }
  const BatchGeometry& geometry() const { return geometry_; }
  std::int64_t shard_rows() const { return shard_rows_; }
  std::int64_t min_device_batch() const { return min_device_batch_; }  // m
  // Rows of the shard no step takes (DropRemainder's remainder).
  std::int64_t dropped_rows() const;

 private:
  BatchMode mode_;
  std::int64_t shard_rows_;
  BatchGeometry geometry_;
  std::optional<std::int64_t> steps_;
  std::int64_t min_device_batch_;
};

}  // namespace spmd::sharding
