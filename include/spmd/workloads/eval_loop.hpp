#pragma once
// The evaluation loop: one for every strategy of spmd eval, its --benchmark reference (the
// plain forward) and the ensemble's test pass. A strategy only picks the step plan
// (sharding/step_plan.hpp: how many steps, how each is padded, or the count barrier of
// infinite padding); the step is the caller's (pad-metrics adds its in-step psum there).
//
// Each step takes its rows from the block that holds them (row_blocks.hpp: the rank's rows
// arrive in blocks through prefetch_to_device), passes the chosen block columns through
// pad_shard_unpad, and calls the step with the [d, b_dev, ...] shards (then, with_mask, a
// mask [d, b_dev] of ones for the real rows, zeros for the padding).
//
// Collective (every rank runs the same steps) unless `agreements` is off: a rank whose rows
// cannot be read keeps the schedule with all-padding steps (readable = false) so that
// collectives inside the step still match, and every rank throws spmd::CollectiveError at
// the next agreement (BlockReader::agree_at, or at the end).
#include <cstdint>
#include <functional>
#include <vector>

#include "spmd/runtime/context.hpp"
#include "spmd/sharding/pad_shard_unpad.hpp"
#include "spmd/sharding/step_plan.hpp"
#include "spmd/workloads/row_blocks.hpp"

namespace spmd::workloads {

// A block column passed to the step as a batched argument.
struct EvalColumn {
  std::size_t column = 0;  // index into RowBlock::columns
  sharding::Batched::Padding padding = sharding::Batched::Padding::Filled;
  std::uint8_t padding_byte = 0;  // 0 in every product run; tests poison it (see Batched)
};

struct EvalLoopOptions {
  std::vector<EvalColumn> columns;  // at least one, or with_mask
  bool with_mask = false;           // append a uint8 mask as the last batched argument
  // Per-step watchdog phase "NAME STEP" (a string literal), or nullptr to leave the caller's.
  const char* step_phase = nullptr;
  // Stop early when a stop signal is agreed (spmd eval; not the ensemble's test pass, whose
  // stop comes between training steps).
  bool stop_on_request = false;
  // false: the ranks run their own steps with no collective inside the loop and one
  // agreement on failed reads at its end (the plain forward, the benchmark's reference).
  bool agreements = true;
  int count_window = 16;  // infinite padding: steps whose real rows one allreduce counts
};

// One step as the step function sees it; valid during the call.
struct EvalStep {
  std::int64_t step = 0;
  std::int64_t first = 0;  // the step's first row in the rank's rows
  const sharding::Shards& shards;
  bool readable = true;    // false: this rank's rows cannot be read; shards are all padding
  std::int64_t rows() const { return shards.batch(); }  // real rows b
};

class EvalLoop {
 public:
  using Step = std::function<void(const EvalStep&)>;

  // Throws spmd::Error for devices < 1 or no batched argument.
  EvalLoop(int devices, EvalLoopOptions options);

  // Runs the plan's steps over `blocks` (whose rows are the plan's shard rows). Returns the
  // steps run: the plan's, fewer after an agreed stop (stop_signal() says which), or, under
  // infinite padding, those before the count barrier found every rank out of rows.
  std::int64_t run(const runtime::Context& ctx, RowBlocks& blocks, const sharding::StepPlan& plan, const Step& step);
  int stop_signal() const { return stop_signal_; }

  // pad_shard_unpad's unpad of a per-device output [d, b_dev, ...] of the current step.
  void unpad(sharding::HostArray& output) const { wrapper_.unpad(output); }

 private:
  EvalLoopOptions options_;
  sharding::PadShardUnpad wrapper_;
  std::vector<sharding::Batched> args_;  // the step's batched arguments (replaced each step)
  std::vector<std::uint8_t> ones_;       // the mask's real part
  int stop_signal_ = 0;
};

}  // namespace spmd::workloads
