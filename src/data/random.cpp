#include "spmd/data/random.hpp"

#include <cmath>

namespace spmd::data {

namespace {

// Marsaglia & Tsang's 256-layer ziggurat for the normal density: r is the start of the
// tail, v the area of every layer (and of the base strip with its tail).
constexpr double kTailStart = 3.6541528853610088;
constexpr double kLayerArea = 0.00492867323399;

RandomStream::Ziggurat build_ziggurat() {
  RandomStream::Ziggurat z{};
  auto density = [](double x) { return std::exp(-0.5 * x * x); };
  z.x[0] = kLayerArea / density(kTailStart);
  z.x[1] = kTailStart;
  for (int i = 1; i < 255; ++i) z.x[i + 1] = std::sqrt(-2.0 * std::log(kLayerArea / z.x[i] + density(z.x[i])));
  z.x[256] = 0.0;
  for (int i = 0; i <= 256; ++i) z.f[i] = density(z.x[i]);
  for (int i = 0; i < 256; ++i) z.inner_ratio[i] = z.x[i + 1] / z.x[i];
  return z;
}

const RandomStream::Ziggurat& ziggurat() {
  static const RandomStream::Ziggurat z = build_ziggurat();
  return z;
}

}  // namespace

RandomStream::RandomStream(std::uint64_t seed, std::uint64_t stream) : zig_(&ziggurat()) {
  // Mix the stream number through SplitMix first so that neighbouring streams of one
  // seed (and neighbouring seeds) start far apart in state space.
  std::uint64_t stream_state = stream ^ 0x6a09e667f3bcc909ull;
  std::uint64_t state = seed ^ splitmix64(stream_state);
  for (auto& word : s_) word = splitmix64(state);
  // xoshiro must not start from all zeros (SplitMix makes that practically impossible).
  if ((s_[0] | s_[1] | s_[2] | s_[3]) == 0) s_[0] = 1;
}

std::uint64_t RandomStream::below(std::uint64_t n) {
  std::uint64_t x = next_u64();
  __uint128_t m = static_cast<__uint128_t>(x) * n;
  auto low = static_cast<std::uint64_t>(m);
  if (low < n) {
    const std::uint64_t threshold = (0 - n) % n;
    while (low < threshold) {
      x = next_u64();
      m = static_cast<__uint128_t>(x) * n;
      low = static_cast<std::uint64_t>(m);
    }
  }
  return static_cast<std::uint64_t>(m >> 64);
}

double RandomStream::normal_slow_path(unsigned layer, double u) {
  for (;;) {
    if (layer == 0) {
      // Base strip outside the rectangle: a draw from the tail beyond r (Marsaglia 1964).
      double a = 0, b = 0;
      do {
        a = -std::log(uniform_open_low()) / kTailStart;
        b = -std::log(uniform_open_low());
      } while (b + b < a * a);
      return u < 0 ? -(kTailStart + a) : kTailStart + a;
    }
    // The wedge between the inner rectangle and the curve: accept under the density.
    const double x = u * zig_->x[layer];
    const double y = zig_->f[layer] + uniform() * (zig_->f[layer + 1] - zig_->f[layer]);
    if (y < std::exp(-0.5 * x * x)) return x;
    const std::uint64_t bits = next_u64();
    layer = static_cast<unsigned>(bits & 0xff);
    u = static_cast<double>(static_cast<std::int64_t>(bits) >> 11) * 0x1.0p-52;
    if (std::fabs(u) < zig_->inner_ratio[layer]) return u * zig_->x[layer];
  }
}

}  // namespace spmd::data
