#pragma once
// What every CUDA backend test needs: a visible skip without a GPU, and a device record for
// a GPU ordinal (the tests build models on a GPU directly, without a runtime::Context).
#include <gtest/gtest.h>

#include <string>

#include "spmd/backends/cuda/cuda_device.hpp"
#include "spmd/runtime/devices.hpp"

#define SKIP_WITHOUT_GPU()                                                                           \
  do {                                                                                               \
    std::string why_no_gpu;                                                                          \
    if (spmd::backends::cuda::visible_gpu_count(&why_no_gpu) == 0) GTEST_SKIP() << "no GPU: " << why_no_gpu; \
  } while (0)

namespace spmd::test {

inline runtime::DeviceInfo cuda_device(int ordinal = 0) {
  runtime::DeviceInfo d;
  d.platform = &backends::cuda::cuda_platform();
  d.ordinal = ordinal;
  d.name = "gpu " + std::to_string(ordinal);
  return d;
}

}  // namespace spmd::test
