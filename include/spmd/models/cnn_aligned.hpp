#pragma once
// An owning, 64-byte aligned array for the CNN's parameters and workspaces and the
// logistic-regression kernels' tiles. The memory is zero-filled on allocation, which also
// touches every page up front: page faults during a training step cost more than the
// step's arithmetic on small VMs.
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <span>

namespace spmd::models {

template <class T>
class AlignedArray {
 public:
  AlignedArray() = default;
  explicit AlignedArray(std::size_t count) : size_(count) {  // throws std::bad_alloc
    if (count == 0) return;
    const std::size_t bytes = (count * sizeof(T) + kAlignment - 1) / kAlignment * kAlignment;
    void* p = std::aligned_alloc(kAlignment, bytes);
    if (p == nullptr) throw std::bad_alloc();
    std::memset(p, 0, bytes);
    data_.reset(static_cast<T*>(p));
  }
  AlignedArray(const AlignedArray& other) : AlignedArray(other.size_) { copy_from(other); }
  AlignedArray& operator=(const AlignedArray& other) {
    if (this != &other) {
      if (size_ != other.size_) *this = AlignedArray(other.size_);
      copy_from(other);
    }
    return *this;
  }
  AlignedArray(AlignedArray&&) noexcept = default;
  AlignedArray& operator=(AlignedArray&&) noexcept = default;

  T* data() { return data_.get(); }
  const T* data() const { return data_.get(); }
  std::size_t size() const { return size_; }
  std::span<T> span() { return {data_.get(), size_}; }
  std::span<const T> span() const { return {data_.get(), size_}; }
  // Scratch memory that only grows: at least count elements, not kept when it grows.
  T* reserve(std::size_t count) {
    if (count > size_) *this = AlignedArray(count);
    return data();
  }

 private:
  static constexpr std::size_t kAlignment = 64;
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  void copy_from(const AlignedArray& other) {
    if (size_ != 0) std::memcpy(data_.get(), other.data_.get(), size_ * sizeof(T));
  }
  std::unique_ptr<T[], Free> data_;
  std::size_t size_ = 0;
};

using AlignedFloats = AlignedArray<float>;

}  // namespace spmd::models
