// The CUDA backend's table: its platform (GPUs), its device models and the libraries it runs
// with. Built into the module libspmd_cuda.so, which spmd loads at run time
// (backends/backend.hpp); this file holds the module's entry function.
#include <cublas_api.h>
#include <cuda_runtime_api.h>

#include "spmd/backends/backend.hpp"
#include "spmd/backends/cuda/cuda_device.hpp"
#include "spmd/backends/cuda/models.hpp"

namespace spmd::backends::cuda {
namespace {

std::string version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }

class CudaBackend final : public Backend {
 public:
  const runtime::DevicePlatform& platform() const override { return cuda::cuda_platform(); }
  std::vector<std::pair<std::string, std::string>> library_versions() const override {
    int runtime_version = 0, driver_version = 0, cublas_major = 0, cublas_minor = 0;
    cudaRuntimeGetVersion(&runtime_version);
    cublasGetProperty(MAJOR_VERSION, &cublas_major);
    cublasGetProperty(MINOR_VERSION, &cublas_minor);
    const bool has_driver = cudaDriverGetVersion(&driver_version) == cudaSuccess && driver_version > 0;
    cudaGetLastError();
    return {{"cuda", "runtime " + version_text(runtime_version) + ", cuBLAS " + std::to_string(cublas_major) + "." +
                         std::to_string(cublas_minor) + ", driver " +
                         (has_driver ? version_text(driver_version) : std::string("none"))}};
  }
  CudaBackend() {
    provide<models::CnnMemberKind>(&make_cnn_member_cuda);
    provide<models::LogregShardKind>(&make_logreg_shard_cuda);
    provide<models::LogregShard64Kind>(&make_logreg_shard64_cuda);
    provide<models::LogregPredictorKind>(&make_logreg_predictor_cuda);
    provide<models::OnnxPredictorKind>(&make_onnx_predictor_cuda);
    provide<models::OnnxSupportKind>(&onnx_unsupported_cuda);
  }
};

}  // namespace
}  // namespace spmd::backends::cuda

// The module's entry (registry.cpp names it): C linkage so dlsym finds it by this name.
extern "C" __attribute__((visibility("default"))) const spmd::backends::Backend* spmd_cuda_backend_v1() {
  static const spmd::backends::cuda::CudaBackend backend;
  return &backend;
}
