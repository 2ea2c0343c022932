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

// count elements of T in GPU memory (cudaMalloc), uninitialised.
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(std::size_t count, const char* what)
      : data_(count == 0 ? nullptr : static_cast<T*>(detail::device_allocate(count * sizeof(T), what))),
        size_(count),
        what_(what) {}
  ~DeviceBuffer() { detail::device_release(data_); }
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)), what_(other.what_) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      detail::device_release(data_);
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
      what_ = other.what_;
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* data() { return data_; }
  const T* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::size_t bytes() const { return size_ * sizeof(T); }

  // host [count] -> this[offset, offset + count). host may be pageable or pinned.
  void upload(const T* host, std::size_t count, cudaStream_t stream, std::size_t offset = 0) {
    detail::check_count(offset + count, size_, what_);
    detail::copy_async(data_ + offset, host, count * sizeof(T), cudaMemcpyHostToDevice, stream, what_);
  }
  // this[offset, offset + count) -> host [count].
  void download(T* host, std::size_t count, cudaStream_t stream, std::size_t offset = 0) const {
    detail::check_count(offset + count, size_, what_);
    detail::copy_async(host, data_ + offset, count * sizeof(T), cudaMemcpyDeviceToHost, stream, what_);
  }
  // All bytes zero (0.0f, 0.0, 0 for the arithmetic types).
  void zero(cudaStream_t stream) { detail::zero_async(data_, bytes(), stream, what_); }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
  const char* what_ = "device buffer";  // a string literal naming the contents
};

// count elements of T in page-locked host memory (cudaMallocHost): the staging area of
// asynchronous copies. Uninitialised.
template <class T>
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(std::size_t count, const char* what)
      : data_(count == 0 ? nullptr : static_cast<T*>(detail::pinned_allocate(count * sizeof(T), what))), size_(count) {}
  ~PinnedBuffer() { detail::pinned_release(data_); }
  PinnedBuffer(PinnedBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept {
    if (this != &other) {
      detail::pinned_release(data_);
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  T* data() { return data_; }
  const T* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::span<T> span() { return {data_, size_}; }
  std::span<const T> span() const { return {data_, size_}; }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace spmd::backends::cuda
