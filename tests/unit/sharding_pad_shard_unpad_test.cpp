// pad_shard_unpad against the unwrapped computation, over flax's test matrix: batch sizes
// d, d+1, d-1, 5d, 5d+1, 5d-1 for d in {1,3,4,8} and dtypes float32, uint8, int32,
// bfloat16. Per-device work runs on a runtime::DevicePool, as the eval workload does.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "spmd/runtime/devices.hpp"
#include "spmd/runtime/error.hpp"
#include "spmd/sharding/pad_shard_unpad.hpp"

namespace {

using namespace spmd::sharding;

constexpr std::int64_t kFeatures = 3;

// Calls fn.template operator()<T>() with the C++ type of dtype.
template <class Fn>
void visit_dtype(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::Float32: fn.template operator()<float>(); return;
    case DType::UInt8: fn.template operator()<std::uint8_t>(); return;
    case DType::Int32: fn.template operator()<std::int32_t>(); return;
    case DType::BFloat16: fn.template operator()<BFloat16>(); return;
    case DType::Int64: fn.template operator()<std::int64_t>(); return;
  }
}

template <class T>
T from_int(int v) {
  if constexpr (std::is_same_v<T, BFloat16>)
    return BFloat16::from_float(static_cast<float>(v));
  else
    return static_cast<T>(v);
}
template <class T>
float to_float(T v) {
  if constexpr (std::is_same_v<T, BFloat16>)
    return v.to_float();
  else
    return static_cast<float>(v);
}

// Values below 50, so x*2+1 and a row sum of 3 stay exact in every dtype (bfloat16 holds
// integers up to 256 exactly) and never wrap in uint8.
HostArray make_input(DType dtype, std::int64_t rows, int seed) {
  HostArray a(dtype, {rows, kFeatures});
  visit_dtype(dtype, [&]<class T>() {
    auto v = a.data<T>();
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = from_int<T>(static_cast<int>((i * 7 + seed) % 49) + 1);
  });
  return a;
}

// The computation under test, on rows [n, 3] -> (x*2+1 [n, 3], row sums [n]), in the
// input's dtype. Used unwrapped as the reference and per device inside the wrapper.
void affine_and_row_sum(ConstHostView x, HostView affine, HostView row_sum) {
  visit_dtype(x.dtype(), [&]<class T>() {
    const auto in = x.data<T>();
    auto a = affine.data<T>();
    auto s = row_sum.data<T>();
    for (std::int64_t r = 0; r < x.rows(); ++r) {
      float sum = 0;
      for (std::int64_t f = 0; f < kFeatures; ++f) {
        const float v = to_float(in[static_cast<std::size_t>(r * kFeatures + f)]);
        a[static_cast<std::size_t>(r * kFeatures + f)] = from_int<T>(static_cast<int>(v * 2 + 1));
        sum += v;
      }
      s[static_cast<std::size_t>(r)] = from_int<T>(static_cast<int>(sum));
    }
  });
}

std::vector<HostArray> unwrapped(ConstHostView x) {
  std::vector<HostArray> out{HostArray(x.dtype(), {x.rows(), kFeatures}), HostArray(x.dtype(), {x.rows()})};
  affine_and_row_sum(x, out[0].view(), out[1].view());
  return out;
}

std::unique_ptr<spmd::runtime::DevicePool> cpu_pool(int devices) {
  std::vector<spmd::runtime::DeviceInfo> infos(static_cast<std::size_t>(devices));
  for (int i = 0; i < devices; ++i) infos[static_cast<std::size_t>(i)] = {i, i, &spmd::runtime::host_platform(), i, "cpu:" + std::to_string(i)};
  return std::make_unique<spmd::runtime::DevicePool>(std::move(infos));
}

bool all_zero(ConstHostView v) {
  for (std::size_t i = 0; i < v.size_bytes(); ++i)
    if (v.bytes()[i] != std::byte{0}) return false;
  return true;
}

// What the wrapped function saw on one call.
struct Seen {
  Shape shape;
  std::int64_t batch = -1;
  bool padding_zero = true;
  const std::byte* data = nullptr;
};

// The per-device step: argument 0 is [d, b_dev, 3]; device i works on at(i) in its thread.
auto device_step(spmd::runtime::DevicePool& pool, Seen& seen) {
  return [&pool, &seen](const Shards& a) {
    const ConstHostView x = a[0];
    seen.shape = x.shape();
    seen.batch = a.batch();
    seen.data = x.bytes();
    const std::int64_t d = a.devices(), b_dev = a.device_batch();
    // Rows past the real batch (device-major order) must be zero padding.
    seen.padding_zero = all_zero(x.reshaped({d * b_dev, kFeatures}).slice_rows(a.batch(), d * b_dev - a.batch()));
    std::vector<HostArray> out{HostArray(x.dtype(), {d, b_dev, kFeatures}), HostArray(x.dtype(), {d, b_dev})};
    pool.run([&](int dev) { affine_and_row_sum(x.at(dev), out[0].view().at(dev), out[1].view().at(dev)); });
    return out;
  };
}

TEST(ShardingPadShardUnpad, MatchesUnwrappedForTheReferenceMatrix) {
  for (const int d : {1, 3, 4, 8}) {
    auto pool = cpu_pool(d);
    Seen seen;
    PadShardUnpad wrapper(d);
    for (const DType dtype : {DType::Float32, DType::UInt8, DType::Int32, DType::BFloat16}) {
      for (const std::int64_t b : {d, d + 1, d - 1, 5 * d, 5 * d + 1, 5 * d - 1}) {
        if (b == 0) continue;
        SCOPED_TRACE("d=" + std::to_string(d) + " b=" + std::to_string(b) + " dtype=" + to_string(dtype));
        const HostArray x = make_input(dtype, b, static_cast<int>(b + d));
        const auto out = wrapper({x}, device_step(*pool, seen));
        const auto expected = unwrapped(x);
        ASSERT_EQ(out.size(), 2u);
        EXPECT_EQ(out[0].dtype(), dtype);
        EXPECT_TRUE(bitwise_equal(out[0], expected[0])) << "x*2+1 differs from the unwrapped computation";
        EXPECT_TRUE(bitwise_equal(out[1], expected[1])) << "row sums differ from the unwrapped computation";
        const std::int64_t b_dev = (b + d - 1) / d;
        EXPECT_EQ(seen.shape, (Shape{d, b_dev, kFeatures}));
        EXPECT_EQ(seen.batch, b);
        EXPECT_TRUE(seen.padding_zero);
        // Already a multiple of d: the shards view the caller's rows, no copy.
        if (b % d == 0) EXPECT_EQ(seen.data, x.view().bytes());
        if (b % d != 0) EXPECT_NE(seen.data, x.view().bytes());
      }
    }
  }
}

TEST(ShardingPadShardUnpad, MinDeviceBatchGivesOneShapeForEveryCall) {
  for (const int d : {1, 3, 4}) {
    for (const std::int64_t B : {1, 4, 7}) {
      for (const std::int64_t n : {d * B * 3, d * B * 3 + 1, d * B * 3 - 1, std::int64_t{1}}) {
        SCOPED_TRACE("d=" + std::to_string(d) + " B=" + std::to_string(B) + " n=" + std::to_string(n));
        auto pool = cpu_pool(d);
        Seen seen;
        PadShardUnpad wrapper(d);
        const HostArray all = make_input(DType::Float32, n, 5);
        std::set<Shape> shapes_with_min, shapes_without, expected_without;
        std::vector<float> gathered;
        for (std::int64_t first = 0; first < n; first += d * B) {
          const ConstHostView batch = ConstHostView(all).slice_rows(first, std::min(d * B, n - first));
          expected_without.insert({d, (batch.rows() + d - 1) / d, kFeatures});
          const auto out = wrapper({batch}, device_step(*pool, seen), B);
          shapes_with_min.insert(seen.shape);
          EXPECT_TRUE(seen.padding_zero);
          ASSERT_EQ(out[0].rows(), batch.rows());
          gathered.insert(gathered.end(), out[0].data<float>().begin(), out[0].data<float>().end());
          wrapper({batch}, device_step(*pool, seen));
          shapes_without.insert(seen.shape);
        }
        EXPECT_EQ(shapes_with_min, (std::set<Shape>{{d, B, kFeatures}}));
        // Without the option a short last batch is a second shape.
        EXPECT_EQ(shapes_without, expected_without);
        EXPECT_TRUE(bitwise_equal(HostArray::from<float>({n, kFeatures}, gathered), unwrapped(all)[0]));
      }
    }
  }
}

TEST(ShardingPadShardUnpad, MinDeviceBatchPadsBeyondTheMultipleOfD) {
  auto pool = cpu_pool(3);
  Seen seen;
  PadShardUnpad wrapper(3);
  for (std::int64_t b = 1; b <= 20; ++b) {
    for (const std::int64_t m : {0, 1, 2, 5}) {
      const HostArray x = make_input(DType::Int32, b, 1);
      const auto out = wrapper({x}, device_step(*pool, seen), m);
      EXPECT_EQ(seen.shape[1], std::max((b + 2) / 3, m)) << "b=" << b << " m=" << m;
      EXPECT_EQ(seen.shape[1], device_batch_for(b, 3, m));
      EXPECT_TRUE(seen.padding_zero) << "b=" << b << " m=" << m;
      EXPECT_TRUE(bitwise_equal(out[0], unwrapped(x)[0]));
    }
  }
  const HostArray two_rows = make_input(DType::Int32, 2, 1);
  EXPECT_THROW(wrapper({two_rows}, device_step(*pool, seen), -1), spmd::Error);
}

TEST(ShardingPadShardUnpad, PaddingBufferIsReusedAndRezeroed) {
  auto pool = cpu_pool(4);
  Seen seen;
  PadShardUnpad wrapper(4);
  // Shorter batches after longer ones in the same padded shape [4, 2, 3]: the rows the
  // earlier call filled must be zero again.
  const HostArray first = make_input(DType::UInt8, 7, 3);
  wrapper({first}, device_step(*pool, seen), 2);
  const std::byte* buffer = seen.data;
  for (const std::int64_t b : {5, 1, 6, 3}) {
    const HostArray x = make_input(DType::UInt8, b, 9);
    const auto out = wrapper({x}, device_step(*pool, seen), 2);
    EXPECT_EQ(seen.data, buffer) << "the padding buffer should be reused for the same shape";
    EXPECT_TRUE(seen.padding_zero) << "b=" << b;
    EXPECT_TRUE(bitwise_equal(out[1], unwrapped(x)[1]));
  }
}

TEST(ShardingPadShardUnpad, EveryBatchedArgumentIsPadded) {
  // What flax passes as static arguments is captured by the step: only batched arrays go in.
  const HostArray x = make_input(DType::Float32, 7, 1);
  const HostArray mask = HostArray::from<std::uint8_t>({7}, std::vector<std::uint8_t>(7, 1));
  PadShardUnpad wrapper(2);
  const Shards& a = wrapper.shard({x, mask});
  EXPECT_THROW(a[2], spmd::Error);
  // Batched: both [2, 4, ...].
  EXPECT_EQ(a[0].shape(), (Shape{2, 4, kFeatures}));
  EXPECT_EQ(a[1].shape(), (Shape{2, 4}));
  const auto m = a[1].data<std::uint8_t>();
  EXPECT_EQ(std::vector<std::uint8_t>(m.begin(), m.end()), (std::vector<std::uint8_t>{1, 1, 1, 1, 1, 1, 1, 0}));
  EXPECT_EQ(a.real_rows(0), 4);
  EXPECT_EQ(a.real_rows(1), 3);
}

TEST(ShardingPadShardUnpad, PaddingByteAndUnreadArguments) {
  const HostArray x = make_input(DType::UInt8, 5, 1);
  PadShardUnpad wrapper(2);
  // A poisoned padding: every byte past the real rows.
  const Shards& poisoned = wrapper.shard({Batched(x.view(), Batched::Padding::Filled, 0xFF)}, 4);
  const auto bytes = poisoned[0].data<std::uint8_t>();
  ASSERT_EQ(bytes.size(), static_cast<std::size_t>(2 * 4 * kFeatures));
  for (std::size_t i = 0; i < bytes.size(); ++i)
    EXPECT_EQ(bytes[i], i < static_cast<std::size_t>(5 * kFeatures) ? x.data<std::uint8_t>()[i] : 0xFF) << i;
  // An unread argument is viewed in place however padded: its real rows where they lie.
  const Shards& in_place = wrapper.shard({Batched(x.view(), Batched::Padding::Unread)}, 4);
  EXPECT_EQ(in_place[0].bytes(), x.view().bytes());
  EXPECT_EQ(in_place[0].shape(), (Shape{2, 4, kFeatures}));
  EXPECT_EQ(in_place[0].at(1).bytes(), x.view().bytes() + 4 * kFeatures);
  EXPECT_EQ(in_place.real_rows(1), 1);
}

TEST(ShardingPadShardUnpad, AStepThatPsumsReturnsItsOwnResult) {
  // An eval step in the evaluation guide's style (flax's static_return): the metrics
  // (correct, total) captured, the step adds the masked counts over all devices.
  std::int64_t metrics[2] = {10, 20};
  const HostArray labels = HostArray::from<std::int32_t>({5}, std::vector<std::int32_t>{0, 1, 0, 2, 0});
  const HostArray mask = HostArray::from<std::uint8_t>({5}, std::vector<std::uint8_t>(5, 1));
  PadShardUnpad wrapper(4);
  const Shards& a = wrapper.shard({labels, mask}, 3);
  const auto l = a[0].data<std::int32_t>();
  const auto k = a[1].data<std::uint8_t>();
  EXPECT_EQ(l.size(), 12u);
  for (std::size_t i = 0; i < l.size(); ++i) {  // padded rows: mask 0, never counted
    metrics[1] += k[i];
    metrics[0] += k[i] && l[i] == 0;  // the fake model always predicts class 0
  }
  EXPECT_EQ(metrics[0], 13);
  EXPECT_EQ(metrics[1], 25);
}

TEST(ShardingPadShardUnpad, InconsistentBatchSizesNameEveryArgument) {
  PadShardUnpad wrapper(2);
  const HostArray a = make_input(DType::Float32, 5, 1), b = make_input(DType::Float32, 4, 1), c = make_input(DType::Int32, 5, 1);
  try {
    wrapper.shard({a, b, c});
    FAIL() << "no error for batch sizes 5, 4, 5";
  } catch (const spmd::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("inconsistent batch sizes"), std::string::npos) << m;
    EXPECT_NE(m.find("argument 0 has 5"), std::string::npos) << m;
    EXPECT_NE(m.find("argument 1 has 4"), std::string::npos) << m;
    EXPECT_NE(m.find("argument 2 has 5"), std::string::npos) << m;
  }
  EXPECT_NO_THROW(wrapper.shard({a, c}));
}

TEST(ShardingPadShardUnpad, ZeroSizeBatch) {
  auto pool = cpu_pool(3);
  Seen seen;
  PadShardUnpad wrapper(3);
  const HostArray empty(DType::BFloat16, {0, kFeatures});
  auto out = wrapper({empty}, device_step(*pool, seen));
  EXPECT_EQ(seen.shape, (Shape{3, 0, kFeatures}));
  EXPECT_EQ(out[0].shape(), (Shape{0, kFeatures}));
  EXPECT_EQ(out[1].shape(), (Shape{0}));
  // With min_device_batch a rank without data runs the common shape, on padding only.
  out = wrapper({empty}, device_step(*pool, seen), 4);
  EXPECT_EQ(seen.shape, (Shape{3, 4, kFeatures}));
  EXPECT_TRUE(seen.padding_zero);
  EXPECT_EQ(out[0].shape(), (Shape{0, kFeatures}));
  EXPECT_EQ(out[0].dtype(), DType::BFloat16);
}

TEST(ShardingPadShardUnpad, MisuseIsReported) {
  const HostArray x = make_input(DType::Float32, 4, 1);
  EXPECT_THROW(PadShardUnpad(0), spmd::Error);
  PadShardUnpad wrapper(2);
  EXPECT_THROW(wrapper.shard(std::span<const Batched>{}), spmd::Error);  // no batched argument
  const HostArray scalar(DType::Float32, {});
  EXPECT_THROW(wrapper.shard({scalar}), spmd::Error);  // no batch dimension
  // Outputs must be per-device [d, b_dev, ...].
  try {
    wrapper({x}, [](const Shards& a) { return std::vector<HostArray>{HostArray(DType::Float32, {a.devices() * a.device_batch()})}; });
    FAIL() << "a flat output was accepted";
  } catch (const spmd::Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected [d=2, b_dev=2, ...]"), std::string::npos) << e.what();
  }
}

}  // namespace
