#pragma once
// spmd eval's rows streamed from the file: the BlockSource (row_blocks.hpp) whose producer
// reads each block of a rank's rows from HDF5 as the prefetch thread's work, so that the
// read of block k+1 overlaps the steps on block k, and a rank holds a few blocks instead of
// its shard.
//
// Columns of every block, in this order:
//   0  the features as stored: uint8 [rows, sample_size * element bytes] (an image of
//      uint8 pixels stays one byte per pixel; each device decodes its rows to float32 with
//      FeatureDecoder, the loader's own conversion, so results are the loader's bits)
//   1  the labels: int32 [rows], a view of the labels held in memory (FileRows::labels)
// Each block's features were checked as the loader checks them (finite floats, float64
// within float32's range; data/feature_decoder.hpp): a refused value fails the block, naming
// its row of the file and its element.
//
// I/O: the producer opens its own data::SerialRowReader (POSIX driver, independent reads, no
// MPI; data::SerialCsrReader for a CSR matrix) on its first call, on the prefetch thread. HDF5 is not thread-safe here, so while a
// pass runs, no other thread may call HDF5: the evaluation loops make none (their
// collectives are MPI calls on the main thread), and the file is closed when the
// RowBlocks is destroyed, after its thread has ended. Labels and predictions stay in memory
// until the pass is over.
//
// A CSR matrix's block holds its rows dense (float32, zeros included): what every model
// takes; the reader's entries (12 bytes each) are reused from block to block.
//
// Memory: block buffers come from a sharding::BufferPool: depth + 1 of them (depth queued,
// one read by the consumer: BlockReader gives its block back before taking the next), or one
// per block for a shorter pass, reserved up front and used in turn, so a pass holds the same
// memory however many rows it reads. Plus, with --drop-label, one staging buffer of at most
// block_rows rows for the file rows between kept ones.
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "spmd/data/dataset.hpp"
#include "spmd/data/sparse_matrix.hpp"
#include "spmd/workloads/row_blocks.hpp"

namespace spmd::workloads {

// A rank's rows of a features dataset, and which of them a pass evaluates.
struct FileRows {
  std::string path;
  std::string features_key;
  data::DatasetShape shape;         // as probed; the reader checks that the file still matches
  // A CSR group instead of a dense dataset (data/feature_source.hpp): shape is then float32
  // [N, F], and each block's rows are read through data::SerialCsrReader, densified.
  std::optional<data::SparseMatrixInfo> sparse;
  data::FeatureScale scale;         // what the checks' conversion applies (float64's range)
  std::int64_t first_file_row = 0;  // the rank's rows of the file: [first_file_row, first_file_row + file_rows)
  std::int64_t file_rows = 0;
  // every_row: the evaluated rows are the file rows, in order. Else (--drop-label) evaluated
  // row i is file row first_file_row + kept[i] (increasing; possibly none). kept and labels
  // must outlive the pass.
  bool every_row = true;
  std::span<const std::int64_t> kept;
  std::span<const std::int32_t> labels;  // [evaluated rows]
  std::int64_t evaluated_rows() const { return every_row ? file_rows : static_cast<std::int64_t>(kept.size()); }
};

// Blocks of block_rows evaluated rows (the last one shorter; one block of 0 rows for a rank
// without rows), the first of first_block_rows where that is given (0: block_rows; at most
// block_rows), for a RowBlocks of prefetch depth `depth`. Whatever goes wrong with the rows
// (labels that do not match them included) fails the stream (its first block), never this
// call: a rank must not leave the others alone in the loop's collectives.
BlockSource file_blocks(const FileRows& rows, std::int64_t block_rows, std::size_t depth,
                        std::int64_t first_block_rows = 0);

}  // namespace spmd::workloads
