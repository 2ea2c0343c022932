#pragma once
// IEEE half (float16) and bfloat16 to and from float32, rounding to nearest even: what the
// graph ops use to read float16 / bfloat16 models (weights and inputs computed in float32) and
// what Cast to those types rounds to.
#include <bit>
#include <cmath>
#include <cstdint>

namespace spmd::ops {

inline float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: mantissa x 2^-24
    const float v = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -v : v;
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));  // inf, nan
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

inline std::uint16_t float_to_half(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u, mantissa = x & 0x7fffffu;
  const std::int32_t exponent = static_cast<std::int32_t>((x >> 23) & 0xffu) - 112;  // rebiased for half
  if (((x >> 23) & 0xffu) == 0xffu) return static_cast<std::uint16_t>(sign | 0x7c00u | (mantissa ? 0x200u : 0u));
  if (exponent >= 31) return static_cast<std::uint16_t>(sign | 0x7c00u);  // too large: infinity
  // Normal: drop 13 bits; subnormal (exponent <= 0): the implicit 1 and 13 + 1 - exponent bits.
  const std::uint32_t full = exponent > 0 ? mantissa : mantissa | 0x800000u;
  const int shift = exponent > 0 ? 13 : 14 - exponent;
  if (shift > 24) return static_cast<std::uint16_t>(sign);
  std::uint32_t h = (exponent > 0 ? static_cast<std::uint32_t>(exponent) << 10 : 0u) | (full >> shift);
  const std::uint32_t rest = full & ((1u << shift) - 1), half_way = 1u << (shift - 1);
  if (rest > half_way || (rest == half_way && (h & 1u))) ++h;  // a carry may reach the exponent: right
  return static_cast<std::uint16_t>(sign | h);
}

inline float bfloat16_to_float(std::uint16_t b) { return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16); }

inline std::uint16_t float_to_bfloat16(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if (std::isnan(f)) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  return static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

}  // namespace spmd::ops
