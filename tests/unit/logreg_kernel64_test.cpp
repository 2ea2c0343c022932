// The float64 logistic-regression kernels (spmd logreg --precision float64): every variant
// gives the portable one's bits on the boundary shapes of its lanes and class groups, the
// result is the double reference's to ~1e-13 where float32 misses it by far more (features
// with a large shared offset), the exp polynomial is within 2 ulp of libm's, and the chunk
// sums do not depend on how chunks are grouped or which variant computes them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "spmd/models/logreg.hpp"
#include "spmd/models/logreg_kernel_spec.hpp"
#include "logreg_reference.hpp"

namespace {

using namespace spmd::models;

struct Problem {
  std::int64_t rows;
  int features, classes;
  std::vector<float> X;
  std::vector<double> W;
  std::vector<std::int32_t> labels;
};

// X uniform in offset + [-1, 1] (float32), W uniform in scale * [-1, 1] (double).
Problem make_problem(std::int64_t rows, int features, int classes, unsigned seed, double scale = 0.5,
                     float offset = 0.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  std::uniform_int_distribution<int> label(0, classes - 1);
  Problem p{rows, features, classes, {}, {}, {}};
  p.X.resize(static_cast<std::size_t>(rows) * features);
  for (auto& v : p.X) v = offset + static_cast<float>(unit(rng));
  p.W.resize(static_cast<std::size_t>(features) * classes);
  for (auto& v : p.W) v = scale * unit(rng);
  p.labels.resize(static_cast<std::size_t>(rows));
  for (auto& v : p.labels) v = label(rng);
  return p;
}

std::vector<LogregKernel> supported_kernels() {
  std::vector<LogregKernel> kernels;
  for (auto k : {LogregKernel::portable, LogregKernel::avx2, LogregKernel::avx512})
    if (logreg_kernel_supported(k)) kernels.push_back(k);
  return kernels;
}

std::vector<double> kernel_partials(const Problem& p, LogregKernel kernel) {
  LogregWorkspace ws(kernel);
  std::vector<double> out(logreg_partials_size(p.features, p.classes), -1.0);
  logreg_chunk_partials(p.X.data(), p.labels.data(), p.rows, p.features, p.classes, p.W.data(), out.data(), ws);
  return out;
}

std::vector<double> reference_partials(const Problem& p) {
  std::vector<double> out(logreg_partials_size(p.features, p.classes), -1.0);
  logreg_reference_partials(p.X.data(), p.labels.data(), p.rows, p.features, p.classes, p.W.data(), out.data());
  return out;
}

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

std::string describe(std::int64_t rows, int f, int c) {
  return "rows=" + std::to_string(rows) + " F=" + std::to_string(f) + " C=" + std::to_string(c);
}

// F around the 8-lane blocks and the AVX-512 gradient's 16-feature pairs, C around the class
// groups (4, 6, 8, 10), rows around tiles (32) and float32's gradient blocks (256).
TEST(LogregKernel64, VariantsGiveIdenticalBitsAndMatchTheReference) {
  const std::int64_t rows[] = {0, 1, 2, 31, 32, 33, 255, 256, 257, 600};
  const int features[] = {1, 3, 7, 8, 9, 15, 16, 17, 24, 33, 100};
  int k = 0;
  for (int c = 1; c <= 17; ++c)
    for (int f : features) {
      const std::int64_t n = rows[(k++) % std::size(rows)];
      const Problem p = make_problem(n, f, c, 29u * f + c);
      const auto portable = kernel_partials(p, LogregKernel::portable);
      for (auto kernel : supported_kernels())
        ASSERT_TRUE(same_bits(kernel_partials(p, kernel), portable)) << to_string(kernel) << " " << describe(n, f, c);
      const auto ref = reference_partials(p);
      for (std::size_t i = 0; i < ref.size(); ++i)
        ASSERT_NEAR(portable[i], ref[i], 1e-13 * (static_cast<double>(n) + 1) * (i == 0 ? 10.0 : 1.0))
            << describe(n, f, c) << " index " << i;
    }
}

TEST(LogregKernel64, LargeSharedOffsetStaysAtTheReferenceWhereFloat32DoesNot) {
  // Features 1000 + [-1, 1]: the logits are sums of terms ~1000 |w| that cancel; float32
  // loses them to its 7 digits, float64 keeps ~1e-13 of the gradient's scale.
  Problem p = make_problem(700, 24, 5, 7u, 0.02, 1000.0f);
  const auto ref = reference_partials(p);
  const auto got = kernel_partials(p, LogregKernel::automatic);
  std::vector<float> W32(p.W.begin(), p.W.end());
  for (std::size_t i = 0; i < p.W.size(); ++i) p.W[i] = W32[i];  // the float32 kernel's very W, for a fair compare
  const auto ref32 = reference_partials(p);
  LogregWorkspace ws;
  std::vector<double> f32(ref.size());
  logreg_chunk_partials(p.X.data(), p.labels.data(), p.rows, p.features, p.classes, W32.data(), f32.data(), ws);
  double worst64 = 0, worst32 = 0, scale = 0;
  for (std::size_t i = 1; i < ref.size(); ++i) scale = std::max(scale, std::abs(ref[i]));
  for (std::size_t i = 1; i < ref.size(); ++i) {
    worst64 = std::max(worst64, std::abs(got[i] - ref[i]) / scale);
    worst32 = std::max(worst32, std::abs(f32[i] - ref32[i]) / scale);
  }
  EXPECT_LT(worst64, 1e-12) << "float32 " << worst32;
  EXPECT_GT(worst32, 1e-7) << "the offset no longer tests anything";
  EXPECT_NEAR(got[0], ref[0], 1e-12 * std::abs(ref[0]));
}

TEST(LogregKernel64, ExpPolynomialIsWithinTwoUlpOfLibm) {
  std::mt19937 rng(3u);
  std::uniform_real_distribution<double> t(-720.0, 0.0);
  for (int i = 0; i < 200000; ++i) {
    const double x = i < 1000 ? -i * 1e-3 : t(rng);
    const double got = logreg_detail::exp_spec(x), want = std::exp(x);
    if (x < logreg_detail::kExp64Cutoff) {
      ASSERT_EQ(got, 0.0) << x;
      continue;
    }
    ASSERT_LE(std::abs(got - want), 2 * (std::nextafter(want, 1.0) - want)) << "t = " << x;
  }
  EXPECT_EQ(logreg_detail::exp_spec(0.0), 1.0);
  EXPECT_TRUE(std::isnan(logreg_detail::exp_spec(std::nan(""))));
}

TEST(LogregKernel64, ChunkSumsAreTheSameBitsHoweverChunksAreGrouped) {
  const Problem p = make_problem(5003, 37, 10, 2025u);
  const std::int64_t chunk = 512, chunks = (p.rows + chunk - 1) / chunk;
  const std::size_t record = logreg_partials_size(p.features, p.classes);
  std::vector<double> expected_parts(chunks * record), expected(record);
  LogregWorkspace ws;
  for (std::int64_t k = 0; k < chunks; ++k)
    logreg_chunk_partials(p.X.data() + k * chunk * p.features, p.labels.data() + k * chunk,
                          std::min(chunk, p.rows - k * chunk), p.features, p.classes, p.W.data(),
                          expected_parts.data() + k * record, ws);
  logreg_sum_partials(expected_parts.data(), chunks, p.features, p.classes, expected.data());
  const auto kernels = supported_kernels();
  for (int ranks = 1; ranks <= 5; ++ranks) {
    std::vector<double> parts(chunks * record), total(record);
    for (int r = 0; r < ranks; ++r) {
      const std::int64_t first = chunks * r / ranks, last = chunks * (r + 1) / ranks;
      const std::int64_t row0 = first * chunk, row1 = std::min(p.rows, last * chunk);
      LogregWorkspace rank_ws(kernels[r % kernels.size()]);
      logreg_range_partials(p.X.data() + row0 * p.features, p.labels.data() + row0, std::max<std::int64_t>(0, row1 - row0),
                            p.features, p.classes, p.W.data(), chunk, parts.data() + first * record, rank_ws);
    }
    logreg_sum_partials(parts.data(), chunks, p.features, p.classes, total.data());
    EXPECT_TRUE(same_bits(total, expected)) << ranks << " ranks";
  }
  // The one-thread objective is these chunks (of kLogregChunkRows) summed and finalised.
  const std::int64_t std_chunks = (p.rows + kLogregChunkRows - 1) / kLogregChunkRows;
  std::vector<double> parts(std_chunks * record), total(record), grad_a(p.W.size()), grad_b(p.W.size());
  logreg_range_partials(p.X.data(), p.labels.data(), p.rows, p.features, p.classes, p.W.data(), kLogregChunkRows,
                        parts.data(), ws);
  logreg_sum_partials(parts.data(), std_chunks, p.features, p.classes, total.data());
  const double a = logreg_finalize(total.data(), p.rows, p.features, p.classes, p.W.data(), 0.01, p.features,
                                   grad_a.data());
  const double b = logreg_value_and_grad(p.X.data(), p.labels.data(), p.rows, p.features, p.classes, p.W.data(), 0.01,
                                         grad_b.data(), ws);
  EXPECT_EQ(std::memcmp(&a, &b, sizeof a), 0);
  EXPECT_TRUE(same_bits(grad_a, grad_b));
}

TEST(LogregKernel64, ValueIsLnCAtZeroWeightsAndGradientMatchesFiniteDifferences) {
  Problem p = make_problem(333, 9, 4, 11u, 0.3, 2.0f);
  std::vector<double> grad(p.W.size());
  LogregWorkspace ws;
  std::vector<double> zeros(p.W.size(), 0.0);
  EXPECT_NEAR(logreg_value_and_grad(p.X.data(), p.labels.data(), p.rows, 9, 4, zeros.data(), 0.0, grad.data(), ws),
              std::log(4.0), 1e-13);
  logreg_value_and_grad(p.X.data(), p.labels.data(), p.rows, 9, 4, p.W.data(), 0.1, grad.data(), ws);
  std::vector<double> scratch(p.W.size());
  for (std::size_t i = 0; i < p.W.size(); ++i) {
    const double w = p.W[i], h = 1e-5;
    p.W[i] = w + h;
    const double up = logreg_value_and_grad(p.X.data(), p.labels.data(), p.rows, 9, 4, p.W.data(), 0.1, scratch.data(), ws);
    p.W[i] = w - h;
    const double down = logreg_value_and_grad(p.X.data(), p.labels.data(), p.rows, 9, 4, p.W.data(), 0.1, scratch.data(), ws);
    p.W[i] = w;
    EXPECT_NEAR(grad[i], (up - down) / (2 * h), 1e-9) << "index " << i;
  }
}

}  // namespace
