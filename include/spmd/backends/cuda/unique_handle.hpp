#pragma once
// The owner of one CUDA runtime or cuBLAS handle (a stream, an event, a cuBLAS context):
// move-only, released exactly once by Release, as data/h5_handle.hpp's H5Id does for HDF5.
// Release reports nothing: it runs in destructors, and a failure there (a sticky error from
// an earlier kernel fault) was or will be reported by a checked call.
#include <utility>

namespace spmd::backends::cuda {

template <class Handle, void (*Release)(Handle) noexcept>
class UniqueHandle {
 public:
  UniqueHandle() = default;
  // Takes ownership of a handle its creating call returned successfully.
  explicit UniqueHandle(Handle handle) : handle_(handle) {}
  ~UniqueHandle() { reset(); }
  UniqueHandle(UniqueHandle&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  UniqueHandle& operator=(UniqueHandle&& other) noexcept {
    if (this != &other) {
      reset();
      handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
  }

  Handle get() const { return handle_; }
  void reset() noexcept {
    if (handle_ != nullptr) Release(std::exchange(handle_, nullptr));
  }

 private:
  Handle handle_ = nullptr;
};

}  // namespace spmd::backends::cuda
