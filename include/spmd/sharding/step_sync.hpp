#pragma once
// Keeping ranks in step. A collective inside the step loop deadlocks when ranks run
// different numbers of steps, so:
//  - count_real_rows is the infinite-padding barrier: every rank calls it at the start of
//    every step with its count of real rows; the global sum (exact int64) is the same on
//    every rank, and when it is 0 all ranks leave the loop together;
//  - require_equal_step_counts checks, before a fixed-length loop, that every rank would run
//    the same number of steps, and otherwise throws on every rank (no rank is left waiting).
//
// Infinite-padding loop:
//   ShardBatcher batcher(n_local, {images, labels}, {.mode = BatchMode::InfinitePad, .geometry = g});
//   for (;;) {
//     const Batch& batch = *batcher.next();
//     const GlobalRowCount count = count_real_rows(ctx, batch);
//     if (count.all_done()) break;
//     ... step on batch ...
//   }
#include <cstdint>
#include <string>

#include "spmd/runtime/context.hpp"
#include "spmd/sharding/batching.hpp"

namespace spmd::sharding {

struct GlobalRowCount {
  std::int64_t real_rows = 0;  // real rows of this step summed over every device of every rank
  bool all_done() const { return real_rows == 0; }
};

// Collective over ctx.comm(): sums local_real_rows over ranks.
GlobalRowCount count_real_rows(const runtime::Context& ctx, std::int64_t local_real_rows);
// Collective: psum of the batch's per-device real rows over devices and ranks.
// batch.devices must have ctx.devices_per_rank() entries.
GlobalRowCount count_real_rows(const runtime::Context& ctx, const Batch& batch);

// Collective: min and max of local_steps over ranks. When they differ, every rank throws the
// same spmd::CollectiveError, naming `what` (e.g. "eval with --strategy pad"), each rank's
// step count, and the way out (--strategy infinite-pad).
void require_equal_step_counts(const runtime::Context& ctx, std::int64_t local_steps, const std::string& what);

}  // namespace spmd::sharding
