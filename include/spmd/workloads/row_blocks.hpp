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
// Today the producer views the shard already in memory (in_memory_blocks). A producer that
// reads each block from HDF5 into a buffer it owns (RowBlock::owner) plugs in unchanged:
// the loops only see blocks. Such a producer runs on the prefetch thread and so must not
// make collective MPI-IO calls (see sharding/prefetch.hpp).
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "spmd/sharding/host_array.hpp"
#include "spmd/sharding/prefetch.hpp"

namespace spmd::workloads {

struct RowBlock {
  std::int64_t first = 0;  // the block's first row, as an index into the rank's rows
  std::int64_t rows = 0;
  std::vector<sharding::ConstHostView> columns;  // each [rows, ...], in the order the producer documents
  std::shared_ptr<const void> owner;  // keeps the columns' bytes alive; empty for views of memory that outlives the pass
};

using RowBlocks = sharding::Prefetcher<RowBlock>;

// Blocks are this many steps' rows, near 16 MiB of row bytes (at least one step): big enough
// that hand-overs are rare, small enough that two of them queued stay modest once blocks are
// read from disk. row_bytes: bytes of one row over every column.
std::int64_t block_rows_for(std::int64_t step_rows, std::int64_t row_bytes);

// Blocks of block_rows rows (the last one shorter) viewing columns held in memory (each
// [rows, ...], the same rows; they must outlive the prefetcher). A rank without rows gets
// one block of 0 rows: the columns' dtypes and trailing shapes are what padding needs.
RowBlocks::Producer in_memory_blocks(std::vector<sharding::ConstHostView> columns, std::int64_t block_rows);

// The prefetch depth of the evaluation loops (flax's prefetch_to_device: 2).
inline constexpr std::size_t kBlockPrefetchDepth = 2;

// Reads blocks in order for steps that ask for their rows in increasing order.
class BlockReader {
 public:
  explicit BlockReader(RowBlocks& blocks) : blocks_(blocks) {}

  // The block holding rows [first, first + count): the current one, or the next ones taken
  // from the prefetcher. count may be 0 (an all-padding step): then any block will do, the
  // last one once the blocks have ended. Throws spmd::Error when the blocks end before the
  // rows or a step's rows straddle two blocks.
  const RowBlock& rows(std::int64_t first, std::int64_t count) {
    if (current_ && first >= current_->first && first + count <= current_->first + current_->rows) return *current_;
    return advance(first, count);
  }

 private:
  const RowBlock& advance(std::int64_t first, std::int64_t count);

  RowBlocks& blocks_;
  std::optional<RowBlock> current_;
};

}  // namespace spmd::workloads
