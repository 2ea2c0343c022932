#pragma once
// The GPU a device-side object lives on. Only with the CUDA backend.
#ifndef SPMD_HAVE_CUDA
#error "spmd/tensor/cuda_device.hpp needs the CUDA backend (SPMD_HAVE_CUDA is not defined in this build)"
#endif

#include "spmd/runtime/devices.hpp"

namespace spmd::tensor {

// For the constructor of a GPU object: checks that `device` is a usable GPU and makes it the
// calling thread's current one (cudaSetDevice). what names the object in messages ("CUDA
// CNN member"). Throws spmd::Error, before any other CUDA call, when device.backend is not
// Cuda, when no GPU is usable (no driver, no device, CUDA_VISIBLE_DEVICES empty: the message
// gives the driver's reason and suggests --backend cpu) or when the ordinal is not one of
// the visible GPUs.
void use_cuda_device(const runtime::DeviceInfo& device, const char* what);

// For every later entry point (cheap): objects may be built on one thread and used on
// their device's worker thread, so each call makes its GPU current again.
void set_current_gpu(int cuda_ordinal);

// Best effort, for destructors (which must not throw): set_current_gpu ignoring failures.
void set_current_gpu_noexcept(int cuda_ordinal) noexcept;

}  // namespace spmd::tensor
