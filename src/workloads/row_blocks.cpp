#include "spmd/workloads/row_blocks.hpp"

#include <algorithm>
#include <string>

#include "spmd/runtime/agree.hpp"
#include "spmd/runtime/watchdog.hpp"
#include "spmd/runtime/check.hpp"
#include "spmd/runtime/error.hpp"
#include "spmd/runtime/stop_request.hpp"
#include "spmd/runtime/time_account.hpp"

namespace spmd::workloads {

RowBlocks::RowBlocks(BlockSource source, std::size_t depth)
    : block_rows_(source.block_rows), empty_(std::move(source.empty)), prefetcher_(std::move(source.producer), depth) {}

std::optional<RowBlock> RowBlocks::next() {
  runtime::TimeScope io(runtime::TimeCategory::Io);
  return prefetcher_.next();
}

std::int64_t block_rows_for(std::int64_t step_rows, std::int64_t row_bytes) {
  constexpr std::int64_t kBlockBytes = 16 << 20;
  if (step_rows < 1 || row_bytes < 1)
    throw Error("block_rows_for: step rows and row bytes must be >= 1 (got " + std::to_string(step_rows) + ", " +
                std::to_string(row_bytes) + ")");
  const std::int64_t steps = std::max<std::int64_t>(1, kBlockBytes / std::max<std::int64_t>(1, step_rows * row_bytes));
  return steps * step_rows;
}

BlockSource in_memory_blocks(std::vector<sharding::ConstHostView> columns, std::int64_t block_rows) {
  if (columns.empty()) throw Error("in_memory_blocks: no columns");
  if (block_rows < 1) throw Error("in_memory_blocks: block rows must be >= 1, got " + std::to_string(block_rows));
  const std::int64_t rows = columns.front().rows();
  for (const auto& c : columns)
    if (c.rows() != rows)
      throw Error("in_memory_blocks: columns of " + std::to_string(rows) + " and " + std::to_string(c.rows()) + " rows");
  BlockSource source;
  source.block_rows = block_rows;
  for (const auto& c : columns) source.empty.columns.push_back(c.slice_rows(0, 0));
  // `next` is the first row not handed over yet; -1 once the last block has gone.
  source.producer = [columns = std::move(columns), rows, block_rows,
                     next = std::int64_t{0}]() mutable -> std::optional<RowBlock> {
    if (next < 0) return std::nullopt;
    RowBlock b;
    b.first = next;
    b.rows = std::min(block_rows, rows - next);
    for (const auto& c : columns) b.columns.push_back(c.slice_rows(b.first, b.rows));
    next += b.rows;
    if (next == rows) next = -1;
    return b;
  };
  return source;
}

BlockReader::BlockReader(RowBlocks& blocks, std::int64_t step_rows)
    : blocks_(blocks),
      agree_period_(std::max(kAgreementSteps, blocks.block_rows() / std::max<std::int64_t>(1, step_rows))),
      idle_(blocks.empty()) {}

int BlockReader::agree(const runtime::Context& ctx) const {
  // Armed: in a loop without other collectives (pad) this is where ranks wait for a stuck one.
  runtime::Watchdog::Armed armed(ctx.watchdog(), "MPI_Allreduce (agreeing on the blocks read)");
  return runtime::agree_or_throw_and_stop(ctx.comm(), error_, runtime::local_stop_signal());
}

const RowBlock* BlockReader::advance(std::int64_t first, std::int64_t count) {
  if (failed()) return nullptr;
  const auto fail = [&](const std::string& why) -> const RowBlock* {
    const std::string tag = runtime::rank_tag() + ": ";
    error_ = why.rfind(tag, 0) == 0 ? why : tag + why;
    current_.reset();
    return nullptr;
  };
  try {
    for (;;) {
      current_.reset();  // done with: its buffer may be refilled while the next one is used
      std::optional<RowBlock> b = blocks_.next();
      if (!b)
        return fail("evaluation: the row blocks ended before rows [" + std::to_string(first) + ", " +
                    std::to_string(first + count) + ")");
      current_ = std::move(b);
      const std::int64_t end = current_->first + current_->rows;
      if (first + count <= end && first >= current_->first) return &*current_;
      if (first < end)
        return fail("evaluation: rows [" + std::to_string(first) + ", " + std::to_string(first + count) +
                    ") straddle the row blocks at row " + std::to_string(end) + " (block sizes must be whole steps)");
    }
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}

}  // namespace spmd::workloads
