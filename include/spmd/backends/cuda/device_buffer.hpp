#pragma once
// Owning GPU and page-locked host buffers (RAII, move-only). Allocate once at set-up and
// reuse: allocation synchronises the device and is slow. Sizes are element counts; a
// buffer of 0 elements owns nothing and makes no CUDA call. Copies are asynchronous on the
// given stream and ordered with the kernels on it; the caller synchronises the stream before
// reading a host destination or reusing a pinned source. Only with the CUDA backend.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <span>
#include <utility>

namespace spmd::backends::cuda {

namespace detail {
// Throw spmd::Error naming `what`, the size in MiB and the CUDA error (e.g. out of memory).
void* device_allocate(std::size_t bytes, const char* what);
void device_release(void* pointer) noexcept;
void* pinned_allocate(std::size_t bytes, const char* what);
void pinned_release(void* pointer) noexcept;
// Checked cudaMemcpyAsync / cudaMemsetAsync; what names the transfer in messages.
void copy_async(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind, cudaStream_t stream,
                const char* what);
void zero_async(void* dst, std::size_t bytes, cudaStream_t stream, const char* what);
// spmd::Error when count > capacity (a programming error caught before the copy).
void check_count(std::size_t count, std::size_t capacity, const char* what);
}  // namespace detail

namespace detail {
// count elements of T from Allocate (uninitialised; 0 elements: no call), freed by Release;
// move-only, a moved-from allocation is empty.
template <class T, void* (*Allocate)(std::size_t, const char*), void (*Release)(void*) noexcept>
class Allocation {
 public:
  Allocation() = default;
  Allocation(std::size_t count, const char* what)
      : data_(count == 0 ? nullptr : static_cast<T*>(Allocate(count * sizeof(T), what))), size_(count) {}
  ~Allocation() { Release(data_); }
  Allocation(Allocation&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  Allocation& operator=(Allocation&& other) noexcept {
    if (this != &other) {
      Release(data_);
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};
}  // namespace detail

// count elements of T in GPU memory (cudaMalloc), uninitialised.
template <class T>
class DeviceBuffer : public detail::Allocation<T, detail::device_allocate, detail::device_release> {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(std::size_t count, const char* what)
      : DeviceBuffer::Allocation(count, what), what_(what) {}

  std::size_t bytes() const { return this->size() * sizeof(T); }

  // host [count] -> this[offset, offset + count). host may be pageable or pinned.
  void upload(const T* host, std::size_t count, cudaStream_t stream, std::size_t offset = 0) {
    detail::check_count(offset + count, this->size(), what_);
    detail::copy_async(this->data() + offset, host, count * sizeof(T), cudaMemcpyHostToDevice, stream, what_);
  }
  // this[offset, offset + count) -> host [count].
  void download(T* host, std::size_t count, cudaStream_t stream, std::size_t offset = 0) const {
    detail::check_count(offset + count, this->size(), what_);
    detail::copy_async(host, this->data() + offset, count * sizeof(T), cudaMemcpyDeviceToHost, stream, what_);
  }
  // All bytes zero (0.0f, 0.0, 0 for the arithmetic types).
  void zero(cudaStream_t stream) { detail::zero_async(this->data(), bytes(), stream, what_); }

 private:
  const char* what_ = "device buffer";  // a string literal naming the contents
};

// count elements of T in page-locked host memory (cudaMallocHost): the staging area of
// asynchronous copies. Uninitialised.
template <class T>
class PinnedBuffer : public detail::Allocation<T, detail::pinned_allocate, detail::pinned_release> {
 public:
  using PinnedBuffer::Allocation::Allocation;

  std::span<T> span() { return {this->data(), this->size()}; }
  std::span<const T> span() const { return {this->data(), this->size()}; }
};

}  // namespace spmd::backends::cuda
