#include "spmd/backends/cuda/check.hpp"

#include <string>

namespace spmd::backends::cuda {

void throw_cuda_error(cudaError_t code, const char* call, const char* file, int line, const char* hint) {
  // Sticky errors (a kernel fault) stay whatever we do; this only clears a failed call's
  // error so that it is not reported a second time by an unrelated later check.
  cudaGetLastError();
  const std::string detail = std::string(cudaGetErrorName(code)) + ": " + cudaGetErrorString(code);
  runtime::throw_call_error("CUDA", call, file, line, detail, hint);
}

void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line, const char* hint) {
  const std::string detail = std::string(cublasGetStatusName(status)) + ": " + cublasGetStatusString(status);
  runtime::throw_call_error("cuBLAS", call, file, line, detail, hint);
}

}  // namespace spmd::backends::cuda

