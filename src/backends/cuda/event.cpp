#include "spmd/backends/cuda/event.hpp"

#include <utility>

#include "spmd/backends/cuda/check.hpp"

namespace spmd::backends::cuda {

Event::Event(const char* what) { SPMD_CHECK_CUDA(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), what); }

Event::~Event() {
  // A destructor cannot report; clear the error so that a later, unrelated check does not
  // see it.
  if (event_ != nullptr && cudaEventDestroy(event_) != cudaSuccess) cudaGetLastError();
}

Event::Event(Event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    if (event_ != nullptr && cudaEventDestroy(event_) != cudaSuccess) cudaGetLastError();
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

}  // namespace spmd::backends::cuda
