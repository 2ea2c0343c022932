#include "spmd/backends/cuda/cuda_device.hpp"

#include <string>

#include "spmd/backends/cuda/check.hpp"

namespace spmd::backends::cuda {

int visible_gpu_count(std::string* why_none) {
  int n = 0;  // cudaGetDeviceCount leaves it untouched on failure
  const cudaError_t rc = cudaGetDeviceCount(&n);
  if (rc != cudaSuccess) {
    if (why_none) *why_none = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(rc);
    cudaGetLastError();
    return 0;
  }
  if (n == 0 && why_none) *why_none = "no CUDA device visible (CUDA_VISIBLE_DEVICES?)";
  return n;
}

std::string gpu_name(int ordinal) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, ordinal) == cudaSuccess) return prop.name;
  cudaGetLastError();
  return "gpu " + std::to_string(ordinal);
}

namespace {

class CudaPlatform final : public runtime::DevicePlatform {
 public:
  std::string_view name() const override { return "cuda"; }
  std::string_view device_kind() const override { return "GPU"; }
  int device_count(std::string* why_none) const override { return visible_gpu_count(why_none); }
  std::string device_name(int ordinal) const override {
    return "cuda:" + std::to_string(ordinal) + " " + gpu_name(ordinal);
  }
  void bind_thread(int ordinal) const override { set_current_gpu_noexcept(ordinal); }
};

}  // namespace

const runtime::DevicePlatform& cuda_platform() {
  static const CudaPlatform platform;
  return platform;
}

void use_cuda_device(const runtime::DeviceInfo& device, const char* what) {
  const std::string where = runtime::rank_tag() + ": " + what + " on device " + std::to_string(device.global_index) +
                            " ('" + device.name + "')";
  if (device.backend() != "cuda")
    throw Error(where + ": the device's backend is " + std::string(device.backend()) + ", not cuda");
  // Asked first, so that a machine without a driver or GPU gets this message rather than
  // whatever the first allocation would report.
  std::string why_none;
  const int visible = visible_gpu_count(&why_none);
  if (visible == 0)
    throw Error(where + " needs a GPU, but none is usable: " + why_none +
                "\n  hint: run with --backend cpu, or check the CUDA driver (nvidia-smi) and CUDA_VISIBLE_DEVICES");
  if (device.ordinal < 0 || device.ordinal >= visible)
    throw Error(where + ": CUDA ordinal " + std::to_string(device.ordinal) + " is not one of the " +
                std::to_string(visible) + " visible GPU(s) (0.." + std::to_string(visible - 1) + ")");
  set_current_gpu(device.ordinal);
}

void set_current_gpu(int cuda_ordinal) {
  SPMD_CHECK_CUDA(cudaSetDevice(cuda_ordinal), "making the device's GPU current on this thread");
}

void set_current_gpu_noexcept(int cuda_ordinal) noexcept {
  if (cudaSetDevice(cuda_ordinal) != cudaSuccess) cudaGetLastError();
}

}  // namespace spmd::backends::cuda

