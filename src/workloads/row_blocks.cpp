#include "spmd/workloads/row_blocks.hpp"

#include <algorithm>
#include <string>

#include "spmd/runtime/error.hpp"

namespace spmd::workloads {

std::int64_t block_rows_for(std::int64_t step_rows, std::int64_t row_bytes) {
  constexpr std::int64_t kBlockBytes = 16 << 20;
  if (step_rows < 1 || row_bytes < 1)
    throw Error("block_rows_for: step rows and row bytes must be >= 1 (got " + std::to_string(step_rows) + ", " +
                std::to_string(row_bytes) + ")");
  const std::int64_t steps = std::max<std::int64_t>(1, kBlockBytes / std::max<std::int64_t>(1, step_rows * row_bytes));
  return steps * step_rows;
}

RowBlocks::Producer in_memory_blocks(std::vector<sharding::ConstHostView> columns, std::int64_t block_rows) {
  if (columns.empty()) throw Error("in_memory_blocks: no columns");
  if (block_rows < 1) throw Error("in_memory_blocks: block rows must be >= 1, got " + std::to_string(block_rows));
  const std::int64_t rows = columns.front().rows();
  for (const auto& c : columns)
    if (c.rows() != rows)
      throw Error("in_memory_blocks: columns of " + std::to_string(rows) + " and " + std::to_string(c.rows()) + " rows");
  // `next` is the first row not handed over yet; -1 once the last block has gone.
  return [columns = std::move(columns), rows, block_rows, next = std::int64_t{0}]() mutable -> std::optional<RowBlock> {
    if (next < 0) return std::nullopt;
    RowBlock b;
    b.first = next;
    b.rows = std::min(block_rows, rows - next);
    for (const auto& c : columns) b.columns.push_back(c.slice_rows(b.first, b.rows));
    next += b.rows;
    if (next == rows) next = -1;
    return b;
  };
}

const RowBlock& BlockReader::advance(std::int64_t first, std::int64_t count) {
  for (;;) {
    std::optional<RowBlock> b = blocks_.next();
    if (!b) {
      if (count == 0 && current_) return *current_;
      throw Error("evaluation: the row blocks ended before rows [" + std::to_string(first) + ", " +
                  std::to_string(first + count) + ")");
    }
    current_ = std::move(b);
    const std::int64_t end = current_->first + current_->rows;
    if (first + count <= end && first >= current_->first) return *current_;
    if (first < end)
      throw Error("evaluation: rows [" + std::to_string(first) + ", " + std::to_string(first + count) +
                  ") straddle the row blocks at row " + std::to_string(end) + " (block sizes must be whole steps)");
  }
}

}  // namespace spmd::workloads
