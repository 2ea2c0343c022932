#include "spmd/backends/cuda/byte_stager.hpp"

#include <cstring>
#include <string>

#include "spmd/backends/cuda/check.hpp"
#include "spmd/backends/cuda/launch.hpp"
#include "spmd/runtime/error.hpp"
#include "spmd/runtime/time_account.hpp"

namespace spmd::backends::cuda {

namespace {

// out[i] = table[in[i]]. The table sits in shared memory (1 KiB): one global read per byte.
__global__ void decode_bytes_kernel(const std::uint8_t* in, std::int64_t n, const float* table, float* out) {
  __shared__ float shared_table[256];
  for (int v = static_cast<int>(threadIdx.x); v < 256; v += static_cast<int>(blockDim.x)) shared_table[v] = table[v];
  __syncthreads();
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = shared_table[in[i]];
}

}  // namespace

ByteStager::ByteStager(std::size_t tile_bytes, const char* what)
    : what_(what),
      tile_bytes_(tile_bytes),
      slots_{Slot{PinnedBuffer<std::uint8_t>(tile_bytes, "byte samples' pinned staging"),
                  DeviceBuffer<std::uint8_t>(tile_bytes, "byte samples on the GPU"),
                  Event("creating a byte staging copy event"), Event("creating a byte staging decode event")},
             Slot{PinnedBuffer<std::uint8_t>(tile_bytes, "byte samples' pinned staging"),
                  DeviceBuffer<std::uint8_t>(tile_bytes, "byte samples on the GPU"),
                  Event("creating a byte staging copy event"), Event("creating a byte staging decode event")}},
      table_(256, "byte decoding table") {}

void ByteStager::check_tiles(std::int64_t rows, std::int64_t row_bytes, std::int64_t tile_rows) const {
  if (rows < 0 || row_bytes < 1 || tile_rows < 1 ||
      static_cast<std::size_t>(tile_rows) * static_cast<std::size_t>(row_bytes) > tile_bytes_)
    throw Error(std::string(what_) + ": byte staging of " + std::to_string(rows) + " rows of " +
                std::to_string(row_bytes) + " bytes in tiles of " + std::to_string(tile_rows) +
                " rows does not fit its " + std::to_string(tile_bytes_) + "-byte slots");
}

void ByteStager::use_table(const models::ByteTable& table, cudaStream_t compute) {
  // Bytes, not floats: -0.0f equals +0.0f, and the decode must give the table's very bits.
  if (table_set_ && std::memcmp(table.data(), table_host_.data(), sizeof(models::ByteTable)) == 0) return;
  table_host_ = table;
  // From pageable memory: the call returns once the source is read, so table_host_ may change.
  table_.upload(table_host_.data(), table_host_.size(), compute);
  table_set_ = true;
}

void ByteStager::stage(std::int64_t t, const std::uint8_t* host, std::size_t bytes) {
  runtime::DeviceTransferTimer transfer;  // the wait and the staging copy are host<->device time
  Slot& slot = slots_[t % 2];
  SPMD_CHECK_CUDA(cudaEventSynchronize(slot.copied.get()),
                  "waiting for a byte staging slot's previous copy before refilling it");
  std::memcpy(slot.staging.data(), host, bytes);
  SPMD_CHECK_CUDA(cudaStreamWaitEvent(copy_stream_.get(), slot.decoded.get(), 0),
                  "ordering a byte tile's copy after the decode of the slot's previous tile");
  SPMD_CHECK_CUDA(cudaMemcpyAsync(slot.bytes.data(), slot.staging.data(), bytes, cudaMemcpyHostToDevice,
                                  copy_stream_.get()),
                  "copying byte samples to the GPU");
  SPMD_CHECK_CUDA(cudaEventRecord(slot.copied.get(), copy_stream_.get()), "marking the end of a byte tile's copy");
}

void ByteStager::decode(std::int64_t t, float* x, std::size_t bytes, cudaStream_t compute) {
  Slot& slot = slots_[t % 2];
  SPMD_CHECK_CUDA(cudaStreamWaitEvent(compute, slot.copied.get(), 0), "making the model wait for its byte tile's copy");
  const auto n = static_cast<std::int64_t>(bytes);
  decode_bytes_kernel<<<blocks_for(n), kThreadsPerBlock, 0, compute>>>(slot.bytes.data(), n, table_.data(), x);
  SPMD_CHECK_CUDA_LAUNCH("byte decoding kernel");
  SPMD_CHECK_CUDA(cudaEventRecord(slot.decoded.get(), compute), "marking the end of a byte tile's decode");
}

}  // namespace spmd::backends::cuda
