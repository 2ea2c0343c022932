#pragma once
// The random stream of the data generators (make_classification): xoshiro256++ seeded by
// SplitMix64, with independent numbered streams, uniform doubles and a 256-layer
// ziggurat for standard normals (about one 64-bit draw and one compare per normal).
//
// This is NOT numpy's Mersenne Twister: a seed gives the same numbers on every machine
// and build, but not the numbers sklearn would give for the same random_state.
#include <cstdint>

namespace spmd::data {

// SplitMix64 step: a bijective mix of 64 bits, also used to derive seeds.
inline std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

class RandomStream {
 public:
  // Stream `stream` of generator `seed`: distinct (seed, stream) pairs give unrelated
  // sequences, so work split by rows can draw each row's numbers from its own stream,
  // independent of how the rows are blocked or ordered.
  explicit RandomStream(std::uint64_t seed, std::uint64_t stream = 0);

  std::uint64_t next_u64() {
    const std::uint64_t result = rotl(s_[0] + s_[3], 23) + s_[0];
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }
  // (0, 1]: safe under log().
  double uniform_open_low() { return (static_cast<double>(next_u64() >> 11) + 1.0) * 0x1.0p-53; }
  // Integer in [0, n), n >= 1, without modulo bias (Lemire's multiply-shift with rejection).
  std::uint64_t below(std::uint64_t n);
  // Standard normal N(0, 1). Ziggurat: the low 8 bits pick a layer, the top 53 a signed
  // position in it; ~99% of draws end at the first comparison.
  double normal() {
    const std::uint64_t bits = next_u64();
    const unsigned layer = static_cast<unsigned>(bits & 0xff);
    const double u = static_cast<double>(static_cast<std::int64_t>(bits) >> 11) * 0x1.0p-52;  // [-1, 1)
    if ((u < 0 ? -u : u) < zig_->inner_ratio[layer]) return u * zig_->x[layer];
    return normal_slow_path(layer, u);
  }

  // Layer edges of the ziggurat for exp(-x^2/2): x[0] is the base strip's equivalent
  // width (area / f(r)), x[1] = r, x[256] = 0; f = exp(-x^2/2) at each edge.
  struct Ziggurat {
    double x[257];
    double f[257];
    double inner_ratio[256];  // x[i+1] / x[i]: below it the point is under the curve
  };

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  double normal_slow_path(unsigned layer, double u);

  std::uint64_t s_[4];
  const Ziggurat* zig_;
};

}  // namespace spmd::data
