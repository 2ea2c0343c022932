#pragma once
// A CUDA event without timing (cheaper to record and wait on), RAII and move-only. Create
// it with its GPU current. An event never recorded counts as complete: waiting on it (host
// or stream) returns at once, so a ring's first round needs no special case.
#include <cuda_runtime_api.h>

namespace spmd::backends::cuda {

class Event {
 public:
  // what names the event's purpose in the message if creation fails.
  explicit Event(const char* what);
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace spmd::backends::cuda
