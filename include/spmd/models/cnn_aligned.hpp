#pragma once
// An owning, 64-byte aligned float array for the CNN's parameters and workspaces. The
// memory is zero-filled on allocation, which also touches every page up front: page faults
// during a training step cost more than the step's arithmetic on small VMs.
#include <cstddef>
#include <memory>
#include <span>

namespace spmd::models {

class AlignedFloats {
 public:
  AlignedFloats() = default;
  explicit AlignedFloats(std::size_t count);  // throws std::bad_alloc
  AlignedFloats(const AlignedFloats& other);
  AlignedFloats& operator=(const AlignedFloats& other);
  AlignedFloats(AlignedFloats&&) noexcept = default;
  AlignedFloats& operator=(AlignedFloats&&) noexcept = default;

  float* data() { return data_.get(); }
  const float* data() const { return data_.get(); }
  std::size_t size() const { return size_; }
  std::span<float> span() { return {data_.get(), size_}; }
  std::span<const float> span() const { return {data_.get(), size_}; }

 private:
  struct Free {
    void operator()(float* p) const;
  };
  std::unique_ptr<float[], Free> data_;
  std::size_t size_ = 0;
};

}  // namespace spmd::models
