#pragma once
// The padded evaluation loop of Flax's full-dataset evaluation guide (pad_shard_unpad), shared
// by spmd eval (--strategy pad / pad-metrics) and the ensemble's test pass: the one place
// where the product pads evaluation batches.
//
// Step s covers rows [s*step_rows, (s+1)*step_rows) of the rank's rows, cut at the end: the
// last real step is shorter, and steps past the rows are empty. pad_shard_unpad pads each to
// the same shape [devices, max(ceil(b / devices), min_device_batch), ...], so every step of
// every rank runs one shape, and the number of steps (from global sizes) is the same
// everywhere. The rows come in blocks through prefetch_to_device (row_blocks.hpp).
//
// The wrapped step is called as pad_shard_unpad calls it, with the statics first (passed
// through), then the chosen block columns' rows of the step as batched arguments, then (with
// with_mask) a mask [b] of ones, which pad_shard_unpad pads with zeros. It also receives the
// block that holds the step's rows, for columns it reads directly: the step's real rows are
// rows [first - block.first, ...) of the block (PaddedStep) and its shards' leading rows.
#include <cstdint>
#include <functional>
#include <vector>

#include "spmd/runtime/context.hpp"
#include "spmd/sharding/pad_shard_unpad.hpp"
#include "spmd/workloads/row_blocks.hpp"

namespace spmd::workloads {

struct PaddedEvalOptions {
  int devices = 1;                    // pad_shard_unpad's d: a step's rows are sharded over them
  std::int64_t step_rows = 1;         // rows per step before padding (>= 1)
  std::int64_t min_device_batch = 0;  // pad every device's shard to at least this many rows
  std::vector<std::size_t> batched_columns;  // block columns passed as batched arguments, in order
  // Per batched column (missing: 0), the byte its padding rows are filled with: 0 in every
  // product run; tests poison them (sharding::Arg::padded_with). The mask's padding is 0.
  std::vector<std::uint8_t> padding_bytes;
  bool with_mask = false;             // append a mask [b] of ones (uint8) as the last batched argument
  bool static_return = false;         // pad_shard_unpad's: the step returns its outputs as they are
  // Per-step watchdog phase "NAME STEP" (a string literal), or nullptr to leave the caller's.
  const char* step_phase = nullptr;
  // Stop early when a stop signal is agreed (BlockReader::agree_at): spmd eval's loop; not
  // the ensemble's test pass, whose stop comes between training steps.
  bool stop_on_request = false;
};

// Where a step's rows are.
struct PaddedStep {
  std::int64_t step = 0;
  std::int64_t first = 0;         // the step's first row in the rank's rows
  std::int64_t rows = 0;          // real rows b (0 for a step past the rank's rows)
  std::int64_t device_batch = 0;  // rows per device after padding
  const RowBlock* block = nullptr;
  std::int64_t offset() const { return first - block->first; }  // of the step's rows in the block
};

class PaddedEvalLoop {
 public:
  using Step = std::function<std::vector<sharding::HostArray>(const sharding::ShardedArgs&, const PaddedStep&)>;
  using OnOutput = std::function<void(const PaddedStep&, std::vector<sharding::HostArray>& outputs)>;

  // statics: the leading arguments passed through untouched (opaque references or arrays);
  // they must outlive the loop. Throws spmd::Error for bad options.
  PaddedEvalLoop(Step step, PaddedEvalOptions options, std::vector<sharding::Arg> statics = {});
  PaddedEvalLoop(const PaddedEvalLoop&) = delete;  // the wrapped step points back here
  PaddedEvalLoop& operator=(const PaddedEvalLoop&) = delete;

  // One pass of `steps` steps over `rows` rows read from `blocks`. on_output (may be empty)
  // receives each step's outputs as pad_shard_unpad returns them; it may move them away.
  // Collective: every rank runs the same number of steps. When this rank's rows cannot be
  // read (row_blocks.hpp), its remaining steps run as all-padding steps (b = 0) without
  // on_output, so that collectives inside the step still match, and every rank throws
  // spmd::CollectiveError at the next agreement (BlockReader::agree_at, or at the end).
  // Returns the steps run: `steps`, or fewer after an agreed stop (stop_signal() says which).
  std::int64_t run(const runtime::Context& ctx, RowBlocks& blocks, std::int64_t rows, std::int64_t steps,
                   const OnOutput& on_output = {});
  int stop_signal() const { return stop_signal_; }

  // Rows per device of a step with b real rows.
  std::int64_t device_batch_for(std::int64_t b) const { return wrapped_.device_batch_for(b, options_.min_device_batch); }
  const PaddedEvalOptions& options() const { return options_; }

 private:
  Step step_;
  PaddedEvalOptions options_;
  std::size_t statics_;
  int stop_signal_ = 0;
  std::vector<sharding::Arg> args_;  // statics, then the step's batched arguments (replaced each step)
  std::vector<std::uint8_t> ones_;   // the mask's real part
  const PaddedStep* current_ = nullptr;
  sharding::PadShardUnpad wrapped_;
};

}  // namespace spmd::workloads
