#pragma once
// The data path of the evaluation loops (spmd eval, the ensemble's test pass): a rank's rows
// arrive in blocks through prefetch_to_device, and the steps read their rows from the block
// that holds them.
//
// A block is many steps' worth of consecutive rows: the prefetch thread hands one over per
// queue operation, so its cost is spread over the block's steps (a hand-over per step would
// cost as much as the padding on a fast model). Block sizes are whole multiples of the
// step's rows, so a step never straddles two blocks.
//
// Producers: in_memory_blocks views rows held in memory (the ensemble's test set);
// file_blocks (file_row_blocks.hpp) reads each block from HDF5 into a buffer it owns
// (RowBlock::owner), which is what spmd eval streams. A producer runs on the prefetch thread
// and so must not make collective MPI-IO calls (see sharding/prefetch.hpp).
//
// Failures. A producer may fail on one rank only (a damaged file, a refused value). The
// loops' collectives (the count barrier, in-step psums, the pad step counts) follow a
// schedule computed from sizes, identical on every rank, so a rank whose rows cannot be read
// keeps that schedule and computes nothing: BlockReader then hands out no block and keeps the
// reason, and every rank learns of it at the next agreement (BlockReader::agree), at steps
// every rank runs (every block's worth of steps, at least kAgreementSteps apart, and after
// the last). No rank is left waiting, and all of them stop with the failing rank's message.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "spmd/runtime/context.hpp"
#include "spmd/sharding/host_array.hpp"
#include "spmd/sharding/prefetch.hpp"

namespace spmd::workloads {

struct RowBlock {
  std::int64_t first = 0;  // the block's first row, as an index into the rank's rows
  std::int64_t rows = 0;
  std::vector<sharding::ConstHostView> columns;  // each [rows, ...], in the order the producer documents
  std::shared_ptr<const void> owner;  // keeps the columns' bytes alive; empty for views of memory that outlives the pass
};

// What one pass's blocks come from.
struct BlockSource {
  std::function<std::optional<RowBlock>()> producer;  // run on the prefetch thread; nullopt ends the pass
  std::int64_t block_rows = 1;                        // rows of every block but the last (and a shorter first)
  RowBlock empty;  // 0 rows: each column's dtype and trailing shape (for steps that compute nothing)
};

// prefetch_to_device over a BlockSource, and what the loops need to know of its blocks
// before (or without) having one.
class RowBlocks {
 public:
  // Starts the prefetch thread. Throws spmd::Error for depth < 1 or an empty producer.
  RowBlocks(BlockSource source, std::size_t depth);

  // sharding::Prefetcher's next(); the time the main thread waits in it for the prefetch
  // thread's reads is charged to io (runtime/time_account.hpp).
  std::optional<RowBlock> next();
  std::int64_t block_rows() const { return block_rows_; }
  const RowBlock& empty() const { return empty_; }

 private:
  std::int64_t block_rows_;
  RowBlock empty_;
  sharding::Prefetcher<RowBlock> prefetcher_;  // last: its thread starts once the rest exists
};

// Blocks are this many steps' rows, near 16 MiB of row bytes (at least one step): big enough
// that hand-overs are rare, small enough that the few blocks of a pass in memory at once
// (the prefetch depth, one being read, one in use) stay modest. row_bytes: bytes of one row
// over every column.
std::int64_t block_rows_for(std::int64_t step_rows, std::int64_t row_bytes);

// Blocks of block_rows rows (the last one shorter) viewing columns held in memory (each
// [rows, ...], the same rows; they must outlive the prefetcher). A rank without rows gets
// one block of 0 rows.
BlockSource in_memory_blocks(std::vector<sharding::ConstHostView> columns, std::int64_t block_rows);

// The prefetch depth of the evaluation loops (flax's prefetch_to_device: 2).
inline constexpr std::size_t kBlockPrefetchDepth = 2;

// The fewest steps between two agreements on failed reads. Each is a collective that makes
// the ranks wait for the slowest, so they come rarer than the count barrier's window (its
// measured cost: tools/bench/README.md).
inline constexpr std::int64_t kAgreementSteps = 64;

// Reads blocks in order for steps that ask for their rows in increasing order.
class BlockReader {
 public:
  // step_rows: the rows of a step, for agree_at's period (a block's worth of steps, at least
  // kAgreementSteps).
  BlockReader(RowBlocks& blocks, std::int64_t step_rows);

  // The block holding rows [first, first + count): the current one, or the next ones taken
  // from the prefetcher (the current one is released first, so that a pass holds at most
  // depth + 1 blocks). count may be 0 (an all-padding step): then the empty block (0 rows,
  // placed at `first`) is given, and no block is taken. Returns nullptr once this rank's
  // rows cannot be read: the producer threw, the blocks ended before the rows, or a step's
  // rows straddle two blocks. The reason stays in error(), prefixed with the rank.
  const RowBlock* rows(std::int64_t first, std::int64_t count) {
    if (count == 0) {
      idle_.first = first;
      return &idle_;
    }
    if (current_ && first >= current_->first && first + count <= current_->first + current_->rows) return &*current_;
    return advance(first, count);
  }

  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }

  // Collective: every rank calls it at the same point; throws spmd::CollectiveError (the
  // lowest failing rank's message) on every rank when any rank's reader has failed. Returns
  // the stop signal agreed in the same allreduce (runtime/stop_request.hpp), 0 if none: the
  // loops stop on a signal at these agreements, at no extra cost, so within a block's worth
  // of steps (16 MiB of rows, at least kAgreementSteps).
  int agree(const runtime::Context& ctx) const;
  // agree() at step `step` when it starts a new period (step > 0), else 0: a loop whose ranks
  // run the same steps calls it on every step, so that a failure ends every rank within a
  // period instead of at the end of the pass.
  int agree_at(const runtime::Context& ctx, std::int64_t step) const {
    return step > 0 && step % agree_period_ == 0 ? agree(ctx) : 0;
  }

 private:
  const RowBlock* advance(std::int64_t first, std::int64_t count);

  RowBlocks& blocks_;
  std::int64_t agree_period_;
  RowBlock idle_;  // blocks_.empty(), moved to where the last all-padding step asked
  std::optional<RowBlock> current_;
  std::string error_;
};

}  // namespace spmd::workloads
