#pragma once
// Byte samples (uint8 images) on their way into a GPU model: the bytes cross PCIe, not
// their floats (4x less), and a kernel decodes them on the GPU through the 256-entry table
// of data::FeatureDecoder (models::ByteTable), so the model sees the loader's bits.
//
// The host side of the eval pipeline streams blocks through prefetch_to_device's thread
// (workloads/row_blocks.hpp); this is its device end, a copy stream and double buffering:
// each tile's bytes are copied into page-locked staging, then to the GPU on a copy stream of
// their own, while the model's stream still computes on the tile before (flax's
// prefetch_to_device keeps 2 batches in flight on the device; so do the two slots here).
//
//   slot t % 2:  host --memcpy--> pinned staging --copy stream--> device bytes
//                --compute stream: decode kernel--> the model's float input
// Ordering, with no host wait on the GPU's work:
//  - the copy of tile t waits on the copy stream for the decode of tile t - 2 (same slot);
//  - the decode of tile t waits on the compute stream for the copy of tile t;
//  - the host refills a slot's staging only once that slot's previous copy has left it.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "spmd/backends/cuda/device_buffer.hpp"
#include "spmd/backends/cuda/event.hpp"
#include "spmd/backends/cuda/stream.hpp"
#include "spmd/models/classifier.hpp"

namespace spmd::backends::cuda {

class ByteStager {
 public:
  // tile_bytes: the most bytes of one tile (its rows x values per row). Allocates everything
  // (two slots of pinned and device bytes, the table); the object's GPU must be current.
  ByteStager(std::size_t tile_bytes, const char* what);
  ByteStager(const ByteStager&) = delete;
  ByteStager& operator=(const ByteStager&) = delete;

  // Feeds samples [rows, row_bytes] through in tiles of tile_rows rows (tile_rows *
  // row_bytes <= tile_bytes): for each tile [first, first + n) in order, its decoded floats
  // are queued into x (n * row_bytes floats) on `compute`, then work(first, n) queues the
  // model's work on `compute` and waits for its results. The next tile's copy is queued
  // before work() runs, so it overlaps the tile's compute.
  template <class Work>
  void run(const std::uint8_t* samples, std::int64_t rows, std::int64_t row_bytes, std::int64_t tile_rows,
           const models::ByteTable& table, float* x, cudaStream_t compute, Work&& work) {
    check_tiles(rows, row_bytes, tile_rows);
    use_table(table, compute);
    const auto tile_of = [&](std::int64_t t) {
      const std::int64_t first = t * tile_rows;
      return std::pair{first, std::min(tile_rows, rows - first)};
    };
    const std::int64_t tiles = (rows + tile_rows - 1) / tile_rows;
    if (tiles > 0) stage(0, samples, static_cast<std::size_t>(tile_of(0).second * row_bytes));
    for (std::int64_t t = 0; t < tiles; ++t) {
      const auto [first, n] = tile_of(t);
      decode(t, x, static_cast<std::size_t>(n * row_bytes), compute);
      if (t + 1 < tiles) {
        const auto [next_first, next_n] = tile_of(t + 1);
        stage(t + 1, samples + next_first * row_bytes, static_cast<std::size_t>(next_n * row_bytes));
      }
      work(first, n);
    }
  }

  std::size_t tile_bytes() const { return tile_bytes_; }

 private:
  struct Slot {
    PinnedBuffer<std::uint8_t> staging;
    DeviceBuffer<std::uint8_t> bytes;
    Event copied;   // on the copy stream, after the slot's copy
    Event decoded;  // on the compute stream, after the slot's decode
  };

  void check_tiles(std::int64_t rows, std::int64_t row_bytes, std::int64_t tile_rows) const;
  // The table on the GPU, uploaded again only when it changes.
  void use_table(const models::ByteTable& table, cudaStream_t compute);
  // Host bytes [bytes] -> tile t's slot, copied to the GPU on the copy stream.
  void stage(std::int64_t t, const std::uint8_t* host, std::size_t bytes);
  // compute waits for tile t's copy, then decodes its `bytes` values into x.
  void decode(std::int64_t t, float* x, std::size_t bytes, cudaStream_t compute);

  const char* what_;
  std::size_t tile_bytes_;
  Stream copy_stream_;
  Slot slots_[2];
  DeviceBuffer<float> table_;
  models::ByteTable table_host_{};  // what table_ holds, once table_set_
  bool table_set_ = false;
};

}  // namespace spmd::backends::cuda
