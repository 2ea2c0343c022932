// Counter-based keys and the sampling built on them (models/rng.hpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <vector>

#include "spmd/models/cnn_init.hpp"
#include "spmd/models/rng.hpp"

namespace {

using spmd::models::Key;
using Words = std::array<std::uint32_t, 2>;

TEST(CnnRng, Threefry2x32MatchesPublishedKnownAnswers) {
  // Random123's kat_vectors for threefry2x32_20 (also used by JAX's tests).
  EXPECT_EQ(spmd::models::threefry2x32({0u, 0u}, {0u, 0u}), (Words{0x6b200159u, 0x99ba4efeu}));
  EXPECT_EQ(spmd::models::threefry2x32({0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu}),
            (Words{0x1cb996fcu, 0xbb002be7u}));
  EXPECT_EQ(spmd::models::threefry2x32({0x13198a2eu, 0x03707344u}, {0x243f6a88u, 0x85a308d3u}),
            (Words{0xc4923a9cu, 0x483df7a0u}));
}

TEST(CnnRng, KeyFollowsJaxPrngKeyAndSplit) {
  EXPECT_EQ(Key(0).words(), (Words{0u, 0u}));
  EXPECT_EQ(Key(0x0000000500000007ull).words(), (Words{5u, 7u}));
  // jax.random.split(jax.random.PRNGKey(0)) as printed in JAX's documentation.
  const auto keys = Key(0).split(2);
  ASSERT_EQ(keys.size(), 2u);
  EXPECT_EQ(keys[0].words(), (Words{4146024105u, 967050713u}));
  EXPECT_EQ(keys[1].words(), (Words{2718843009u, 1272950319u}));
}

TEST(CnnRng, SplitAtAgreesWithSplitAndKeysAreDistinct) {
  for (int n : {1, 2, 3, 7, 16, 33}) {
    const Key root(1234 + n);
    const auto keys = root.split(n);
    std::set<Words> seen;
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(keys[i], root.split_at(n, i)) << "n=" << n << " i=" << i;
      seen.insert(keys[i].words());
    }
    EXPECT_EQ(seen.size(), static_cast<std::size_t>(n));
    EXPECT_EQ(seen.count(root.words()), 0u);
  }
  EXPECT_THROW(Key(1).split(0), std::invalid_argument);
  EXPECT_THROW(Key(1).split_at(3, 3), std::invalid_argument);
  EXPECT_THROW(Key(1).split_at(3, -1), std::invalid_argument);
}

TEST(CnnRng, FoldInIsDeterministicAndDistinct) {
  const Key k(42);
  EXPECT_EQ(k.fold_in(3), k.fold_in(3));
  EXPECT_NE(k.fold_in(3), k.fold_in(4));
  EXPECT_NE(k.fold_in(0), k);
  EXPECT_NE(Key(43).fold_in(3), k.fold_in(3));
}

TEST(CnnRng, StreamWordsArePureFunctionsOfKeyAndIndex) {
  const Key k(7);
  spmd::models::RandomStream a(k), b(k);
  std::vector<std::uint32_t> seq;
  for (int i = 0; i < 100; ++i) seq.push_back(a.next());
  for (int i = 99; i >= 0; --i) EXPECT_EQ(b.word(static_cast<std::uint64_t>(i)), seq[static_cast<std::size_t>(i)]);
  EXPECT_EQ(a.position(), 100u);
  // Words of different keys differ; a stream is not made of its key's derived keys.
  spmd::models::RandomStream c(Key(8));
  int equal = 0;
  for (int i = 0; i < 100; ++i) equal += c.word(static_cast<std::uint64_t>(i)) == seq[static_cast<std::size_t>(i)];
  EXPECT_LT(equal, 3);
  EXPECT_NE(seq[0], k.fold_in(0).words()[0]);
  EXPECT_NE(seq[0], k.split(2)[0].words()[0]);
}

TEST(CnnRng, UniformIsStrictlyInsideTheUnitInterval) {
  EXPECT_GT(spmd::models::uniform_open01(0u), 0.0);
  EXPECT_LT(spmd::models::uniform_open01(0xffffffffu), 1.0);
  EXPECT_DOUBLE_EQ(spmd::models::uniform_open01(0u) + spmd::models::uniform_open01(0xffffffffu), 1.0);
}

TEST(CnnRng, ErfinvInvertsErf) {
  for (double y = -0.999; y < 1.0; y += 0.0137) EXPECT_NEAR(std::erf(spmd::models::erfinv(y)), y, 1e-14) << y;
  EXPECT_EQ(spmd::models::erfinv(0.0), 0.0);
  EXPECT_NEAR(spmd::models::erfinv(0.5), 0.4769362762044699, 1e-15);
  EXPECT_TRUE(std::isinf(spmd::models::erfinv(1.0)));
  EXPECT_TRUE(std::isnan(spmd::models::erfinv(1.5)));
}

TEST(CnnRng, TruncatedNormalHasTheTruncatedMomentsAndBound) {
  const float stddev = 0.37f;
  std::vector<float> v(200000);
  spmd::models::fill_truncated_normal(Key(5), stddev, v);
  double sum = 0, sq = 0;
  float max_abs = 0;
  for (float x : v) {
    sum += x;
    sq += static_cast<double>(x) * x;
    max_abs = std::max(max_abs, std::abs(x));
  }
  const double n = static_cast<double>(v.size());
  const double mean = sum / n;
  const double sd = std::sqrt(sq / n - mean * mean);
  // N(0,1) truncated to [-2, 2] has std 0.8796256610342398.
  EXPECT_NEAR(mean, 0.0, 4 * stddev / std::sqrt(n));
  EXPECT_NEAR(sd / stddev, 0.8796256610342398, 0.005);
  EXPECT_LE(max_abs, 2.0f * stddev);
  EXPECT_GT(max_abs, 1.99f * stddev);  // the tails are reached
  // Element p depends only on (key, p): a prefix is a prefix.
  std::vector<float> head(17);
  spmd::models::fill_truncated_normal(Key(5), stddev, head);
  EXPECT_TRUE(std::equal(head.begin(), head.end(), v.begin()));
}

void expect_permutation(const std::vector<std::int64_t>& p, std::int64_t n) {
  ASSERT_EQ(static_cast<std::int64_t>(p.size()), n);
  std::vector<std::int64_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(sorted[static_cast<std::size_t>(i)], i);
}

TEST(CnnRng, RandomPermutationIsAPermutationForAllSmallAndOddSizes) {
  for (std::int64_t n : {0, 1, 2, 3, 31, 32, 33, 1000, 60001}) {
    expect_permutation(spmd::models::random_permutation(Key(9), n), n);
    EXPECT_EQ(spmd::models::random_permutation(Key(9), n), spmd::models::random_permutation(Key(9), n));
  }
  EXPECT_THROW(spmd::models::random_permutation(Key(9), -1), std::invalid_argument);
}

TEST(CnnRng, RandomPermutationIsUniformOnThreeElements) {
  // All 6 orders of 3 elements, each about 1/6 of 6000 keys (chi-square, 5 dof, p ~ 1e-4).
  std::map<std::vector<std::int64_t>, int> counts;
  const int trials = 6000;
  for (int t = 0; t < trials; ++t) counts[spmd::models::random_permutation(Key(100).fold_in(t), 3)]++;
  ASSERT_EQ(counts.size(), 6u);
  double chi2 = 0;
  for (const auto& [perm, c] : counts) chi2 += (c - trials / 6.0) * (c - trials / 6.0) / (trials / 6.0);
  EXPECT_LT(chi2, 25.0);
}

TEST(CnnRng, EpochShuffleIsDeterministicPerSeedAndEpochAndDiffersAcrossEpochs) {
  const std::int64_t n = 1000;
  const auto e1 = spmd::models::epoch_permutation(3, 1, n);
  const auto e2 = spmd::models::epoch_permutation(3, 2, n);
  expect_permutation(e1, n);
  expect_permutation(e2, n);
  EXPECT_EQ(e1, spmd::models::epoch_permutation(3, 1, n));
  EXPECT_NE(e1, e2);
  EXPECT_NE(e1, spmd::models::epoch_permutation(4, 1, n));
  // Not the identity (probability 1/1000! otherwise).
  std::vector<std::int64_t> identity(static_cast<std::size_t>(n));
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_NE(e1, identity);
  // The shuffle's keys are not the members' keys.
  EXPECT_NE(spmd::models::epoch_shuffle_key(3, 1), spmd::models::ensemble_member_key(3, 0, 1));
  EXPECT_THROW(spmd::models::epoch_shuffle_key(3, 0), std::invalid_argument);
}

// The schedule of cnn_init.hpp, as the Flax example's loop writes it with jax.random:
// rng = split(PRNGKey(seed))[0]; every epoch `rng, input_rng = split(rng)` and the epoch
// shuffles with input_rng. Built here from Key::split (pinned to JAX's values above).
TEST(CnnRng, EpochShuffleKeysFollowTheExamplesSplitSchedule) {
  for (std::uint64_t seed : {0ull, 3ull, 0x123456789ull}) {
    Key rng = Key(seed).split(2)[0];
    for (int epoch = 1; epoch <= 5; ++epoch) {
      const auto parts = rng.split(2);
      rng = parts[0];
      EXPECT_EQ(spmd::models::epoch_shuffle_key(seed, epoch), parts[1]) << "seed " << seed << " epoch " << epoch;
    }
  }
}

}  // namespace
