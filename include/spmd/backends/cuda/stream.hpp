#pragma once
// A CUDA stream and a cuBLAS handle bound to it (RAII, move-only): each GPU object owns one
// pair, so its copies, kernels and GEMMs run in order and objects on one GPU do not
// serialise each other. Create them with the object's GPU current (cuda::use_cuda_device).
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

namespace spmd::backends::cuda {

class Stream {
 public:
  // Non-blocking: does not synchronise with the legacy default stream.
  Stream();
  ~Stream();
  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  cudaStream_t get() const { return stream_; }
  // Waits for everything queued so far; a kernel fault or failed copy surfaces here as an
  // spmd::Error naming `what` (the step that was waited for).
  void synchronize(const char* what) const;
  // synchronize() where everything queued is copies (uploads of weights or rows, a
  // member's state): the wait is host<->device time (runtime/time_account.hpp). A wait
  // for kernels and copies together stays compute.
  void synchronize_copies(const char* what) const;

 private:
  cudaStream_t stream_ = nullptr;
};

class CublasHandle {
 public:
  // Full float32 arithmetic (no TF32 tensor-op shortcuts): the results are compared with
  // the CPU implementation. All calls run on `stream`.
  explicit CublasHandle(cudaStream_t stream);
  ~CublasHandle();
  CublasHandle(CublasHandle&& other) noexcept;
  CublasHandle& operator=(CublasHandle&& other) noexcept;
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;

  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

}  // namespace spmd::backends::cuda
