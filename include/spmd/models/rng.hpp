#pragma once
// Counter-based random numbers with splittable keys, modelled on JAX's threefry PRNG:
// a Key is two 32-bit words; every derived key and every random word is a pure function
// of (key, index), so results never depend on thread count, call order or on which rank
// or device asks. Threefry-2x32 with 20 rounds (Salmon et al., "Parallel random numbers:
// as easy as 1, 2, 3", SC 2011) is the block function, as in JAX and Random123.
//
// Key(seed), split(n)[i] and fold_in(d) follow the definitions of jax.random.PRNGKey /
// split / fold_in (threefry implementation); split of PRNGKey(0) is tested against JAX's
// documented output. The sampling functions below are our own (not bit-compatible with
// jax.random.normal and friends).
#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace spmd::models {

// Threefry-2x32-20 block: encrypts the 64-bit counter (x0, x1) under key (k0, k1).
std::array<std::uint32_t, 2> threefry2x32(std::array<std::uint32_t, 2> key,
                                          std::array<std::uint32_t, 2> counter);

class Key {
 public:
  // Like jax.random.PRNGKey(seed): words (seed >> 32, seed & 0xffffffff).
  explicit Key(std::uint64_t seed);
  static Key from_words(std::uint32_t w0, std::uint32_t w1);

  // n keys, like jax.random.split(key, n). Key i depends on n (as in JAX): derive with the
  // ensemble's global size, never with a per-rank count. n >= 1.
  std::vector<Key> split(int n) const;
  // split(n)[i] without materialising the others. 0 <= i < n.
  Key split_at(int n, int i) const;
  // Like jax.random.fold_in(key, data).
  Key fold_in(std::uint32_t data) const;

  std::array<std::uint32_t, 2> words() const { return words_; }
  friend bool operator==(const Key&, const Key&) = default;

 private:
  Key() = default;
  std::array<std::uint32_t, 2> words_{};
};

// An endless stream of random 32-bit words owned by one key: word i is a pure function of
// (key, i), so a tensor's element p can be drawn from word p in any order.
class RandomStream {
 public:
  explicit RandomStream(const Key& key);
  std::uint32_t word(std::uint64_t index) const;
  // Sequential consumption for algorithms that need a variable number of words.
  std::uint32_t next() { return word(position_++); }
  std::uint64_t position() const { return position_; }

 private:
  std::array<std::uint32_t, 2> key_{};
  std::uint64_t position_ = 0;
};

double uniform_open01(std::uint32_t word);  // in (0, 1), 24 significant bits
double erfinv(double y);                    // on (-1, 1), double precision

// out[p] = stddev * z_p where z_p ~ N(0,1) truncated to [-2, 2] (inverse-CDF sampling of
// word p of the key's stream), as jax.random.truncated_normal(key, -2, 2) * stddev.
// |out[p]| <= 2 * stddev exactly (after rounding to float).
void fill_truncated_normal(const Key& key, float stddev, std::span<float> out);

// A uniformly random permutation of 0..n-1 (Fisher-Yates over the key's stream, unbiased
// bounded integers by rejection). n >= 0.
std::vector<std::int64_t> random_permutation(const Key& key, std::int64_t n);

}  // namespace spmd::models
