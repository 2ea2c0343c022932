// Compiled in every build (the library globs *.cpp); empty without the CUDA backend.
#ifdef SPMD_HAVE_CUDA

#include "spmd/tensor/cuda_device.hpp"

#include <string>

#include "spmd/runtime/cuda_check.hpp"

namespace spmd::tensor {

void use_cuda_device(const runtime::DeviceInfo& device, const char* what) {
  const std::string where = runtime::rank_tag() + ": " + what + " on device " + std::to_string(device.global_index) +
                            " ('" + device.name + "')";
  if (device.backend != runtime::Backend::Cuda)
    throw Error(where + ": the device's backend is " + runtime::to_string(device.backend) + ", not cuda");
  // Asked first, so that a machine without a driver or GPU gets this message rather than
  // whatever the first allocation would report.
  std::string why_none;
  const int visible = runtime::visible_gpu_count(&why_none);
  if (visible == 0)
    throw Error(where + " needs a GPU, but none is usable: " + why_none +
                "\n  hint: run with --backend cpu, or check the CUDA driver (nvidia-smi) and CUDA_VISIBLE_DEVICES");
  if (device.cuda_ordinal < 0 || device.cuda_ordinal >= visible)
    throw Error(where + ": CUDA ordinal " + std::to_string(device.cuda_ordinal) + " is not one of the " +
                std::to_string(visible) + " visible GPU(s) (0.." + std::to_string(visible - 1) + ")");
  set_current_gpu(device.cuda_ordinal);
}

void set_current_gpu(int cuda_ordinal) {
  SPMD_CHECK_CUDA(cudaSetDevice(cuda_ordinal), "making the device's GPU current on this thread");
}

void set_current_gpu_noexcept(int cuda_ordinal) noexcept {
  if (cudaSetDevice(cuda_ordinal) != cudaSuccess) cudaGetLastError();
}

}  // namespace spmd::tensor

#endif  // SPMD_HAVE_CUDA
