#pragma once
// A CUDA event without timing (cheaper to record and wait on), RAII and move-only. Create
// it with its GPU current. An event never recorded counts as complete: waiting on it (host
// or stream) returns at once, so a ring's first round needs no special case.
#include <cuda_runtime_api.h>

#include "spmd/backends/cuda/unique_handle.hpp"

namespace spmd::backends::cuda {

namespace detail {
void destroy_event(cudaEvent_t event) noexcept;
}  // namespace detail

class Event {
 public:
  // what names the event's purpose in the message if creation fails.
  explicit Event(const char* what);

  cudaEvent_t get() const { return event_.get(); }

 private:
  UniqueHandle<cudaEvent_t, detail::destroy_event> event_;
};

}  // namespace spmd::backends::cuda
