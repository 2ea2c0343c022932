#include "spmd/backends/cuda/stream.hpp"

#include <utility>

#include "spmd/backends/cuda/check.hpp"
#include "spmd/runtime/time_account.hpp"

namespace spmd::backends::cuda {

Stream::Stream() {
  SPMD_CHECK_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "creating a CUDA stream");
}

Stream::~Stream() {
  if (stream_ != nullptr && cudaStreamDestroy(stream_) != cudaSuccess) cudaGetLastError();
}

Stream::Stream(Stream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    if (stream_ != nullptr && cudaStreamDestroy(stream_) != cudaSuccess) cudaGetLastError();
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

void Stream::synchronize(const char* what) const { SPMD_CHECK_CUDA(cudaStreamSynchronize(stream_), what); }

void Stream::synchronize_copies(const char* what) const {
  runtime::DeviceTransferTimer transfer;
  synchronize(what);
}

CublasHandle::CublasHandle(cudaStream_t stream) {
  SPMD_CHECK_CUBLAS(cublasCreate(&handle_), "creating a cuBLAS handle (is the GPU usable?)");
  try {
    SPMD_CHECK_CUBLAS(cublasSetStream(handle_, stream), "binding the cuBLAS handle to the object's stream");
    // The default mode computes float32 GEMMs in float32; said explicitly because the
    // results are compared with the CPU implementation (TF32 would not pass).
    SPMD_CHECK_CUBLAS(cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH), "asking cuBLAS for float32 arithmetic (no TF32)");
  } catch (...) {
    cublasDestroy(handle_);
    throw;
  }
}

CublasHandle::~CublasHandle() {
  if (handle_ != nullptr) cublasDestroy(handle_);
}

CublasHandle::CublasHandle(CublasHandle&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}

CublasHandle& CublasHandle::operator=(CublasHandle&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) cublasDestroy(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

}  // namespace spmd::backends::cuda

