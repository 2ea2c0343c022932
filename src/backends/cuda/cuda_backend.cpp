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
  std::unique_ptr<models::CnnMember> make_cnn_member(const runtime::DeviceInfo& device,
                                                     const models::CnnConfig& config, int max_batch,
                                                     int max_train_batch) const override {
    return make_cnn_member_cuda(device, config, max_batch, max_train_batch);
  }
  std::unique_ptr<models::LogregShard> make_logreg_shard(const runtime::DeviceInfo& device, const float* X,
                                                         const std::int32_t* labels, std::int64_t rows, int features,
                                                         int classes, std::int64_t chunk_rows) const override {
    return make_logreg_shard_cuda(device, X, labels, rows, features, classes, chunk_rows);
  }
  std::unique_ptr<models::DevicePredictor> make_logreg_predictor(const runtime::DeviceInfo& device,
                                                                 const models::LogregParameters& parameters,
                                                                 std::int64_t max_rows) const override {
    return make_logreg_predictor_cuda(device, parameters, max_rows);
  }
};

}  // namespace
}  // namespace spmd::backends::cuda

// The module's entry (registry.cpp names it): C linkage so dlsym finds it by this name.
extern "C" __attribute__((visibility("default"))) const spmd::backends::Backend* spmd_cuda_backend_v1() {
  static const spmd::backends::cuda::CudaBackend backend;
  return &backend;
}
