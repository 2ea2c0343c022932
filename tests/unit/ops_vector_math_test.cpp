// The graph ops' elementwise loops run compiled for AVX-512 where the CPU has it and for the
// build's x86-64-v3 elsewhere (map_floats): both must give the same bits, so that a model's
// results do not depend on which loop a machine took. Every function the ops map, over values
// that reach each of its ranges (tiny, around the polynomial switch points, huge, +-inf, NaN,
// subnormal), the two loops compared bit by bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "../../src/ops/vector_math.hpp"

namespace {

using namespace spmd::ops;

std::vector<float> probe_values() {
  std::vector<float> v = {0.0f, -0.0f, 1e-38f, -1e-38f, 1e-45f, 0.5f, -0.5f, 0.99999f, 1.0f, 1.00001f, -1.0f,
                          9.0f, 20.0f, 87.0f, 88.7f, 89.0f, -87.3f, -88.0f, -104.0f, 1e10f, -1e10f,
                          std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::lowest()};
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> near(-12.0f, 12.0f), wide(-120.0f, 120.0f);
  for (int k = 0; k < 20000; ++k) v.push_back(k % 4 == 0 ? wide(rng) : near(rng));
  v.push_back(0.25f);  // an odd count: every loop's tail runs
  return v;
}

template <class F>
void expect_same_bits(const char* name, F f) {
  const std::vector<float> x = probe_values();
  std::vector<float> a(x.size()), b(x.size());
  map_floats_build(x.data(), a.data(), static_cast<std::int64_t>(x.size()), f);
  map_floats_avx512(x.data(), b.data(), static_cast<std::int64_t>(x.size()), f);
  for (std::size_t k = 0; k < x.size(); ++k)
    ASSERT_EQ(std::memcmp(&a[k], &b[k], sizeof(float)), 0)
        << name << "(" << x[k] << "): build loop " << a[k] << ", AVX-512 loop " << b[k];
}

TEST(VectorMath, TheAvx512LoopGivesTheBitsOfTheBuildLoop) {
  if (!spmd::models::cnn_cpu::isa_supported(spmd::models::cnn_cpu::Isa::Avx512))
    GTEST_SKIP() << "this CPU has no AVX-512: map_floats takes the build's loop only";
  expect_same_bits("exp", [](float v) { return fast_exp(v); });
  expect_same_bits("sigmoid", [](float v) { return fast_sigmoid(v); });
  expect_same_bits("tanh", [](float v) { return fast_tanh(v); });
  expect_same_bits("erf", [](float v) { return fast_erf(v); });
  expect_same_bits("gelu", [](float v) { return v * (fast_erf(v / 1.4142135f) + 1.0f) * 0.5f; });
  expect_same_bits("gelu_tanh",
                   [](float v) { return 0.5f * v * (1.0f + fast_tanh(0.7978845608028654f * (v + 0.044715f * v * v * v))); });
  expect_same_bits("hard_swish", [](float v) { return v * std::clamp(v / 6.0f + 0.5f, 0.0f, 1.0f); });
}

// In place (the recurrent ops' gates), as map_floats is used there.
TEST(VectorMath, MapFloatsInPlaceMatchesOutOfPlace) {
  const std::vector<float> x = probe_values();
  std::vector<float> out(x.size()), in_place = x;
  map_floats(x.data(), out.data(), static_cast<std::int64_t>(x.size()), [](float v) { return fast_sigmoid(v); });
  map_floats(in_place.data(), in_place.data(), static_cast<std::int64_t>(x.size()),
             [](float v) { return fast_sigmoid(v); });
  EXPECT_EQ(std::memcmp(out.data(), in_place.data(), x.size() * sizeof(float)), 0);
}

}  // namespace
