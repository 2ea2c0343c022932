#include "spmd/backends/cuda/event.hpp"

#include "spmd/backends/cuda/check.hpp"

namespace spmd::backends::cuda {

// A destructor cannot report; the error is cleared so that a later, unrelated check does
// not see it.
void detail::destroy_event(cudaEvent_t event) noexcept {
  if (cudaEventDestroy(event) != cudaSuccess) cudaGetLastError();
}

Event::Event(const char* what) {
  cudaEvent_t event = nullptr;
  SPMD_CHECK_CUDA(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), what);
  event_ = decltype(event_)(event);
}

}  // namespace spmd::backends::cuda
