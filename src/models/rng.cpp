#include "spmd/models/rng.hpp"

#include <cmath>
#include <numbers>
#include <stdexcept>
#include <string>

namespace spmd::models {
namespace {

constexpr std::uint32_t rotl32(std::uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

// Counter (tag, 0) can never be produced by split ((j, j+n) with n >= 1) nor by fold_in
// ((0, d)), so a stream's words are independent of every key derived from the same key.
constexpr std::uint32_t kStreamTag = 0x5354524Du;  // "STRM"

}  // namespace

std::array<std::uint32_t, 2> threefry2x32(std::array<std::uint32_t, 2> key,
                                          std::array<std::uint32_t, 2> counter) {
  static constexpr int kRotations[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  const std::uint32_t ks[3] = {key[0], key[1], 0x1BD11BDAu ^ key[0] ^ key[1]};
  std::uint32_t x0 = counter[0] + ks[0];
  std::uint32_t x1 = counter[1] + ks[1];
  for (int group = 0; group < 5; ++group) {
    for (int r : kRotations[group % 2]) {
      x0 += x1;
      x1 = rotl32(x1, r);
      x1 ^= x0;
    }
    // Key injection after every 4 rounds; the added group number breaks symmetry.
    x0 += ks[(group + 1) % 3];
    x1 += ks[(group + 2) % 3] + static_cast<std::uint32_t>(group + 1);
  }
  return {x0, x1};
}

Key::Key(std::uint64_t seed)
    : words_{static_cast<std::uint32_t>(seed >> 32), static_cast<std::uint32_t>(seed & 0xffffffffu)} {}

Key Key::from_words(std::uint32_t w0, std::uint32_t w1) {
  Key k;
  k.words_ = {w0, w1};
  return k;
}

Key Key::split_at(int n, int i) const {
  if (n < 1 || i < 0 || i >= n)
    throw std::invalid_argument("Key::split_at: need 0 <= i < n, got i=" + std::to_string(i) +
                                " n=" + std::to_string(n));
  // JAX encrypts the counters 0..2n-1 as pairs (j, j+n) and reads the 2n outputs, first
  // words then second words, two at a time: output word w is the first word of pair w
  // (w < n) or the second word of pair w-n.
  const auto output_word = [&](std::uint32_t w) {
    const std::uint32_t nn = static_cast<std::uint32_t>(n);
    if (w < nn) return threefry2x32(words_, {w, w + nn})[0];
    return threefry2x32(words_, {w - nn, w})[1];
  };
  const std::uint32_t w = 2u * static_cast<std::uint32_t>(i);
  return from_words(output_word(w), output_word(w + 1));
}

std::vector<Key> Key::split(int n) const {
  if (n < 1) throw std::invalid_argument("Key::split: n must be >= 1, got " + std::to_string(n));
  std::vector<Key> keys;
  keys.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) keys.push_back(split_at(n, i));
  return keys;
}

Key Key::fold_in(std::uint32_t data) const {
  const auto w = threefry2x32(words_, {0u, data});
  return from_words(w[0], w[1]);
}

RandomStream::RandomStream(const Key& key) : key_(threefry2x32(key.words(), {kStreamTag, 0u})) {}

std::uint32_t RandomStream::word(std::uint64_t index) const {
  const std::uint64_t block = index >> 1;
  const auto w = threefry2x32(key_, {static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(block >> 32)});
  return w[index & 1];
}

double uniform_open01(std::uint32_t word) {
  // The centre of one of 2^24 equal cells: never 0 or 1, symmetric about 1/2.
  return (static_cast<double>(word >> 8) + 0.5) * 0x1.0p-24;
}

double erfinv(double y) {
  if (!(y > -1.0 && y < 1.0)) {
    if (y == 1.0) return HUGE_VAL;
    if (y == -1.0) return -HUGE_VAL;
    return std::nan("");
  }
  // Giles' single-precision approximation ("Approximating the erfinv function", GPU
  // Computing Gems, 2011; relative error ~1e-7) as a start; two Newton steps on std::erf
  // (each squares the error) reach double precision.
  static constexpr double kCentral[] = {2.81022636e-08, 3.43273939e-07, -3.5233877e-06,
                                        -4.39150654e-06, 0.00021858087,  -0.00125372503,
                                        -0.00417768164,  0.246640727,    1.50140941};
  static constexpr double kTail[] = {-0.000200214257, 0.000100950558, 0.00134934322,
                                     -0.00367342844,  0.00573950773,  -0.0076224613,
                                     0.00943887047,   1.00167406,     2.83297682};
  const double w0 = -std::log((1.0 - y) * (1.0 + y));
  const bool central = w0 < 5.0;
  const double w = central ? w0 - 2.5 : std::sqrt(w0) - 3.0;
  const double* coefficients = central ? kCentral : kTail;
  double p = coefficients[0];
  for (int k = 1; k < 9; ++k) p = coefficients[k] + p * w;
  double x = p * y;
  const double two_over_sqrt_pi = 2.0 / std::sqrt(std::numbers::pi);
  for (int i = 0; i < 2; ++i) x -= (std::erf(x) - y) / (two_over_sqrt_pi * std::exp(-x * x));
  return x;
}

void fill_truncated_normal(const Key& key, float stddev, std::span<float> out) {
  const RandomStream stream(key);
  const double bound = 2.0;
  const double lo = std::erf(-bound / std::numbers::sqrt2);
  const double hi = std::erf(bound / std::numbers::sqrt2);
  const float limit = static_cast<float>(bound * static_cast<double>(stddev));
  for (std::size_t p = 0; p < out.size(); ++p) {
    const double u = lo + (hi - lo) * uniform_open01(stream.word(p));
    double z = std::numbers::sqrt2 * erfinv(u);
    z = std::fmin(std::fmax(z, -bound), bound);
    float v = static_cast<float>(z * static_cast<double>(stddev));
    // Rounding to float could step just past the bound; keep the documented guarantee.
    v = std::fmin(std::fmax(v, -limit), limit);
    out[p] = v;
  }
}

std::vector<std::int64_t> random_permutation(const Key& key, std::int64_t n) {
  if (n < 0) throw std::invalid_argument("random_permutation: n must be >= 0, got " + std::to_string(n));
  std::vector<std::int64_t> perm(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) perm[static_cast<std::size_t>(i)] = i;
  RandomStream stream(key);
  const auto next64 = [&] {
    const std::uint64_t hi = stream.next();
    return (hi << 32) | stream.next();
  };
  for (std::int64_t i = n - 1; i > 0; --i) {
    // Lemire's multiply-and-reject: an unbiased integer in [0, i].
    const std::uint64_t range = static_cast<std::uint64_t>(i) + 1;
    const std::uint64_t threshold = (0 - range) % range;
    unsigned __int128 product;
    do {
      product = static_cast<unsigned __int128>(next64()) * range;
    } while (static_cast<std::uint64_t>(product) < threshold);
    const auto j = static_cast<std::int64_t>(product >> 64);
    std::swap(perm[static_cast<std::size_t>(i)], perm[static_cast<std::size_t>(j)]);
  }
  return perm;
}

}  // namespace spmd::models
