// A cheap check for NVIDIA GPUs before the CUDA module (and its ~200 MiB of cudart and
// cuBLAS) is loaded: the driver library alone, through its C API. Part of libspmd; needs no
// CUDA header or library at build time. Not a public header.
#pragma once
#include <string>

namespace spmd::backends {

// GPUs the driver sees (CUDA_VISIBLE_DEVICES respected); 0 with the reason in why_none when
// the driver is missing, fails to initialise or sees no device.
int probe_cuda_driver(std::string* why_none);

}  // namespace spmd::backends
