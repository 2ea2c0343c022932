// FeatureDecoder against the conversion the loader made before it existed, written out as a
// scalar reference: every stored type, every --input-scale mode, bit for bit; and the checks
// a load makes (non-finite values, float64 beyond float32), naming the row and the element.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "spmd/data/element_type.hpp"
#include "spmd/data/feature_decoder.hpp"
#include "spmd/runtime/error.hpp"

using namespace spmd;
using data::ElementType;
using data::FeatureDecoder;
using data::FeatureScale;

namespace {

// The loader's conversion: uint8 / 255.0 under auto; a factor in double; else a cast.
template <class T>
float reference(T v, const FeatureScale& s) {
  if (s.mode == FeatureScale::Mode::Factor) return static_cast<float>(static_cast<double>(v) * s.factor / s.divisor);
  if (std::is_same_v<T, std::uint8_t> && s.mode == FeatureScale::Mode::Auto) return static_cast<float>(v / 255.0);
  return static_cast<float>(v);
}

template <class T>
std::vector<T> samples() {
  std::vector<T> v;
  if constexpr (std::is_same_v<T, std::uint8_t>) {
    for (int x = 0; x < 256; ++x) v.push_back(static_cast<T>(x));
  } else {
    const T lo = std::numeric_limits<T>::lowest(), hi = std::numeric_limits<T>::max();
    v = {T(0), T(1), T(3), T(7), T(100), T(127), lo, hi, static_cast<T>(hi / 3), static_cast<T>(lo / 5)};
    if constexpr (std::is_floating_point_v<T>) v.insert(v.end(), {T(0.1), T(-2.5), T(1e-30), T(16777217)});
    else v.push_back(static_cast<T>((T(1) << (sizeof(T) * 8 - 2)) + 1));  // above 2^24 for the wide ones
  }
  return v;
}

template <class T>
void expect_same_bits_as_the_loader(ElementType type) {
  for (const FeatureScale& scale :
       {FeatureScale::parse("auto", false), FeatureScale::parse("none", false), FeatureScale::parse("1/255", false),
        FeatureScale::parse("0.37", true)}) {
    const auto values = samples<T>();  // a double beyond float32 decodes to inf, as the cast does
    const FeatureDecoder d(type, scale, "'x.h5': features dataset 'x'");
    std::vector<float> out(values.size(), -1.0f);
    d.decode(reinterpret_cast<const std::byte*>(values.data()), static_cast<std::int64_t>(values.size()), out.data());
    for (std::size_t i = 0; i < values.size(); ++i) {
      const float want = reference(values[i], scale);
      EXPECT_EQ(std::memcmp(&out[i], &want, sizeof(float)), 0)
          << data::to_string(type) << " " << scale.describe() << " value " << +values[i] << ": " << out[i] << " vs "
          << want;
    }
  }
}

}  // namespace

TEST(FeatureDecoder, EveryTypeAndScaleGivesTheLoadersBits) {
  expect_same_bits_as_the_loader<std::uint8_t>(ElementType::UInt8);
  expect_same_bits_as_the_loader<std::int8_t>(ElementType::Int8);
  expect_same_bits_as_the_loader<std::int16_t>(ElementType::Int16);
  expect_same_bits_as_the_loader<std::uint16_t>(ElementType::UInt16);
  expect_same_bits_as_the_loader<std::int32_t>(ElementType::Int32);
  expect_same_bits_as_the_loader<std::uint32_t>(ElementType::UInt32);
  expect_same_bits_as_the_loader<std::int64_t>(ElementType::Int64);
  expect_same_bits_as_the_loader<std::uint64_t>(ElementType::UInt64);
  expect_same_bits_as_the_loader<float>(ElementType::Float32);
  expect_same_bits_as_the_loader<double>(ElementType::Float64);
}

TEST(FeatureDecoder, UnalignedStoredRowsDecodeAlike) {
  // Compacted rows (--drop-label) and byte columns may start anywhere.
  const std::vector<float> values{0.5f, -1.25f, 3.0f, 1e20f};
  std::vector<std::byte> shifted(values.size() * sizeof(float) + 1);
  std::memcpy(shifted.data() + 1, values.data(), values.size() * sizeof(float));
  const FeatureDecoder d(ElementType::Float32, FeatureScale::parse("2", false), "x");
  std::vector<float> out(values.size());
  d.decode(shifted.data() + 1, 4, out.data());
  for (std::size_t i = 0; i < values.size(); ++i) EXPECT_EQ(out[i], reference(values[i], d.scale()));
}

TEST(FeatureDecoder, InPlaceOnlyForFloat32WithoutAFactor) {
  EXPECT_TRUE(FeatureDecoder(ElementType::Float32, FeatureScale::parse("auto", true), "x").in_place());
  EXPECT_TRUE(FeatureDecoder(ElementType::Float32, FeatureScale::parse("none", false), "x").in_place());
  EXPECT_FALSE(FeatureDecoder(ElementType::Float32, FeatureScale::parse("1/255", false), "x").in_place());
  EXPECT_FALSE(FeatureDecoder(ElementType::UInt8, FeatureScale::parse("auto", true), "x").in_place());
  // The image check: images, auto, another type than uint8.
  EXPECT_TRUE(FeatureDecoder(ElementType::UInt16, FeatureScale::parse("auto", true), "x").checks_image_range());
  EXPECT_FALSE(FeatureDecoder(ElementType::UInt8, FeatureScale::parse("auto", true), "x").checks_image_range());
  EXPECT_FALSE(FeatureDecoder(ElementType::UInt16, FeatureScale::parse("auto", false), "x").checks_image_range());
  EXPECT_FALSE(FeatureDecoder(ElementType::UInt16, FeatureScale::parse("1/255", true), "x").checks_image_range());
}

TEST(FeatureDecoder, ChecksNameTheRowAndElementAsTheLoaderDid) {
  const std::string where = "'f.h5': features dataset 'images'";
  std::vector<float> f(12, 1.0f);
  f[7] = std::numeric_limits<float>::quiet_NaN();
  const FeatureDecoder d32(ElementType::Float32, {}, where);
  try {
    d32.check(reinterpret_cast<const std::byte*>(f.data()), 30, 3, 4);  // rows 30..32 of 4 elements
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              where + ": row 31 has a non-finite value (nan) at element 3; features must be finite");
  }
  std::vector<double> g(6, 0.5);
  g[4] = 1e300;  // finite, beyond float32
  const FeatureDecoder d64(ElementType::Float64, {}, where);
  try {
    d64.check(reinterpret_cast<const std::byte*>(g.data()), 0, 2, 3);
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), where + ": row 1 element 1 holds 1e+300, outside the float32 range");
  }
  g[4] = -std::numeric_limits<double>::infinity();
  EXPECT_THROW(d64.check(reinterpret_cast<const std::byte*>(g.data()), 0, 2, 3), Error);
  // Integers always pass.
  const std::vector<std::int32_t> ints{1, -5, 7};
  const FeatureDecoder d_int(ElementType::Int32, {}, where);
  EXPECT_NO_THROW(d_int.check(reinterpret_cast<const std::byte*>(ints.data()), 0, 1, 3));
}

TEST(FeatureRange, KeepsTheExtentBeyondZero) {
  data::FeatureRange r;
  const std::vector<float> v{0.25f, 0.5f};
  r.add(v.data(), 2);
  EXPECT_EQ(r.below, 0.0);
  EXPECT_EQ(r.above, 0.5);
  const std::vector<float> w{-3.0f, 255.0f};
  r.add(w.data(), 2);
  EXPECT_EQ(r.below, 3.0);
  EXPECT_EQ(r.above, 255.0);
}

// Every one of the 65536 float16 bit patterns widens to the compiler's own conversion
// (_Float16, IEEE binary16) bit for bit (NaNs stay NaN), and the decoder applies the same
// widening with and without a factor.
TEST(FeatureDecoder, Float16WidensExactlyForEveryBitPattern) {
#if defined(__FLT16_MAX__)
  std::vector<std::uint16_t> all(65536);
  for (std::uint32_t b = 0; b < 65536; ++b) all[b] = static_cast<std::uint16_t>(b);
  std::vector<float> decoded(all.size()), scaled(all.size());
  FeatureScale half;
  half.mode = FeatureScale::Mode::Factor;
  half.factor = 1.0;
  half.divisor = 2.0;
  FeatureDecoder(ElementType::Float16, {}, "test").decode(reinterpret_cast<const std::byte*>(all.data()),
                                                          static_cast<std::int64_t>(all.size()), decoded.data());
  FeatureDecoder(ElementType::Float16, half, "test").decode(reinterpret_cast<const std::byte*>(all.data()),
                                                            static_cast<std::int64_t>(all.size()), scaled.data());
  for (std::uint32_t b = 0; b < 65536; ++b) {
    _Float16 h;
    std::memcpy(&h, &all[b], sizeof h);
    const float want = static_cast<float>(h);
    const float got = data::float16_to_float(all[b]);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << "bits 0x" << std::hex << b;
      continue;
    }
    ASSERT_EQ(std::memcmp(&got, &want, sizeof got), 0) << "bits 0x" << std::hex << b << ": " << got << " vs " << want;
    ASSERT_EQ(std::memcmp(&decoded[b], &want, sizeof want), 0) << "decode, bits 0x" << std::hex << b;
    const float want_scaled = static_cast<float>(static_cast<double>(want) * 1.0 / 2.0);
    ASSERT_EQ(std::memcmp(&scaled[b], &want_scaled, sizeof want), 0) << "factor, bits 0x" << std::hex << b;
  }
  // The loader's check: inf and NaN are refused, naming the row; the largest finite is not.
  const std::uint16_t row[3] = {0x3c00, 0x7bff, 0x7c00};  // 1, 65504, inf
  const FeatureDecoder d16(ElementType::Float16, {}, "'f.h5': features dataset 'X'");
  EXPECT_NO_THROW(d16.check(reinterpret_cast<const std::byte*>(row), 10, 2, 1));
  try {
    d16.check(reinterpret_cast<const std::byte*>(row), 10, 3, 1);
    ADD_FAILURE() << "inf accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("row 12 has a non-finite value (inf)"), std::string::npos) << e.what();
  }
#else
  GTEST_SKIP() << "this compiler has no _Float16 to compare with";
#endif
}
