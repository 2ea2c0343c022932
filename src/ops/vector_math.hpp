#pragma once
// exp, sigmoid, tanh and erf for the graph ops' elementwise loops, written so the compiler
// vectorises the loop around them (no libm calls; selects the compiler turns into blends where
// the file is built with -fno-trapping-math, as src/ops/ is): libm's scalar calls were most of a
// transformer's or an LSTM's non-GEMM time. Cephes' single-precision polynomials; within
// 2 ulp of libm (erf within 1.5e-7 absolute beyond |x| = 1). The same function on every row
// and layout, so results stay the same bits whatever the batch.
#include <bit>
#include <cmath>
#include <cstdint>
#include <algorithm>
#include <limits>

#include "spmd/models/cnn_kernels.hpp"

namespace spmd::ops {

[[gnu::always_inline]] inline float fast_exp(float x) {
  // NaN takes the low bound here (its result is chosen below): a NaN reaching the int cast
  // would be undefined behaviour, though the vector instruction gives a harmless INT_MIN.
  const float c = x >= -87.3f ? (x > 88.72283f ? 88.72283f : x) : -87.3f;
  // n = round(c / ln 2) by the 1.5 * 2^23 trick (vectorises, unlike nearbyint), r = c - n ln 2
  // with ln 2 split in two for an exact product.
  const float n = (c * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = std::fma(n, -0.693359375f, c);
  r = std::fma(n, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = std::fma(p, r, 1.3981999507e-3f);
  p = std::fma(p, r, 8.3334519073e-3f);
  p = std::fma(p, r, 4.1665795894e-2f);
  p = std::fma(p, r, 1.6666665459e-1f);
  p = std::fma(p, r, 5.0000001201e-1f);
  p = std::fma(p, r * r, r) + 1.0f;
  // 2^n as a float's exponent bits; n = 128 (the top of exp's range) as 2^127 * 2.
  const bool top = n > 127.5f;
  const float y = p * std::bit_cast<float>((static_cast<std::int32_t>(n) + (top ? 126 : 127)) << 23) * (top ? 2.0f : 1.0f);
  const float inf = std::numeric_limits<float>::infinity();
  return x != x ? x : x < -87.3f ? 0.0f : x > 88.72284f ? inf : y;  // NaN stays NaN
}

[[gnu::always_inline]] inline float fast_sigmoid(float x) { return 1.0f / (1.0f + fast_exp(-x)); }

[[gnu::always_inline]] inline float fast_tanh(float x) {
  const float a = std::fabs(x);
  // Small |x|: x + x^3 P(x^2), where 1 - 2 / (e^2x + 1) would lose the relative precision.
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = std::fma(p, z, 2.06390887954e-2f);
  p = std::fma(p, z, -5.37397155531e-2f);
  p = std::fma(p, z, 1.33314422036e-1f);
  p = std::fma(p, z, -3.33332819422e-1f);
  const float small = std::fma(p * z, x, x);
  const float large = std::copysign(1.0f - 2.0f / (fast_exp(2.0f * a) + 1.0f), x);
  return a < 0.625f ? small : large;
}

[[gnu::always_inline]] inline float fast_erf(float x) {
  const float a = std::fabs(x), z = x * x;
  // |x| < 1: x P(x^2) (Cephes erff); beyond, 1 - t Q(t) e^(-x^2) with t = 1 / (1 + 0.3275911 |x|)
  // (Abramowitz and Stegun 7.1.26, 1.5e-7 absolute where erf is at least 0.84).
  float p = 7.853861353153693e-5f;
  p = std::fma(p, z, -8.010193625184903e-4f);
  p = std::fma(p, z, 5.188327685732524e-3f);
  p = std::fma(p, z, -2.685381193529856e-2f);
  p = std::fma(p, z, 1.128358514861418e-1f);
  p = std::fma(p, z, -3.761262582423300e-1f);
  p = std::fma(p, z, 1.128379165726710f);
  const float small = x * p;
  const float t = 1.0f / std::fma(0.3275911f, a, 1.0f);
  float q = 1.061405429f;
  q = std::fma(q, t, -1.453152027f);
  q = std::fma(q, t, 1.421413741f);
  q = std::fma(q, t, -0.284496736f);
  q = std::fma(q, t, 0.254829592f);
  const float large = std::copysign(1.0f - q * t * fast_exp(-z), x);
  return a < 1.0f ? small : large;
}

// The sum of n contiguous values in eight lanes (value k into lane k % 8), the lanes added in a
// fixed order: a loop the compiler vectorises (a single running sum is one add's latency per
// value), and the same bits wherever the values sit in a batch.
inline float lane_sum(const float* v, std::int64_t n) {
  float lane[8] = {};
  std::int64_t k = 0;
  for (; k + 8 <= n; k += 8)
    for (int j = 0; j < 8; ++j) lane[j] += v[k + j];
  for (; k < n; ++k) lane[k % 8] += v[k];
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

// The largest of n contiguous values, in eight lanes (a vectorised loop; max is exact, so the
// lanes change nothing but the speed). NaN wins, as a running std::max would not promise.
inline float max_of(const float* v, std::int64_t n) {
  float lane[8];
  std::fill(lane, lane + 8, -std::numeric_limits<float>::infinity());
  bool nan = false;
  std::int64_t k = 0;
  for (; k + 8 <= n; k += 8)
    for (int j = 0; j < 8; ++j) {
      lane[j] = v[k + j] > lane[j] ? v[k + j] : lane[j];
      nan |= v[k + j] != v[k + j];
    }
  float top = *std::max_element(lane, lane + 8);
  for (; k < n; ++k) {
    top = v[k] > top ? v[k] : top;
    nan |= v[k] != v[k];
  }
  return nan ? std::numeric_limits<float>::quiet_NaN() : top;
}

// y[k] = f(x[k]) for k < n (y may be x). f is inlined into a loop compiled for AVX-512 where the
// CPU has it (16 lanes against the x86-64-v3 build's 8: the exp, erf and tanh of a GELU or an
// LSTM's gates twice as wide), else into the build's own loop. A lane computes what the scalar
// function does, so the bits are the same either way (unit VectorMath checks it).
template <class F>
[[gnu::target("avx512f,avx512vl,avx512dq,avx512bw")]] void map_floats_avx512(const float* x, float* y, std::int64_t n,
                                                                              F f) {
  for (std::int64_t k = 0; k < n; ++k) y[k] = f(x[k]);
}
template <class F>
void map_floats_build(const float* x, float* y, std::int64_t n, F f) {
  for (std::int64_t k = 0; k < n; ++k) y[k] = f(x[k]);
}
template <class F>
void map_floats(const float* x, float* y, std::int64_t n, F f) {
  static const bool avx512 = models::cnn_cpu::isa_supported(models::cnn_cpu::Isa::Avx512);
  if (avx512) map_floats_avx512(x, y, n, f);
  else map_floats_build(x, y, n, f);
}

}  // namespace spmd::ops
