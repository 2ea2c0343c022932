#pragma once
// The CUDA backend's devices, and the GPU a device-side object lives on.
#include <string>

#include "spmd/runtime/devices.hpp"

namespace spmd::backends::cuda {

// The CUDA backend's devices: the GPUs the runtime sees (CUDA_VISIBLE_DEVICES respected).
const runtime::DevicePlatform& cuda_platform();
// Visible GPUs; 0 with the runtime's reason in why_none when there is no driver or device.
int visible_gpu_count(std::string* why_none = nullptr);
std::string gpu_name(int ordinal);

// For the constructor of a GPU object: checks that `device` is a usable GPU and makes it the
// calling thread's current one (cudaSetDevice). what names the object in messages ("CUDA
// CNN member"). Throws spmd::Error, before any other CUDA call, when the device is not
// a CUDA one, when no GPU is usable (no driver, no device, CUDA_VISIBLE_DEVICES empty: the message
// gives the driver's reason and suggests --backend cpu) or when the ordinal is not one of
// the visible GPUs.
void use_cuda_device(const runtime::DeviceInfo& device, const char* what);

// For every later entry point (cheap): objects may be built on one thread and used on
// their device's worker thread, so each call makes its GPU current again.
void set_current_gpu(int cuda_ordinal);

// Best effort, for destructors (which must not throw): set_current_gpu ignoring failures.
void set_current_gpu_noexcept(int cuda_ordinal) noexcept;

}  // namespace spmd::backends::cuda
