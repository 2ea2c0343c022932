#pragma once
// Host arrays for the sharding layer: a dtype, a row-major shape and bytes.
//
// - HostArray owns its bytes (zero-filled on construction). Its storage comes from
//   operator new, so it is aligned for every dtype below.
// - HostView / ConstHostView point at bytes owned by someone else (a HostArray, a buffer read
//   from HDF5, a padding buffer). They are cheap to copy and never free anything; the owner
//   must outlive them. Views are always contiguous: the only sub-views are leading-dimension
//   row ranges, which stay contiguous in row-major order.
//
// The leading dimension is the batch (row) dimension everywhere in this layer.
#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "spmd/runtime/error.hpp"

namespace spmd::sharding {

enum class DType : std::uint8_t { Float32, UInt8, Int32, BFloat16, Int64 };

std::size_t dtype_size(DType dtype);  // bytes per element
const char* to_string(DType dtype);   // "float32", "uint8", "int32", "bfloat16", "int64"

// bfloat16 as 16-bit storage: the top half of an IEEE float32. Arithmetic goes through float.
struct BFloat16 {
  std::uint16_t bits = 0;
  // Round to nearest, ties to even (as JAX/ml_dtypes do); NaN stays a (quiet) NaN.
  static BFloat16 from_float(float value);
  float to_float() const;
  friend bool operator==(BFloat16, BFloat16) = default;
};

template <class T>
struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::Float32; };
template <> struct DTypeOf<std::uint8_t> { static constexpr DType value = DType::UInt8; };
template <> struct DTypeOf<std::int32_t> { static constexpr DType value = DType::Int32; };
template <> struct DTypeOf<BFloat16> { static constexpr DType value = DType::BFloat16; };
template <> struct DTypeOf<std::int64_t> { static constexpr DType value = DType::Int64; };
// The dtype that stores C++ type T (T may be const-qualified).
template <class T>
inline constexpr DType dtype_of = DTypeOf<std::remove_const_t<T>>::value;

// The extents of an array, leading (batch) dimension first. Vector-like; up to kInline
// dimensions live inside the object, so that the views made on every step (a slice, a
// device's shard) allocate nothing; more dimensions go to the heap.
class Shape {
 public:
  static constexpr std::size_t kInline = 6;
  using value_type = std::int64_t;
  using iterator = std::int64_t*;
  using const_iterator = const std::int64_t*;

  Shape() = default;
  Shape(std::initializer_list<std::int64_t> extents) : Shape(extents.begin(), extents.end()) {}
  Shape(const std::vector<std::int64_t>& extents)  // NOLINT(google-explicit-constructor)
      : Shape(extents.data(), extents.data() + extents.size()) {}
  template <class It>
  Shape(It first, It last) {
    for (; first != last; ++first) push_back(static_cast<std::int64_t>(*first));
  }
  // Copies and moves take the inline extents wholesale (a fixed 48-byte copy, no loop):
  // views are copied several times per step.
  Shape(const Shape& other) : size_(other.size_), heap_(other.size_ > kInline ? other.heap_ : std::vector<std::int64_t>{}) {
    std::copy_n(other.inline_, kInline, inline_);
  }
  Shape& operator=(const Shape& other) {
    if (this != &other) {
      size_ = other.size_;
      std::copy_n(other.inline_, kInline, inline_);
      if (other.size_ > kInline) heap_ = other.heap_;
      else heap_.clear();
    }
    return *this;
  }
  Shape(Shape&& other) noexcept : size_(other.size_), heap_(std::move(other.heap_)) {
    std::copy_n(other.inline_, kInline, inline_);
    other.clear();
  }
  Shape& operator=(Shape&& other) noexcept {
    if (this != &other) {
      size_ = other.size_;
      std::copy_n(other.inline_, kInline, inline_);
      heap_ = std::move(other.heap_);
      other.clear();
    }
    return *this;
  }

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::int64_t* data() { return size_ > kInline ? heap_.data() : inline_; }
  const std::int64_t* data() const { return size_ > kInline ? heap_.data() : inline_; }
  iterator begin() { return data(); }
  iterator end() { return data() + size_; }
  const_iterator begin() const { return data(); }
  const_iterator end() const { return data() + size_; }
  std::int64_t& operator[](std::size_t i) { return data()[i]; }
  std::int64_t operator[](std::size_t i) const { return data()[i]; }
  std::int64_t front() const { return data()[0]; }
  std::int64_t back() const { return data()[size_ - 1]; }
  std::vector<std::int64_t> to_vector() const { return {begin(), end()}; }

  void clear() {
    size_ = 0;
    heap_.clear();
  }
  void push_back(std::int64_t extent) {
    if (size_ < kInline) {
      inline_[size_++] = extent;
      return;
    }
    if (size_ == kInline) heap_.assign(inline_, inline_ + kInline);
    heap_.push_back(extent);
    ++size_;
  }
  // Inserts before `pos` (an iterator of this shape).
  void insert(const_iterator pos, std::int64_t extent) {
    const std::size_t at = static_cast<std::size_t>(pos - begin());
    push_back(0);
    std::int64_t* d = data();
    for (std::size_t i = size_ - 1; i > at; --i) d[i] = d[i - 1];
    d[at] = extent;
  }

  friend bool operator==(const Shape& a, const Shape& b) {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
  }
  friend bool operator<(const Shape& a, const Shape& b) {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  std::size_t size_ = 0;
  std::int64_t inline_[kInline] = {};
  std::vector<std::int64_t> heap_;  // all extents, when there are more than kInline
};

std::string to_string(const Shape& shape);  // "[4, 3, 28]"
// Product of the extents (1 for a scalar shape []). Throws spmd::Error on a negative extent.
std::int64_t element_count(const Shape& shape);

// A non-owning view. Byte is std::byte (mutable) or const std::byte (read-only).
template <class Byte>
class BasicHostView {
  static_assert(std::is_same_v<std::remove_const_t<Byte>, std::byte>);

 public:
  BasicHostView() = default;
  // data must hold element_count(shape) * dtype_size(dtype) bytes (may be null when that is 0).
  BasicHostView(DType dtype, Shape shape, Byte* data);
  // A mutable view converts to a read-only one.
  template <class Other>
    requires(std::is_const_v<Byte> && !std::is_const_v<Other>)
  BasicHostView(const BasicHostView<Other>& other)  // NOLINT(google-explicit-constructor)
      : dtype_(other.dtype()), shape_(other.shape()), data_(other.bytes()) {}

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  Byte* bytes() const { return data_; }
  std::int64_t size() const;  // elements
  std::size_t size_bytes() const { return static_cast<std::size_t>(size()) * dtype_size(dtype_); }

  // Leading dimension. Throws spmd::Error for a scalar (rank 0) view.
  std::int64_t rows() const;
  // Elements / bytes of one row (the trailing dimensions).
  std::int64_t row_elements() const;
  std::size_t row_bytes() const { return static_cast<std::size_t>(row_elements()) * dtype_size(dtype_); }

  // Rows [first, first + count): shape [count, ...]. Throws when out of range.
  BasicHostView slice_rows(std::int64_t first, std::int64_t count) const;
  // Entry i of the leading dimension, with that dimension removed: [n, ...] -> [...].
  // On a sharded [d, b_dev, ...] view, at(i) is device i's [b_dev, ...] shard.
  BasicHostView at(std::int64_t i) const;
  // Same bytes, another shape with the same element count.
  BasicHostView reshaped(Shape shape) const;

  // Typed access; throws spmd::Error when T does not match the dtype.
  template <class T>
  std::span<std::conditional_t<std::is_const_v<Byte>, const T, T>> data() const {
    check_dtype(dtype_of<T>, "BasicHostView::data");
    using Elem = std::conditional_t<std::is_const_v<Byte>, const T, T>;
    return {reinterpret_cast<Elem*>(data_), static_cast<std::size_t>(size())};
  }

 private:
  void check_dtype(DType wanted, const char* where) const;

  DType dtype_ = DType::Float32;
  Shape shape_ = {0};
  Byte* data_ = nullptr;
};

using HostView = BasicHostView<std::byte>;
using ConstHostView = BasicHostView<const std::byte>;

// True when dtype, shape and every byte agree (bitwise: distinguishes -0.0f from 0.0f).
bool bitwise_equal(ConstHostView a, ConstHostView b);

// An owning, contiguous, row-major host array.
class HostArray {
 public:
  HostArray() = default;  // float32, shape [0]
  // Zero-filled.
  HostArray(DType dtype, Shape shape);

  // Copies values into a new array of dtype_of<T>; values.size() must equal element_count(shape).
  template <class T>
  static HostArray from(Shape shape, std::span<const T> values);
  template <class T>
  static HostArray from(Shape shape, const std::vector<T>& values) {
    return from<T>(std::move(shape), std::span<const T>(values));
  }
  // A deep copy of the viewed bytes.
  static HostArray copy_of(ConstHostView view);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  std::int64_t rows() const { return view().rows(); }
  std::int64_t size() const { return view().size(); }

  HostView view() { return {dtype_, shape_, bytes_.data()}; }
  ConstHostView view() const { return {dtype_, shape_, bytes_.data()}; }
  operator ConstHostView() const { return view(); }  // NOLINT(google-explicit-constructor)

  template <class T>
  std::span<T> data() {
    return view().data<T>();
  }
  template <class T>
  std::span<const T> data() const {
    return view().data<T>();
  }

  // Keeps the first `rows` rows; never reallocates (the un-padding step of pad_shard_unpad).
  void truncate_rows(std::int64_t rows);
  // Same bytes, another shape with the same element count.
  void reshape(Shape shape);
  // Becomes a zero-filled array of this dtype and shape, reusing the allocation when it is
  // large enough (a per-step output buffer recycled across steps allocates once).
  void reset_zeroed(DType dtype, Shape shape);
  // The same for a caller that writes every byte next: reuses the allocation but leaves
  // the bytes unspecified (zeroing them first would write the buffer twice).
  void reset_for_overwrite(DType dtype, Shape shape);

 private:
  DType dtype_ = DType::Float32;
  Shape shape_ = {0};
  std::vector<std::byte> bytes_;
};

template <class T>
HostArray HostArray::from(Shape shape, std::span<const T> values) {
  HostArray out(dtype_of<T>, std::move(shape));
  if (static_cast<std::int64_t>(values.size()) != out.size())
    throw Error("HostArray::from: " + std::to_string(values.size()) + " values for shape " +
                to_string(out.shape()) + " (" + std::to_string(out.size()) + " elements)");
  auto dst = out.data<T>();
  for (std::size_t i = 0; i < values.size(); ++i) dst[i] = values[i];
  return out;
}

}  // namespace spmd::sharding
