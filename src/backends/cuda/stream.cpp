#include "spmd/backends/cuda/stream.hpp"

#include "spmd/backends/cuda/check.hpp"
#include "spmd/runtime/time_account.hpp"

namespace spmd::backends::cuda {

// Destructors cannot report; a failed destroy's error is cleared so that a later,
// unrelated check does not see it (cuBLAS keeps no such state).
void detail::destroy_stream(cudaStream_t stream) noexcept {
  if (cudaStreamDestroy(stream) != cudaSuccess) cudaGetLastError();
}
void detail::destroy_cublas(cublasHandle_t handle) noexcept { cublasDestroy(handle); }

Stream::Stream() {
  cudaStream_t stream = nullptr;
  SPMD_CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "creating a CUDA stream");
  stream_ = decltype(stream_)(stream);
}

void Stream::synchronize(const char* what) const { SPMD_CHECK_CUDA(cudaStreamSynchronize(get()), what); }

void Stream::synchronize_copies(const char* what) const {
  runtime::DeviceTransferTimer transfer;
  synchronize(what);
}

CublasHandle::CublasHandle(cudaStream_t stream) {
  cublasHandle_t handle = nullptr;
  SPMD_CHECK_CUBLAS(cublasCreate(&handle), "creating a cuBLAS handle (is the GPU usable?)");
  handle_ = decltype(handle_)(handle);  // destroyed by the member if a step below throws
  SPMD_CHECK_CUBLAS(cublasSetStream(handle, stream), "binding the cuBLAS handle to the object's stream");
  // The default mode computes float32 GEMMs in float32; said explicitly because the
  // results are compared with the CPU implementation (TF32 would not pass).
  SPMD_CHECK_CUBLAS(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH), "asking cuBLAS for float32 arithmetic (no TF32)");
}

}  // namespace spmd::backends::cuda

