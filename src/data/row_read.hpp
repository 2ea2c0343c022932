#pragma once
// Private to src/data: reading whole rows [row0, row0 + rows) of a dataset [N, d1, ...], the
// one hyperslab every reader here makes (dataset.cpp's ShardReader, SerialRowReader,
// h5_parallel_reader.cpp, H5Reader's pieces).
//
// The memory dataspace has the rows' own shape [rows, d1, ...], as h5py gives it. With a
// flat [rows * d1 * ...] one instead, HDF5 1.10 maps every chunk's selection onto memory
// piece by piece: 140x slower than contiguous storage for (1024, 28, 28, 1) chunks of
// 784-byte rows, where with matching shapes it reads each chunk in one copy.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>

#include "spmd/data/element_type.hpp"
#include "spmd/data/h5_handle.hpp"
#include "spmd/runtime/agree.hpp"
#include "spmd/runtime/collectives.hpp"
#include "spmd/runtime/context.hpp"

namespace spmd::data {

// Selects the rows in file_space (the dataset's extent; nothing when rows == 0) and returns
// the memory dataspace to read them into: [rows, d1, ...] whole, or, for no rows, one
// element with nothing selected (HDF5 wants a buffer and a space even then). Throws
// spmd::Error (naming `hint`) when HDF5 refuses.
H5Dataspace select_rows(hid_t file_space, std::int64_t row0, std::int64_t rows, const char* hint);

// One H5Dread of those rows of `dataset` into buffer (row-major, rows x the row's elements of
// mem_type) with transfer list xfer. Under a collective xfer every rank must call it; a rank
// with rows == 0 takes part with empty selections (buffer may then be null). The watchdog
// of ctx watches the read.
void read_rows(const runtime::Context& ctx, hid_t dataset, hid_t mem_type, hid_t xfer, std::int64_t row0,
               std::int64_t rows, void* buffer);

// Makes HDF5's conversions through transfer list xfer fail instead of clamping a value that
// the memory type cannot hold (H5Reader's strict reads; the sparse loader's indices).
void refuse_lossy_conversions(hid_t xfer);

// "rank R: ", what messages about one rank's data start with.
std::string rank_prefix(const runtime::Context& ctx);

// The message prefixed with rank_prefix, unless a check macro already named the rank.
std::string with_rank(const runtime::Context& ctx, const std::string& message);

// Reads rows [first, first + count) in pieces of at most piece_rows. Every rank makes the
// same number of H5Dread calls (the largest count decides); a rank that has run out of
// rows, or has failed, joins with empty selections. consume(buffer, global_row0, rows)
// sees each piece; an exception from it (or the read) becomes this rank's error, which
// is agreed on after the last call, so all ranks throw together.
// mem_type: how HDF5 hands over the values (0: Disk's native type; required for std::byte).
template <class Disk, class Dest, class Consume>
void read_in_pieces(const runtime::Context& ctx, hid_t dataset, hid_t xfer, std::int64_t first, std::int64_t count,
                    std::int64_t piece_rows, Dest&& destination, Consume&& consume, hid_t mem_type = 0) {
  // Raw bytes (std::byte) come with their element type's mem_type; others default to theirs.
  if constexpr (!std::is_same_v<Disk, std::byte>)
    if (mem_type == 0) mem_type = native_hdf5_type(element_type_v<Disk>);
  std::int64_t pieces = (count + piece_rows - 1) / piece_rows;
  runtime::allreduce_max(ctx, std::span<std::int64_t>(&pieces, 1));
  std::string error;
  for (std::int64_t p = 0; p < pieces; ++p) {
    const std::int64_t row0 = first + p * piece_rows;
    std::int64_t rows = std::clamp<std::int64_t>(count - p * piece_rows, 0, piece_rows);
    if (!error.empty()) rows = 0;
    Disk* buffer = nullptr;
    if (rows > 0) {
      try {
        buffer = destination(p * piece_rows, rows);
      } catch (const std::exception& e) {
        error = with_rank(ctx, e.what());
        rows = 0;  // still join this read
      }
    }
    try {
      read_rows(ctx, dataset, mem_type, xfer, row0, rows, buffer);
      if (rows > 0) consume(static_cast<const Disk*>(buffer), row0, rows);
    } catch (const std::exception& e) {
      if (error.empty()) error = with_rank(ctx, e.what());
    }
  }
  runtime::agree_or_throw(ctx.comm(), error);
}

}  // namespace spmd::data
