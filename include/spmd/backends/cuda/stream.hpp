#pragma once
// A CUDA stream and a cuBLAS handle bound to it (RAII, move-only): each GPU object owns one
// pair, so its copies, kernels and GEMMs run in order and objects on one GPU do not
// serialise each other. Create them with the object's GPU current (cuda::use_cuda_device).
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "spmd/backends/cuda/unique_handle.hpp"

namespace spmd::backends::cuda {

namespace detail {
void destroy_stream(cudaStream_t stream) noexcept;
void destroy_cublas(cublasHandle_t handle) noexcept;
}  // namespace detail

class Stream {
 public:
  // Non-blocking: does not synchronise with the legacy default stream.
  Stream();

  cudaStream_t get() const { return stream_.get(); }
  // Waits for everything queued so far; a kernel fault or failed copy surfaces here as an
  // spmd::Error naming `what` (the step that was waited for).
  void synchronize(const char* what) const;
  // synchronize() where everything queued is copies (uploads of weights or rows, a
  // member's state): the wait is host<->device time (runtime/time_account.hpp). A wait
  // for kernels and copies together stays compute.
  void synchronize_copies(const char* what) const;

 private:
  UniqueHandle<cudaStream_t, detail::destroy_stream> stream_;
};

class CublasHandle {
 public:
  // Full float32 arithmetic (no TF32 tensor-op shortcuts): the results are compared with
  // the CPU implementation. All calls run on `stream`.
  explicit CublasHandle(cudaStream_t stream);

  cublasHandle_t get() const { return handle_.get(); }

 private:
  UniqueHandle<cublasHandle_t, detail::destroy_cublas> handle_;
};

}  // namespace spmd::backends::cuda
