#pragma once
// CUDA and cuBLAS check macros, in the style of runtime/check.hpp: a failing call becomes an
// spmd::Error naming the rank, the call as written, file:line, the library's own error name
// and description, and a hint.
//   SPMD_CHECK_CUDA(cudaMemcpyAsync(...), "copying the batch to the GPU");
//   my_kernel<<<grid, block, 0, stream>>>(...);
//   SPMD_CHECK_CUDA_LAUNCH("softmax kernel");   // launch errors (bad configuration, ...)
//   SPMD_CHECK_CUBLAS(cublasSgemm(...), "dense layer forward");
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "spmd/runtime/check.hpp"

namespace spmd::backends::cuda {

// Clear the calling thread's non-sticky CUDA error state (so that a later, unrelated
// cudaGetLastError does not report this failure again), then throw_call_error.
[[noreturn]] void throw_cuda_error(cudaError_t code, const char* call, const char* file, int line, const char* hint);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line,
                                     const char* hint);

}  // namespace spmd::backends::cuda

#define SPMD_CHECK_CUDA(call, hint)                                                          \
  do {                                                                                       \
    const cudaError_t spmd_cuda_rc_ = (call);                                                \
    if (spmd_cuda_rc_ != cudaSuccess)                                                        \
      ::spmd::backends::cuda::throw_cuda_error(spmd_cuda_rc_, #call, __FILE__, __LINE__, hint);     \
  } while (0)

// After a kernel launch (<<<...>>> returns nothing): reports launch-time errors. Errors
// raised while the kernel runs surface at the next synchronising call, which is checked too.
#define SPMD_CHECK_CUDA_LAUNCH(hint)                                                                 \
  do {                                                                                               \
    const cudaError_t spmd_cuda_rc_ = cudaGetLastError();                                            \
    if (spmd_cuda_rc_ != cudaSuccess)                                                                \
      ::spmd::backends::cuda::throw_cuda_error(spmd_cuda_rc_, "kernel launch", __FILE__, __LINE__, hint);   \
  } while (0)

#define SPMD_CHECK_CUBLAS(call, hint)                                                         \
  do {                                                                                        \
    const cublasStatus_t spmd_cublas_rc_ = (call);                                            \
    if (spmd_cublas_rc_ != CUBLAS_STATUS_SUCCESS)                                             \
      ::spmd::backends::cuda::throw_cublas_error(spmd_cublas_rc_, #call, __FILE__, __LINE__, hint);  \
  } while (0)
