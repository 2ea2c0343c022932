#include "spmd/backends/cuda/device_buffer.hpp"

#include <cstdio>
#include <string>

#include "spmd/backends/cuda/check.hpp"
#include "spmd/runtime/time_account.hpp"

namespace spmd::backends::cuda::detail {

namespace {
std::string mib(std::size_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return text;
}
}  // namespace

void* device_allocate(std::size_t bytes, const char* what) {
  void* pointer = nullptr;
  const cudaError_t rc = cudaMalloc(&pointer, bytes);
  if (rc != cudaSuccess) {
    const std::string hint = std::string("allocating ") + mib(bytes) + " of GPU memory for " + what +
                             " (out of memory? use smaller batches or fewer members per GPU)";
    throw_cuda_error(rc, "cudaMalloc", __FILE__, __LINE__, hint.c_str());
  }
  return pointer;
}

void device_release(void* pointer) noexcept {
  // A failure here (a sticky error from an earlier kernel fault) was or will be reported by
  // a checked call; a destructor cannot throw.
  if (pointer != nullptr && cudaFree(pointer) != cudaSuccess) cudaGetLastError();
}

void* pinned_allocate(std::size_t bytes, const char* what) {
  void* pointer = nullptr;
  const cudaError_t rc = cudaMallocHost(&pointer, bytes);
  if (rc != cudaSuccess) {
    const std::string hint = std::string("allocating ") + mib(bytes) + " of page-locked host memory for " + what;
    throw_cuda_error(rc, "cudaMallocHost", __FILE__, __LINE__, hint.c_str());
  }
  return pointer;
}

void pinned_release(void* pointer) noexcept {
  if (pointer != nullptr && cudaFreeHost(pointer) != cudaSuccess) cudaGetLastError();
}

void copy_async(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind, cudaStream_t stream,
                const char* what) {
  if (bytes == 0) return;
  // The call's own time: all of the copy from pageable memory (the driver stages it before
  // returning), only the queuing from pinned memory (its transfer is waited for later).
  runtime::DeviceTransferTimer transfer;
  SPMD_CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, kind, stream), what);
}

void zero_async(void* dst, std::size_t bytes, cudaStream_t stream, const char* what) {
  if (bytes == 0) return;
  SPMD_CHECK_CUDA(cudaMemsetAsync(dst, 0, bytes, stream), what);
}

void check_count(std::size_t count, std::size_t capacity, const char* what) {
  if (count > capacity)
    throw Error("copy of " + std::to_string(count) + " elements to/from " + what + ", which holds " +
                std::to_string(capacity));
}

}  // namespace spmd::backends::cuda::detail

