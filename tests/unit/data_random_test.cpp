// The generator behind make_classification: normals with the right distribution,
// reproducible streams that differ from each other, unbiased bounded integers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "spmd/data/random.hpp"

namespace {

using spmd::data::RandomStream;

double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

TEST(DataRandom, NormalMomentsMatchStandardNormal) {
  RandomStream rng(12345);
  const int n = 2'000'000;
  double s1 = 0, s2 = 0, s3 = 0, s4 = 0;
  for (int i = 0; i < n; ++i) {
    const double x = rng.normal();
    s1 += x;
    s2 += x * x;
    s3 += x * x * x;
    s4 += x * x * x * x;
  }
  const double mean = s1 / n, var = s2 / n - mean * mean;
  // Standard errors at n = 2e6: mean 7e-4, variance 1e-3, skewness 1.7e-3, kurtosis 3.5e-3.
  EXPECT_NEAR(mean, 0.0, 0.004);
  EXPECT_NEAR(var, 1.0, 0.006);
  EXPECT_NEAR(s3 / n, 0.0, 0.012);
  EXPECT_NEAR(s4 / n, 3.0, 0.03);
}

TEST(DataRandom, NormalCdfMatchesAtManyPointsIncludingTheTail) {
  // Kolmogorov-Smirnov on a grid, plus the mass beyond the ziggurat's tail start (3.654),
  // which only the slow path produces.
  RandomStream rng(7, 3);
  const int n = 1'000'000;
  std::vector<double> xs(n);
  for (auto& x : xs) x = rng.normal();
  std::sort(xs.begin(), xs.end());
  double max_gap = 0;
  for (double t = -4.0; t <= 4.0; t += 0.05) {
    const double empirical = static_cast<double>(std::upper_bound(xs.begin(), xs.end(), t) - xs.begin()) / n;
    max_gap = std::max(max_gap, std::fabs(empirical - normal_cdf(t)));
  }
  EXPECT_LT(max_gap, 0.002);  // KS 99.9% bound at n=1e6 is 0.00195 for the sup over all t
  const double beyond = static_cast<double>(std::count_if(xs.begin(), xs.end(), [](double x) { return std::fabs(x) > 3.6541528853610088; })) / n;
  const double expected = 2 * (1 - normal_cdf(3.6541528853610088));  // 2.58e-4
  EXPECT_NEAR(beyond, expected, 6 * std::sqrt(expected / n));
  EXPECT_GT(xs.back(), 4.0);
  EXPECT_LT(xs.front(), -4.0);
}

TEST(DataRandom, StreamsAreReproducibleAndDistinct) {
  for (std::uint64_t seed : {0ull, 1ull, 42ull, ~0ull}) {
    RandomStream a(seed, 5), b(seed, 5), other_stream(seed, 6), other_seed(seed + 1, 5);
    int same_stream_equal = 0, other_stream_equal = 0, other_seed_equal = 0;
    for (int i = 0; i < 1000; ++i) {
      const std::uint64_t x = a.next_u64();
      same_stream_equal += x == b.next_u64();
      other_stream_equal += x == other_stream.next_u64();
      other_seed_equal += x == other_seed.next_u64();
    }
    EXPECT_EQ(same_stream_equal, 1000);
    EXPECT_EQ(other_stream_equal, 0);
    EXPECT_EQ(other_seed_equal, 0);
  }
}

TEST(DataRandom, UniformAndBelowAreUnbiased) {
  RandomStream rng(99);
  for (std::uint64_t n : {1ull, 2ull, 3ull, 7ull, 10ull, 1000ull}) {
    const int draws = 200'000;
    std::vector<int> counts(static_cast<std::size_t>(std::min<std::uint64_t>(n, 1000)), 0);
    for (int i = 0; i < draws; ++i) {
      const std::uint64_t v = rng.below(n);
      ASSERT_LT(v, n);
      ++counts[static_cast<std::size_t>(v)];
    }
    if (n == 1) continue;
    double chi2 = 0;
    const double expected = static_cast<double>(draws) / static_cast<double>(n);
    for (int c : counts) chi2 += (c - expected) * (c - expected) / expected;
    const double dof = static_cast<double>(n - 1);
    EXPECT_LT(chi2, dof + 6 * std::sqrt(2 * dof)) << "n=" << n;
  }
  double lo = 1, hi = 0, sum = 0;
  for (int i = 0; i < 100'000; ++i) {
    const double u = rng.uniform();
    lo = std::min(lo, u);
    hi = std::max(hi, u);
    sum += u;
    const double v = rng.uniform_open_low();
    ASSERT_GT(v, 0.0);
    ASSERT_LE(v, 1.0);
  }
  EXPECT_GE(lo, 0.0);
  EXPECT_LT(hi, 1.0);
  EXPECT_NEAR(sum / 100'000, 0.5, 0.005);
}

}  // namespace
