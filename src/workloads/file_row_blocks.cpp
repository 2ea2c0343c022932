#include "spmd/workloads/file_row_blocks.hpp"

#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#include "spmd/data/feature_decoder.hpp"
#include "spmd/data/serial_csr_reader.hpp"
#include "spmd/data/serial_row_reader.hpp"
#include "spmd/runtime/error.hpp"
#include "spmd/sharding/buffer_pool.hpp"

namespace spmd::workloads {

namespace {

using sharding::ConstHostView;
using sharding::DType;

// The producer's state, shared by the copies std::function may make of it.
struct FileBlockProducer {
  FileRows rows;
  std::int64_t block_rows, first_block_rows;
  std::int64_t row_bytes;
  data::FeatureDecoder decoder;
  std::shared_ptr<sharding::BufferPool> buffers;
  std::optional<data::SerialRowReader> reader;  // opened by the first read, on the prefetch thread
  std::optional<data::SerialCsrReader> csr;      // instead, for a CSR matrix
  std::vector<std::byte> staging;                // --drop-label: a run of file rows, kept ones among them
  std::int64_t next = 0;                         // first evaluated row not handed over; -1 at the end

  FileBlockProducer(const FileRows& r, std::int64_t block_rows_, std::int64_t first_block_rows_)
      : rows(r),
        block_rows(block_rows_),
        first_block_rows(first_block_rows_),
        row_bytes(r.shape.sample_size * static_cast<std::int64_t>(data::size_of(r.shape.features_type))),
        decoder(r.shape.features_type, r.scale, "'" + r.path + "': features dataset '" + r.features_key + "'"),
        // A pass shorter than a block needs no more than its rows.
        buffers(sharding::BufferPool::make(static_cast<std::size_t>(
            std::min(block_rows_, std::max<std::int64_t>(r.evaluated_rows(), 1)) * row_bytes))) {}

  // File rows [first, first + count) (absolute) into out, as the blocks hold them.
  void read_file_rows(std::int64_t first, std::int64_t count, std::byte* out) {
    if (rows.sparse) {
      if (!csr) csr.emplace(rows.path, *rows.sparse);
      return csr->read_dense(first, count, reinterpret_cast<float*>(out));
    }
    if (!reader) reader.emplace(rows.path, rows.features_key, rows.shape);
    reader->read(first, count, out);
  }

  // The loader's checks of rows as stored; a CSR reader has made its own (finite values).
  void check(const std::byte* out, std::int64_t first, std::int64_t count) {
    if (!rows.sparse) decoder.check(out, first, count, rows.shape.sample_size);
  }

  // Reads file rows [first, first + count) of the rank (relative) into out and checks them.
  void read_checked(std::int64_t first, std::int64_t count, std::byte* out) {
    read_file_rows(rows.first_file_row + first, count, out);
    check(out, rows.first_file_row + first, count);
  }

  // Evaluated rows [first, first + count) when some file rows are dropped: contiguous runs of
  // file rows (at most block_rows each) are read into staging and the kept ones compacted.
  void gather_kept(std::int64_t first, std::int64_t count, std::byte* out) {
    staging.resize(static_cast<std::size_t>(std::min(block_rows, rows.file_rows) * row_bytes));
    const std::int64_t end = first + count;
    for (std::int64_t i = first; i < end;) {
      const std::int64_t run_first = rows.kept[static_cast<std::size_t>(i)];
      const std::int64_t run_end =
          std::min(run_first + std::min(block_rows, rows.file_rows), rows.kept[static_cast<std::size_t>(end - 1)] + 1);
      read_file_rows(rows.first_file_row + run_first, run_end - run_first, staging.data());
      for (; i < end && rows.kept[static_cast<std::size_t>(i)] < run_end; ++i) {
        const std::int64_t file_row = rows.kept[static_cast<std::size_t>(i)];
        const std::byte* row = staging.data() + (file_row - run_first) * row_bytes;
        check(row, rows.first_file_row + file_row, 1);
        std::memcpy(out + (i - first) * row_bytes, row, static_cast<std::size_t>(row_bytes));
      }
    }
  }

  std::optional<RowBlock> operator()() {
    if (next < 0) return std::nullopt;
    const std::int64_t total = rows.evaluated_rows();
    if (static_cast<std::int64_t>(rows.labels.size()) != total)
      throw Error("file_blocks: " + std::to_string(rows.labels.size()) + " labels for " + std::to_string(total) +
                  " evaluated rows");
    RowBlock b;
    b.first = next;
    b.rows = std::min(next == 0 ? first_block_rows : block_rows, total - next);
    std::shared_ptr<std::byte> buffer;
    if (b.rows > 0) {
      buffer = buffers->acquire();
      if (rows.every_row) read_checked(b.first, b.rows, buffer.get());
      else gather_kept(b.first, b.rows, buffer.get());
    }
    b.columns = {ConstHostView(DType::UInt8, {b.rows, row_bytes}, buffer.get()),
                 ConstHostView(DType::Int32, {b.rows},
                               reinterpret_cast<const std::byte*>(rows.labels.data() + b.first))};
    b.owner = std::move(buffer);
    next += b.rows;
    if (next == total) next = -1;
    return b;
  }
};

}  // namespace

BlockSource file_blocks(const FileRows& rows, std::int64_t block_rows, std::size_t depth,
                        std::int64_t first_block_rows) {
  // block_rows_for never gives less than a step; anything else is a programming error.
  if (block_rows < 1) throw Error("file_blocks: block rows must be >= 1, got " + std::to_string(block_rows));
  if (first_block_rows < 0 || first_block_rows > block_rows)
    throw Error("file_blocks: first block rows must be in [0, " + std::to_string(block_rows) + "], got " +
                std::to_string(first_block_rows));
  const std::int64_t first = first_block_rows > 0 ? first_block_rows : block_rows;
  auto producer = std::make_shared<FileBlockProducer>(rows, block_rows, first);
  // The buffers of a pass: the prefetch depth's, and the consumer's (BlockReader gives its
  // block back before taking the next), or one per block for a shorter pass. Reserved now
  // (not touched) and used in turn, so the pass's memory does not depend on its length.
  const std::int64_t total = rows.evaluated_rows();
  const std::int64_t blocks = total == 0 ? 0 : total <= first ? 1 : 1 + (total - first + block_rows - 1) / block_rows;
  producer->buffers->reserve(
      static_cast<std::size_t>(std::min<std::int64_t>(blocks, static_cast<std::int64_t>(depth) + 1)));
  BlockSource source;
  source.block_rows = block_rows;
  source.empty.columns = {ConstHostView(DType::UInt8, {0, producer->row_bytes}, nullptr),
                          ConstHostView(DType::Int32, {0}, nullptr)};
  source.producer = [producer] { return (*producer)(); };
  return source;
}

}  // namespace spmd::workloads
