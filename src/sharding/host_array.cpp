#include "spmd/sharding/host_array.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace spmd::sharding {

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::Float32: return 4;
    case DType::UInt8: return 1;
    case DType::Int32: return 4;
    case DType::BFloat16: return 2;
    case DType::Int64: return 8;
  }
  throw Error("unknown dtype code " + std::to_string(static_cast<int>(dtype)));
}

const char* to_string(DType dtype) {
  switch (dtype) {
    case DType::Float32: return "float32";
    case DType::UInt8: return "uint8";
    case DType::Int32: return "int32";
    case DType::BFloat16: return "bfloat16";
    case DType::Int64: return "int64";
  }
  return "unknown";
}

BFloat16 BFloat16::from_float(float value) {
  std::uint32_t u = 0;
  std::memcpy(&u, &value, sizeof u);
  if (std::isnan(value)) return BFloat16{static_cast<std::uint16_t>((u >> 16) | 0x0040u)};
  const std::uint32_t rounding = 0x7FFFu + ((u >> 16) & 1u);
  return BFloat16{static_cast<std::uint16_t>((u + rounding) >> 16)};
}

float BFloat16::to_float() const {
  const std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
  float f = 0;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

std::string to_string(const Shape& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::int64_t element_count(const Shape& shape) {
  std::int64_t n = 1;
  for (const auto extent : shape) {
    if (extent < 0) throw Error("shape " + to_string(shape) + " has a negative extent");
    n *= extent;
  }
  return n;
}

template <class Byte>
BasicHostView<Byte>::BasicHostView(DType dtype, Shape shape, Byte* data)
    : dtype_(dtype), shape_(std::move(shape)), data_(data) {
  if (data_ == nullptr && element_count(shape_) != 0)
    throw Error("host view of shape " + to_string(shape_) + " has no data pointer");
}

template <class Byte>
std::int64_t BasicHostView<Byte>::size() const {
  return element_count(shape_);
}

template <class Byte>
std::int64_t BasicHostView<Byte>::rows() const {
  if (shape_.empty()) throw Error("a scalar (shape []) has no leading batch dimension");
  return shape_[0];
}

template <class Byte>
std::int64_t BasicHostView<Byte>::row_elements() const {
  if (shape_.empty()) throw Error("a scalar (shape []) has no rows");
  std::int64_t n = 1;
  for (std::size_t i = 1; i < shape_.size(); ++i) {
    if (shape_[i] < 0) throw Error("shape " + to_string(shape_) + " has a negative extent");
    n *= shape_[i];
  }
  return n;
}

template <class Byte>
BasicHostView<Byte> BasicHostView<Byte>::slice_rows(std::int64_t first, std::int64_t count) const {
  const std::int64_t n = rows();
  if (first < 0 || count < 0 || first + count > n)
    throw Error("rows [" + std::to_string(first) + ", " + std::to_string(first + count) + ") are outside an array of shape " +
                to_string(shape_));
  Shape shape = shape_;
  shape[0] = count;
  return BasicHostView(dtype_, std::move(shape), data_ == nullptr ? nullptr : data_ + static_cast<std::size_t>(first) * row_bytes());
}

template <class Byte>
BasicHostView<Byte> BasicHostView<Byte>::at(std::int64_t i) const {
  if (i < 0 || i >= rows())
    throw Error("index " + std::to_string(i) + " is outside the leading dimension of shape " + to_string(shape_));
  return BasicHostView(dtype_, Shape(shape_.begin() + 1, shape_.end()), data_ + static_cast<std::size_t>(i) * row_bytes());
}

template <class Byte>
BasicHostView<Byte> BasicHostView<Byte>::reshaped(Shape shape) const {
  if (element_count(shape) != size())
    throw Error("cannot reshape " + to_string(shape_) + " to " + to_string(shape) + ": element counts differ");
  return BasicHostView(dtype_, std::move(shape), data_);
}

template <class Byte>
void BasicHostView<Byte>::check_dtype(DType wanted, const char* where) const {
  if (wanted != dtype_)
    throw Error(std::string(where) + ": array of shape " + to_string(shape_) + " holds " + to_string(dtype_) +
                ", read as " + to_string(wanted));
}

template class BasicHostView<std::byte>;
template class BasicHostView<const std::byte>;

bool bitwise_equal(ConstHostView a, ConstHostView b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const std::size_t n = a.size_bytes();
  return n == 0 || std::memcmp(a.bytes(), b.bytes(), n) == 0;
}

HostArray::HostArray(DType dtype, Shape shape)
    : dtype_(dtype), shape_(std::move(shape)), bytes_(static_cast<std::size_t>(element_count(shape_)) * dtype_size(dtype)) {}

HostArray HostArray::copy_of(ConstHostView view) {
  HostArray out(view.dtype(), view.shape());
  if (view.size_bytes() > 0) std::memcpy(out.bytes_.data(), view.bytes(), view.size_bytes());
  return out;
}

void HostArray::truncate_rows(std::int64_t rows) {
  const std::int64_t n = view().rows();
  if (rows < 0 || rows > n)
    throw Error("cannot keep " + std::to_string(rows) + " rows of an array of shape " + to_string(shape_));
  const std::size_t row_bytes = view().row_bytes();
  shape_[0] = rows;
  bytes_.resize(static_cast<std::size_t>(rows) * row_bytes);  // shrinking keeps the allocation
}

void HostArray::reset_zeroed(DType dtype, Shape shape) {
  reset_for_overwrite(dtype, std::move(shape));
  std::fill(bytes_.begin(), bytes_.end(), std::byte{0});
}

void HostArray::reset_for_overwrite(DType dtype, Shape shape) {
  const std::size_t bytes = static_cast<std::size_t>(element_count(shape)) * dtype_size(dtype);
  dtype_ = dtype;
  shape_ = std::move(shape);
  bytes_.resize(bytes);  // keeps the capacity and, below the old size, the old bytes
}

void HostArray::reshape(Shape shape) {
  if (element_count(shape) != element_count(shape_))
    throw Error("cannot reshape " + to_string(shape_) + " to " + to_string(shape) + ": element counts differ");
  shape_ = std::move(shape);
}

}  // namespace spmd::sharding
