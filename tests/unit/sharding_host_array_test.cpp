// HostArray / views: shapes, row slicing without copies, typed access, bfloat16 rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "spmd/runtime/error.hpp"
#include "spmd/sharding/host_array.hpp"

namespace {

using namespace spmd::sharding;

TEST(ShardingHostArray, DtypeSizesAndNames) {
  EXPECT_EQ(dtype_size(DType::Float32), 4u);
  EXPECT_EQ(dtype_size(DType::UInt8), 1u);
  EXPECT_EQ(dtype_size(DType::Int32), 4u);
  EXPECT_EQ(dtype_size(DType::BFloat16), 2u);
  EXPECT_EQ(dtype_size(DType::Int64), 8u);
  EXPECT_STREQ(to_string(DType::BFloat16), "bfloat16");
  EXPECT_EQ(dtype_of<const float>, DType::Float32);
  EXPECT_EQ(dtype_of<BFloat16>, DType::BFloat16);
}

TEST(ShardingHostArray, ZeroFilledRowSlicesShareStorage) {
  HostArray a(DType::Int32, {5, 2, 3});
  EXPECT_EQ(a.size(), 30);
  for (const auto v : a.data<std::int32_t>()) EXPECT_EQ(v, 0);
  std::iota(a.data<std::int32_t>().begin(), a.data<std::int32_t>().end(), 0);
  const ConstHostView rows = ConstHostView(a.view()).slice_rows(1, 3);
  EXPECT_EQ(rows.shape(), (Shape{3, 2, 3}));
  EXPECT_EQ(rows.bytes(), a.view().bytes() + 6 * 4) << "a row slice must point into the array, not copy it";
  EXPECT_EQ(rows.data<std::int32_t>()[0], 6);
  const ConstHostView row2 = rows.at(1);
  EXPECT_EQ(row2.shape(), (Shape{2, 3}));
  EXPECT_EQ(row2.data<std::int32_t>()[0], 12);
  EXPECT_EQ(rows.reshaped({18}).shape(), (Shape{18}));
  EXPECT_THROW(rows.reshaped({17}), spmd::Error);
  EXPECT_THROW(rows.slice_rows(2, 2), spmd::Error);
  EXPECT_THROW(rows.at(3), spmd::Error);
  EXPECT_THROW(rows.data<float>(), spmd::Error);
  EXPECT_THROW(ConstHostView(DType::Float32, {}, nullptr), spmd::Error);  // a scalar needs data
}

TEST(ShardingHostArray, TruncateKeepsLeadingRowsAndBitwiseEquality) {
  std::vector<float> values(12);
  std::iota(values.begin(), values.end(), 1.0f);
  HostArray a = HostArray::from<float>({4, 3}, values);
  const HostArray copy = HostArray::copy_of(a);
  EXPECT_TRUE(bitwise_equal(a, copy));
  EXPECT_NE(copy.view().bytes(), a.view().bytes());
  a.truncate_rows(2);
  EXPECT_EQ(a.shape(), (Shape{2, 3}));
  EXPECT_TRUE(bitwise_equal(a, ConstHostView(copy).slice_rows(0, 2)));
  EXPECT_FALSE(bitwise_equal(a, ConstHostView(copy).slice_rows(1, 2)));
  EXPECT_THROW(a.truncate_rows(3), spmd::Error);
  EXPECT_THROW(HostArray::from<float>({2, 2}, values), spmd::Error);
  HostArray negative_zero = HostArray::from<float>({1}, std::vector<float>{-0.0f});
  EXPECT_FALSE(bitwise_equal(negative_zero, HostArray(DType::Float32, {1})));
}

TEST(ShardingHostArray, BFloat16RoundsToNearestEven) {
  for (int i = -300; i <= 300; ++i)  // integers up to 256 are exact in bfloat16
    if (std::abs(i) <= 256) EXPECT_EQ(BFloat16::from_float(static_cast<float>(i)).to_float(), static_cast<float>(i));
  // 257 lies halfway between 256 and 258: ties go to the even mantissa (256).
  EXPECT_EQ(BFloat16::from_float(257.0f).to_float(), 256.0f);
  EXPECT_EQ(BFloat16::from_float(259.0f).to_float(), 260.0f);
  EXPECT_EQ(BFloat16::from_float(1.0f).bits, 0x3F80);
  EXPECT_TRUE(std::isnan(BFloat16::from_float(std::numeric_limits<float>::quiet_NaN()).to_float()));
  EXPECT_TRUE(std::isinf(BFloat16::from_float(std::numeric_limits<float>::infinity()).to_float()));
}

TEST(ShardingHostArray, ResetZeroedReusesTheAllocationAndZeroes) {
  HostArray a(DType::Int32, {4, 512});
  for (auto& v : a.data<std::int32_t>()) v = 7;
  const std::byte* before = a.view().bytes();
  a.truncate_rows(3);
  a.reset_zeroed(DType::Int32, {4, 512});  // back to the full size: same buffer, all zeros
  EXPECT_EQ(a.view().bytes(), before);
  EXPECT_EQ(a.shape(), (Shape{4, 512}));
  for (auto v : a.data<std::int32_t>()) ASSERT_EQ(v, 0);
  a.reset_zeroed(DType::UInt8, {10});  // smaller, another dtype
  EXPECT_EQ(a.view().bytes(), before);
  EXPECT_EQ(a.dtype(), DType::UInt8);
  EXPECT_EQ(a.size(), 10);
  a.reset_zeroed(DType::Float32, {2, 4096});  // larger than before: grows
  EXPECT_EQ(a.size(), 8192);
  for (auto v : a.data<float>()) ASSERT_EQ(v, 0.0f);
  EXPECT_THROW(a.reset_zeroed(DType::Float32, {-1, 2}), spmd::Error);
}

TEST(ShardingHostArray, ResetForOverwriteReusesTheAllocation) {
  HostArray a(DType::Int32, {4, 512});
  const std::byte* before = a.view().bytes();
  a.reset_for_overwrite(DType::Int64, {2, 512});  // same bytes, another dtype and shape
  EXPECT_EQ(a.view().bytes(), before);
  EXPECT_EQ(a.dtype(), DType::Int64);
  EXPECT_EQ(a.shape(), (Shape{2, 512}));
  EXPECT_EQ(a.view().size_bytes(), 8192u);
  a.reset_for_overwrite(DType::Float32, {3, 4096});  // larger: grows
  EXPECT_EQ(a.size(), 3 * 4096);
  EXPECT_THROW(a.reset_for_overwrite(DType::Float32, {2, -1}), spmd::Error);
}

TEST(ShardingShape, VectorLikeInlineAndBeyond) {
  for (std::size_t dims = 0; dims <= Shape::kInline + 3; ++dims) {
    std::vector<std::int64_t> v;
    Shape s;
    for (std::size_t i = 0; i < dims; ++i) {
      v.push_back(static_cast<std::int64_t>(i + 2));
      s.push_back(static_cast<std::int64_t>(i + 2));
    }
    EXPECT_EQ(s.size(), dims);
    EXPECT_EQ(s.to_vector(), v);
    EXPECT_EQ(Shape(v), s);
    Shape copy = s;
    EXPECT_EQ(copy, s);
    Shape moved = std::move(copy);
    EXPECT_EQ(moved, s);
    EXPECT_TRUE(copy.empty());  // NOLINT(bugprone-use-after-move): a moved-from shape is empty
    moved.insert(moved.begin(), 9);  // a leading device dimension, across the inline limit too
    v.insert(v.begin(), 9);
    EXPECT_EQ(moved.to_vector(), v);
    moved.insert(moved.end(), 1);
    v.push_back(1);
    EXPECT_EQ(moved.to_vector(), v);
    EXPECT_EQ(to_string(Shape(v.begin(), v.end())), to_string(moved));
  }
  EXPECT_LT((Shape{1, 2}), (Shape{1, 3}));
  EXPECT_LT((Shape{1, 2}), (Shape{1, 2, 0}));
  EXPECT_FALSE((Shape{2}) == (Shape{2, 1}));
  EXPECT_EQ(to_string(Shape{}), "[]");
  // A high-rank array works like any other.
  HostArray a(DType::UInt8, {1, 2, 1, 2, 1, 2, 1, 2, 3});
  EXPECT_EQ(a.size(), 48);
  EXPECT_EQ(a.view().at(0).shape(), (Shape{2, 1, 2, 1, 2, 1, 2, 3}));
  EXPECT_EQ(a.view().row_elements(), 48);
}

}  // namespace
