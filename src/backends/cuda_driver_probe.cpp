#include "cuda_driver_probe.hpp"

#include <dlfcn.h>

namespace spmd::backends {

int probe_cuda_driver(std::string* why_none) {
  const auto fail = [&](std::string why) {
    if (why_none) *why_none = std::move(why);
    return 0;
  };
  // The driver API's ABI is stable: cuInit and cuDeviceGetCount take (unsigned) and (int*)
  // and return CUresult, 0 meaning success (CUDA Driver API reference, "Initialization").
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver == nullptr) {
    const char* err = dlerror();
    return fail(std::string("no CUDA driver: ") + (err ? err : "libcuda.so.1 not found"));
  }
  using InitFn = int (*)(unsigned);
  using CountFn = int (*)(int*);
  auto init = reinterpret_cast<InitFn>(dlsym(driver, "cuInit"));
  auto count = reinterpret_cast<CountFn>(dlsym(driver, "cuDeviceGetCount"));
  if (init == nullptr || count == nullptr) return fail("libcuda.so.1 lacks cuInit/cuDeviceGetCount");
  if (const int rc = init(0); rc != 0)
    return fail("cuInit failed with CUresult " + std::to_string(rc) +
                (rc == 100 ? " (CUDA_ERROR_NO_DEVICE)" : rc == 35 ? " (driver older than the runtime)" : ""));
  int n = 0;
  if (const int rc = count(&n); rc != 0) return fail("cuDeviceGetCount failed with CUresult " + std::to_string(rc));
  if (n == 0) return fail("the CUDA driver sees no GPU (CUDA_VISIBLE_DEVICES?)");
  // The handle stays open: the module's runtime loads the same driver next.
  return n;
}

}  // namespace spmd::backends
