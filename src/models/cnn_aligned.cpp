#include "spmd/models/cnn_aligned.hpp"

#include <cstdlib>
#include <cstring>
#include <new>

namespace spmd::models {

namespace {
constexpr std::size_t kAlignment = 64;
}

AlignedFloats::AlignedFloats(std::size_t count) : size_(count) {
  if (count == 0) return;
  const std::size_t bytes = (count * sizeof(float) + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, bytes);
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, bytes);
  data_.reset(static_cast<float*>(p));
}

AlignedFloats::AlignedFloats(const AlignedFloats& other) : AlignedFloats(other.size_) {
  if (size_ != 0) std::memcpy(data_.get(), other.data_.get(), size_ * sizeof(float));
}

AlignedFloats& AlignedFloats::operator=(const AlignedFloats& other) {
  if (this != &other) {
    if (size_ != other.size_) *this = AlignedFloats(other.size_);
    if (size_ != 0) std::memcpy(data_.get(), other.data_.get(), size_ * sizeof(float));
  }
  return *this;
}

void AlignedFloats::Free::operator()(float* p) const { std::free(p); }

}  // namespace spmd::models
