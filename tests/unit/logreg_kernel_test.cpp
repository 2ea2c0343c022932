// The fast logistic-regression kernel against the double reference, finite differences,
// its own variants (bitwise), and the chunking contract that makes data-parallel sums
// independent of the rank count.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "spmd/models/logreg.hpp"
#include "spmd/models/logreg_kernel_spec.hpp"
#include "spmd/runtime/error.hpp"
#include "logreg_reference.hpp"

// Its own namespace: the unity build compiles this file with others whose helpers share names.
namespace logreg_kernel_test {

namespace {

using namespace spmd::models;

struct Problem {
  std::int64_t rows;
  int features, classes;
  std::vector<float> X, W;
  std::vector<std::int32_t> labels;
};

Problem make_problem(std::int64_t rows, int features, int classes, unsigned seed, float weight_scale = 0.5f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::uniform_int_distribution<int> label(0, classes - 1);
  Problem p{rows, features, classes, {}, {}, {}};
  p.X.resize(static_cast<std::size_t>(rows) * features);
  for (auto& v : p.X) v = unit(rng);
  p.W.resize(static_cast<std::size_t>(features) * classes);
  for (auto& v : p.W) v = weight_scale * unit(rng);
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

// Shapes around every boundary of the kernels: F around the 16/32-lane blocks, C around the
// class groups (6, 10) and the 16-lane softmax blocks, rows around tiles (16), float
// gradient blocks (256) and empty.
struct Shape {
  std::int64_t rows;
  int features, classes;
};
std::vector<Shape> boundary_shapes() {
  const std::int64_t rows[] = {0, 1, 2, 15, 16, 17, 33, 255, 256, 257, 600};
  const int features[] = {1, 5, 15, 16, 17, 31, 32, 33, 48, 100};
  std::vector<Shape> shapes;
  int k = 0;
  for (int c = 1; c <= 17; ++c)
    for (int f : features) shapes.push_back({rows[(k++) % std::size(rows)], f, c});
  shapes.push_back({300, 784, 10});
  return shapes;
}

std::string describe(const Shape& s) {
  return "rows=" + std::to_string(s.rows) + " F=" + std::to_string(s.features) + " C=" + std::to_string(s.classes);
}

TEST(LogregKernel, MatchesDoubleReferenceOnBoundaryShapes) {
  for (const Shape& s : boundary_shapes()) {
    const Problem p = make_problem(s.rows, s.features, s.classes, 17u * s.features + s.classes);
    const auto ref = reference_partials(p);
    const auto got = kernel_partials(p, LogregKernel::automatic);
    // float logits/softmax: ~1e-6 relative per row term; sums over `rows` terms of size <= 1.
    const double tol = 2e-6 * static_cast<double>(s.rows) + 1e-9;
    for (std::size_t i = 0; i < ref.size(); ++i)
      ASSERT_NEAR(got[i], ref[i], tol * (i == 0 ? 10.0 : 1.0)) << describe(s) << " index " << i;
  }
}

TEST(LogregKernel, VariantsGiveIdenticalBits) {
  const auto kernels = supported_kernels();
  if (kernels.size() < 2) GTEST_SKIP() << "only the portable kernel runs on this CPU";
  for (const Shape& s : boundary_shapes()) {
    const Problem p = make_problem(s.rows, s.features, s.classes, 31u * s.features + s.classes);
    const auto portable = kernel_partials(p, LogregKernel::portable);
    for (auto k : kernels) EXPECT_TRUE(same_bits(kernel_partials(p, k), portable)) << to_string(k) << " " << describe(s);
  }
}

// Row weights (sample x class weights): near the weighted double reference, the same bits in
// every variant and precision, and weights of 1 give the unweighted bits (no other rounding).
std::vector<double> random_row_weights(std::int64_t rows, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> weight(0.0, 3.0);
  std::vector<double> w(static_cast<std::size_t>(rows));
  for (auto& v : w) v = weight(rng);
  if (rows > 3) w[2] = 0.0;  // a zero weight drops its row
  return w;
}

template <class T>
std::vector<double> weighted_partials(const Problem& p, const std::vector<T>& W, LogregKernel kernel,
                                      const double* row_weights) {
  LogregWorkspace ws(kernel);
  std::vector<double> out(logreg_partials_size(p.features, p.classes), -1.0);
  logreg_range_partials(p.X.data(), p.labels.data(), p.rows, p.features, p.classes, W.data(), 300, out.data(), ws,
                        row_weights);
  return out;
}

TEST(LogregKernel, RowWeightsMatchTheWeightedReferenceInEveryVariant) {
  for (const Shape& s : boundary_shapes()) {
    if (s.rows == 0 || s.rows > 300) continue;  // one chunk of the range call (none for 0 rows)
    const Problem p = make_problem(s.rows, s.features, s.classes, 7u * s.features + s.classes);
    const auto w = random_row_weights(s.rows, 3u + static_cast<unsigned>(s.features));
    std::vector<double> ref(logreg_partials_size(p.features, p.classes));
    logreg_reference_partials(p.X.data(), p.labels.data(), p.rows, p.features, p.classes, p.W.data(), ref.data(),
                              w.data());
    const auto portable = weighted_partials(p, p.W, LogregKernel::portable, w.data());
    const double tol = 6e-6 * static_cast<double>(s.rows) + 1e-9;
    for (std::size_t i = 0; i < ref.size(); ++i)
      ASSERT_NEAR(portable[i], ref[i], tol * (i == 0 ? 10.0 : 1.0)) << describe(s) << " index " << i;
    const std::vector<double> W64(p.W.begin(), p.W.end());
    const auto portable64 = weighted_partials(p, W64, LogregKernel::portable, w.data());
    for (std::size_t i = 0; i < ref.size(); ++i)
      ASSERT_NEAR(portable64[i], ref[i], 1e-12 * (1.0 + std::abs(ref[i]))) << "float64 " << describe(s) << " " << i;
    for (auto k : supported_kernels()) {
      EXPECT_TRUE(same_bits(weighted_partials(p, p.W, k, w.data()), portable)) << to_string(k) << " " << describe(s);
      EXPECT_TRUE(same_bits(weighted_partials(p, W64, k, w.data()), portable64)) << "float64 " << to_string(k);
    }
    const std::vector<double> ones(static_cast<std::size_t>(s.rows), 1.0);
    EXPECT_TRUE(same_bits(weighted_partials(p, p.W, LogregKernel::automatic, ones.data()),
                          weighted_partials(p, p.W, LogregKernel::automatic, nullptr)))
        << describe(s);
    EXPECT_TRUE(same_bits(weighted_partials(p, W64, LogregKernel::automatic, ones.data()),
                          weighted_partials(p, W64, LogregKernel::automatic, nullptr)))
        << "float64 " << describe(s);
  }
}

// The row loss's log is the spec's own (so a GPU can compute it with the same bits), not
// libm's: within 3 ulps of it over the sums a softmax gives ([1, C]) and beyond, and the
// special values a diverging run can produce propagate.
TEST(LogregKernel, LogSpecIsWithinThreeUlpsOfLibm) {
  using spmd::models::logreg_detail::log_spec;
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int i = 0; i < 200000; ++i) {
    const double s = i < 1000 ? 1.0 + i * 1e-4 : std::exp2(u(rng) * 40.0 - 10.0);
    const double want = std::log(s);
    const double ulp = std::ldexp(1.0, std::ilogb(want == 0.0 ? 1.0 : want) - 52);
    ASSERT_LE(std::abs(log_spec(s) - want), 3.0 * ulp) << "s = " << s;
  }
  EXPECT_EQ(log_spec(1.0), 0.0);
  EXPECT_EQ(log_spec(2.0), std::log(2.0));
  EXPECT_NEAR(log_spec(4.9e-324), std::log(4.9e-324), 1e-12);  // subnormal
  EXPECT_TRUE(std::isnan(log_spec(std::numeric_limits<double>::quiet_NaN())));
  EXPECT_EQ(log_spec(std::numeric_limits<double>::infinity()), std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(log_spec(0.0)));
  EXPECT_TRUE(std::isnan(log_spec(-1.0)));
}

TEST(LogregKernel, VariantsAgreeWithLargeLogits) {
  // Logits of +-100s: most exponentials hit the cut-off (exactly 0); still the same bits
  // everywhere and close to the reference.
  for (int c : {3, 10, 17}) {
    const Problem p = make_problem(70, 40, c, 5u + c, 30.0f);
    const auto ref = reference_partials(p);
    const auto portable = kernel_partials(p, LogregKernel::portable);
    for (auto k : supported_kernels()) EXPECT_TRUE(same_bits(kernel_partials(p, k), portable)) << to_string(k);
    EXPECT_NEAR(portable[0], ref[0], 1e-6 * std::abs(ref[0]));
    for (std::size_t i = 1; i < ref.size(); ++i) ASSERT_NEAR(portable[i], ref[i], 1e-4) << "C=" << c << " i=" << i;
  }
}

TEST(LogregKernel, ValueIsLnCAtZeroWeights) {
  for (int c : {1, 2, 7, 10, 16, 17}) {
    Problem p = make_problem(333, 21, c, 99u + c);
    std::fill(p.W.begin(), p.W.end(), 0.0f);
    LogregWorkspace ws;
    std::vector<double> grad(p.W.size());
    const double value = logreg_value_and_grad(p.X.data(), p.labels.data(), p.rows, p.features, p.classes,
                                               p.W.data(), 0.0, grad.data(), ws);
    EXPECT_NEAR(value, std::log(static_cast<double>(c)), 1e-13) << "C=" << c;
    // grad[f][c] = mean_i x_if (1/C - [c == y_i]), exact in the reference
    const auto ref = reference_partials(p);
    for (std::size_t i = 0; i < grad.size(); ++i) ASSERT_NEAR(grad[i], ref[1 + i] / p.rows, 1e-6);
  }
}

TEST(LogregKernel, GradientMatchesFiniteDifferences) {
  for (int c : {1, 4, 10}) {
    const Problem p = make_problem(200, 9, c, 7u + c);
    const double l2 = 0.3;
    LogregWorkspace ws;
    std::vector<double> grad(p.W.size()), scratch(p.W.size());
    logreg_value_and_grad(p.X.data(), p.labels.data(), p.rows, p.features, p.classes, p.W.data(), l2, grad.data(), ws);
    // float objective: step large enough that float rounding (~1e-7) stays small against it
    const float h = 1.0f / 64;
    for (std::size_t k = 0; k < p.W.size(); ++k) {
      std::vector<float> plus = p.W, minus = p.W;
      plus[k] += h;
      minus[k] -= h;
      const double fp = logreg_value_and_grad(p.X.data(), p.labels.data(), p.rows, p.features, p.classes,
                                              plus.data(), l2, scratch.data(), ws);
      const double fm = logreg_value_and_grad(p.X.data(), p.labels.data(), p.rows, p.features, p.classes,
                                              minus.data(), l2, scratch.data(), ws);
      const double step = static_cast<double>(plus[k]) - static_cast<double>(minus[k]);
      ASSERT_NEAR(grad[k], (fp - fm) / step, 2e-4) << "C=" << c << " k=" << k;
    }
  }
}

TEST(LogregKernel, ReferenceGradientMatchesFiniteDifferencesTightly) {
  const Problem p = make_problem(50, 6, 5, 3u);
  const double l2 = 0.1;
  auto objective = [&](const std::vector<float>& W, std::vector<double>& grad) {
    std::vector<double> total(logreg_partials_size(p.features, p.classes));
    logreg_reference_partials(p.X.data(), p.labels.data(), p.rows, p.features, p.classes, W.data(), total.data());
    grad.resize(W.size());
    return logreg_finalize(total.data(), p.rows, p.features, p.classes, W.data(), l2, p.features, grad.data());
  };
  std::vector<double> grad, scratch;
  objective(p.W, grad);
  const float h = 1.0f / 1024;  // exact in float, so W +- h is exactly representable here
  for (std::size_t k = 0; k < p.W.size(); ++k) {
    std::vector<float> plus = p.W, minus = p.W;
    plus[k] += h;
    minus[k] -= h;
    const double dh = (static_cast<double>(plus[k]) - static_cast<double>(minus[k])) / 2.0;
    EXPECT_NEAR(grad[k], (objective(plus, scratch) - objective(minus, scratch)) / (2.0 * dh), 1e-6) << k;
  }
}

TEST(LogregKernel, L2TermConvention) {
  const Problem p = make_problem(40, 8, 3, 11u);
  std::vector<double> total(logreg_partials_size(p.features, p.classes)), g0(p.W.size()), g1(p.W.size());
  logreg_reference_partials(p.X.data(), p.labels.data(), p.rows, p.features, p.classes, p.W.data(), total.data());
  const double l2 = 0.25;
  const double v0 =
      logreg_finalize(total.data(), p.rows, p.features, p.classes, p.W.data(), 0.0, p.features, g0.data());
  const double v1 =
      logreg_finalize(total.data(), p.rows, p.features, p.classes, p.W.data(), l2, p.features, g1.data());
  double squares = 0.0;
  for (float w : p.W) squares += static_cast<double>(w) * w;
  EXPECT_NEAR(v1 - v0, 0.5 * l2 * squares, 1e-14);
  for (std::size_t k = 0; k < p.W.size(); ++k) EXPECT_NEAR(g1[k] - g0[k], l2 * p.W[k], 1e-15);
  EXPECT_THROW(logreg_finalize(total.data(), p.rows, p.features, p.classes, p.W.data(), -1.0, p.features, g1.data()),
               spmd::Error);
  EXPECT_THROW(logreg_finalize(total.data(), 0, p.features, p.classes, p.W.data(), 0.0, p.features, g1.data()),
               spmd::Error);
}

TEST(LogregKernel, L2LeavesTheRowsAfterThePenalisedOnesAlone) {
  // W' = [W; b]: 7 feature rows and an intercept row, only the first 7 penalised.
  const Problem p = make_problem(40, 8, 3, 12u);
  const int penalised = p.features - 1;
  std::vector<double> total(logreg_partials_size(p.features, p.classes)), g0(p.W.size()), g1(p.W.size());
  logreg_reference_partials(p.X.data(), p.labels.data(), p.rows, p.features, p.classes, p.W.data(), total.data());
  const double l2 = 0.25;
  const double v0 =
      logreg_finalize(total.data(), p.rows, p.features, p.classes, p.W.data(), 0.0, penalised, g0.data());
  const double v1 =
      logreg_finalize(total.data(), p.rows, p.features, p.classes, p.W.data(), l2, penalised, g1.data());
  double squares = 0.0;
  for (std::size_t k = 0; k < static_cast<std::size_t>(penalised * p.classes); ++k)
    squares += static_cast<double>(p.W[k]) * p.W[k];
  EXPECT_NEAR(v1 - v0, 0.5 * l2 * squares, 1e-14);
  for (int f = 0; f < p.features; ++f)
    for (int c = 0; c < p.classes; ++c) {
      const std::size_t k = static_cast<std::size_t>(f) * p.classes + c;
      if (f < penalised) EXPECT_NEAR(g1[k] - g0[k], l2 * p.W[k], 1e-15) << f << "," << c;
      else EXPECT_EQ(g1[k], g0[k]) << "the intercept row is penalised at class " << c;
    }
  // No penalised rows: the same bits as l2 = 0.
  std::vector<double> g_none(p.W.size());
  const double v_none =
      logreg_finalize(total.data(), p.rows, p.features, p.classes, p.W.data(), l2, 0, g_none.data());
  EXPECT_EQ(std::memcmp(&v_none, &v0, sizeof v0), 0);
  EXPECT_TRUE(same_bits(g_none, g0));
  for (int bad : {-1, p.features + 1})
    EXPECT_THROW(logreg_finalize(total.data(), p.rows, p.features, p.classes, p.W.data(), l2, bad, g1.data()),
                 spmd::Error)
        << bad;
}

TEST(LogregKernel, InterceptAsAColumnOfOnesMatchesADoubleReference) {
  // logits x W + b computed by the kernels as [x, 1] [W; b], against sklearn's multinomial
  // objective with fit_intercept=True written out in double: mean cross-entropy +
  // l2/2 ||W||^2 with b unpenalised; grad_W = X^T (P - Y) / n + l2 W, grad_b = sum(P - Y) / n.
  // Rows over two chunks and a float gradient block boundary.
  const std::int64_t n = kLogregChunkRows + 301;
  const int F = 13, C = 5;
  const double l2 = 0.05;
  const Problem p = make_problem(n, F, C, 404u);
  std::mt19937 rng(405u);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<float> b(C);
  for (auto& v : b) v = 2.0f * unit(rng);  // an intercept as large as the logits x W
  const int Fa = F + 1;
  std::vector<float> Xa(static_cast<std::size_t>(n) * Fa), Wa(static_cast<std::size_t>(Fa) * C);
  for (std::int64_t i = 0; i < n; ++i) {
    std::copy_n(p.X.begin() + i * F, F, Xa.begin() + i * Fa);
    Xa[static_cast<std::size_t>(i * Fa + F)] = 1.0f;
  }
  std::copy(p.W.begin(), p.W.end(), Wa.begin());
  std::copy(b.begin(), b.end(), Wa.begin() + static_cast<std::ptrdiff_t>(F) * C);

  const std::int64_t chunks = (n + kLogregChunkRows - 1) / kLogregChunkRows;
  const std::size_t record = logreg_partials_size(Fa, C);
  std::vector<double> parts(chunks * record), total(record), grad(Wa.size());
  LogregWorkspace ws;
  logreg_range_partials(Xa.data(), p.labels.data(), n, Fa, C, Wa.data(), kLogregChunkRows, parts.data(), ws);
  logreg_sum_partials(parts.data(), chunks, Fa, C, total.data());
  const double value = logreg_finalize(total.data(), n, Fa, C, Wa.data(), l2, F, grad.data());

  double ref_value = 0.0;
  std::vector<double> ref_grad(Wa.size(), 0.0), z(C);
  for (std::int64_t i = 0; i < n; ++i) {
    const float* x = p.X.data() + i * F;
    double top = -1e300;
    for (int c = 0; c < C; ++c) {
      z[c] = b[c];
      for (int f = 0; f < F; ++f) z[c] += static_cast<double>(x[f]) * p.W[static_cast<std::size_t>(f) * C + c];
      top = std::max(top, z[c]);
    }
    double sum = 0.0;
    for (int c = 0; c < C; ++c) sum += std::exp(z[c] - top);
    const int y = p.labels[static_cast<std::size_t>(i)];
    ref_value += top + std::log(sum) - z[y];
    for (int c = 0; c < C; ++c) {
      const double residual = std::exp(z[c] - top) / sum - (c == y ? 1.0 : 0.0);
      for (int f = 0; f < F; ++f) ref_grad[static_cast<std::size_t>(f) * C + c] += x[f] * residual / n;
      ref_grad[static_cast<std::size_t>(F) * C + c] += residual / n;
    }
  }
  ref_value /= static_cast<double>(n);
  for (std::size_t k = 0; k < p.W.size(); ++k) {
    ref_value += 0.5 * l2 * static_cast<double>(p.W[k]) * p.W[k];
    ref_grad[k] += l2 * p.W[k];
  }
  // float32 logits and softmax: ~1e-6 relative per row (see MatchesDoubleReferenceOnBoundaryShapes).
  EXPECT_NEAR(value, ref_value, 2e-6 * std::abs(ref_value));
  for (std::size_t k = 0; k < grad.size(); ++k) ASSERT_NEAR(grad[k], ref_grad[k], 2e-6) << "index " << k;

  // The double reference kernel fed the augmented rows agrees to rounding: the intercept is
  // the last row of W', and the column of ones is all it takes.
  std::vector<double> ref_total(record), ref_aug_grad(Wa.size());
  logreg_reference_partials(Xa.data(), p.labels.data(), n, Fa, C, Wa.data(), ref_total.data());
  const double ref_aug = logreg_finalize(ref_total.data(), n, Fa, C, Wa.data(), l2, F, ref_aug_grad.data());
  EXPECT_NEAR(ref_aug, ref_value, 1e-12 * std::abs(ref_value));
  for (std::size_t k = 0; k < grad.size(); ++k) ASSERT_NEAR(ref_aug_grad[k], ref_grad[k], 1e-12) << "index " << k;
}

TEST(LogregKernel, ChunkSumsAreTheSameBitsHoweverChunksAreGrouped) {
  // 5003 rows in chunks of 512 (the last one 395 rows), spread over 1..5 "ranks" as
  // contiguous chunk ranges, each rank with its own workspace and kernel variant.
  const Problem p = make_problem(5003, 37, 10, 2024u);
  const std::int64_t chunk = 512;
  const std::int64_t chunks = (p.rows + chunk - 1) / chunk;
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
    std::vector<double> parts(chunks * record);
    for (int r = 0; r < ranks; ++r) {
      const std::int64_t first = chunks * r / ranks, last = chunks * (r + 1) / ranks;  // may be empty
      const std::int64_t row0 = first * chunk, row1 = std::min(p.rows, last * chunk);
      LogregWorkspace rank_ws(kernels[r % kernels.size()]);
      logreg_range_partials(p.X.data() + row0 * p.features, p.labels.data() + row0, std::max<std::int64_t>(0, row1 - row0),
                            p.features, p.classes, p.W.data(), chunk, parts.data() + first * record, rank_ws);
    }
    std::vector<double> total(record);
    logreg_sum_partials(parts.data(), chunks, p.features, p.classes, total.data());
    EXPECT_TRUE(same_bits(total, expected)) << ranks << " ranks";
  }
}

TEST(LogregKernel, ValueAndGradUsesTheStandardChunking) {
  const Problem p = make_problem(2 * kLogregChunkRows + 77, 12, 4, 8u);
  const std::int64_t chunks = (p.rows + kLogregChunkRows - 1) / kLogregChunkRows;
  const std::size_t record = logreg_partials_size(p.features, p.classes);
  LogregWorkspace ws;
  std::vector<double> parts(chunks * record), total(record), grad_a(p.W.size()), grad_b(p.W.size());
  logreg_range_partials(p.X.data(), p.labels.data(), p.rows, p.features, p.classes, p.W.data(), kLogregChunkRows,
                        parts.data(), ws);
  logreg_sum_partials(parts.data(), chunks, p.features, p.classes, total.data());
  const double a =
      logreg_finalize(total.data(), p.rows, p.features, p.classes, p.W.data(), 0.01, p.features, grad_a.data());
  const double b = logreg_value_and_grad(p.X.data(), p.labels.data(), p.rows, p.features, p.classes, p.W.data(), 0.01,
                                         grad_b.data(), ws);
  EXPECT_EQ(std::memcmp(&a, &b, sizeof a), 0);
  EXPECT_TRUE(same_bits(grad_a, grad_b));
}

TEST(LogregKernel, EmptyChunkGivesZeros) {
  const Problem p = make_problem(0, 19, 6, 1u);
  for (auto k : supported_kernels()) {
    const auto out = kernel_partials(p, k);
    for (double v : out) EXPECT_EQ(v, 0.0);
  }
}

TEST(LogregKernel, NonFiniteWeightsGiveNonFiniteLoss) {
  for (int c : {1, 10, 17}) {
    Problem p = make_problem(40, 20, c, 4u);
    p.W[3 * c] = std::numeric_limits<float>::quiet_NaN();
    for (auto k : supported_kernels()) EXPECT_FALSE(std::isfinite(kernel_partials(p, k)[0])) << to_string(k);
    p.W[3 * c] = std::numeric_limits<float>::infinity();
    for (auto k : supported_kernels()) EXPECT_FALSE(std::isfinite(kernel_partials(p, k)[0])) << to_string(k);
  }
}

TEST(LogregKernel, RejectsBadInput) {
  Problem p = make_problem(20, 4, 3, 5u);
  p.labels[7] = 3;
  LogregWorkspace ws;
  std::vector<double> out(logreg_partials_size(4, 3));
  try {
    logreg_chunk_partials(p.X.data(), p.labels.data(), p.rows, 4, 3, p.W.data(), out.data(), ws);
    FAIL() << "label 3 of 3 classes accepted";
  } catch (const spmd::Error& e) {
    EXPECT_NE(std::string(e.what()).find("label 3 of row 7"), std::string::npos) << e.what();
  }
  EXPECT_THROW(logreg_chunk_partials(p.X.data(), p.labels.data(), p.rows, 0, 3, p.W.data(), out.data(), ws), spmd::Error);
  EXPECT_THROW(logreg_chunk_partials(p.X.data(), p.labels.data(), p.rows, 4, 0, p.W.data(), out.data(), ws), spmd::Error);
  EXPECT_THROW(logreg_chunk_partials(p.X.data(), p.labels.data(), -1, 4, 3, p.W.data(), out.data(), ws), spmd::Error);
}

TEST(LogregKernel, PredictIsArgmaxOfLogits) {
  for (int c : {1, 2, 10, 17}) {
    const Problem p = make_problem(301, 33, c, 12u + c);
    std::vector<std::int32_t> predicted(p.rows);
    for (auto k : supported_kernels()) {
      LogregWorkspace ws(k);
      logreg_predict(p.X.data(), p.rows, p.features, p.classes, p.W.data(), predicted.data(), ws);
      for (std::int64_t i = 0; i < p.rows; ++i) {
        std::vector<double> z(c);
        for (int j = 0; j < c; ++j)
          for (int f = 0; f < p.features; ++f) z[j] += double(p.X[i * p.features + f]) * p.W[f * c + j];
        const int chosen = predicted[i];
        ASSERT_TRUE(chosen >= 0 && chosen < c);
        for (int j = 0; j < c; ++j) ASSERT_LE(z[j], z[chosen] + 1e-5) << "row " << i << " " << to_string(k);
      }
    }
  }
  // Ties (W = 0): the lowest class.
  Problem p = make_problem(5, 3, 4, 1u);
  std::fill(p.W.begin(), p.W.end(), 0.0f);
  std::vector<std::int32_t> predicted(p.rows, -1);
  LogregWorkspace ws;
  logreg_predict(p.X.data(), p.rows, p.features, p.classes, p.W.data(), predicted.data(), ws);
  for (auto v : predicted) EXPECT_EQ(v, 0);
}

TEST(LogregKernel, FixedPredictorMatchesPredictAndKeepsItsWeights) {
  for (int c : {1, 2, 10, 17}) {
    Problem p = make_problem(301, 33, c, 40u + c);
    for (auto k : supported_kernels()) {
      std::vector<std::int32_t> expected(p.rows), got(p.rows, -1);
      LogregWorkspace ws(k);
      logreg_predict(p.X.data(), p.rows, p.features, p.classes, p.W.data(), expected.data(), ws);
      std::vector<float> W = p.W;
      LogregFixedPredictor fixed(W.data(), nullptr, p.features, p.classes, k);
      EXPECT_EQ(fixed.kernel(), k);
      std::fill(W.begin(), W.end(), 0.0f);  // the predictor owns its copy
      // Batches of every size, cut at odd places, reuse the one prepared W.
      for (std::int64_t first = 0, n = 1; first < p.rows; first += n, n = n * 2 + 1) {
        const std::int64_t rows = std::min(n, p.rows - first);
        fixed.predict(p.X.data() + first * p.features, rows, got.data() + first);
      }
      fixed.predict(p.X.data(), 0, got.data());  // an empty batch writes nothing
      EXPECT_EQ(got, expected) << "classes " << c << " " << to_string(k);
    }
  }
}

// With an intercept and probabilities: the class is the argmax of x W + b and the
// probabilities its softmax, against a double-precision reference (classes compared only
// where the top two logits are not within float rounding of each other); every kernel
// variant gives the same bits, and a row's outputs do not depend on the batch around it.
TEST(LogregKernel, FixedPredictorWithInterceptGivesSoftmaxOfBiasedLogits) {
  for (int c : {2, 10, 300}) {
    Problem p = make_problem(257, 19, c, 90u + c);
    std::vector<float> bias(static_cast<std::size_t>(c));
    for (int k = 0; k < c; ++k) bias[static_cast<std::size_t>(k)] = 0.37f * static_cast<float>(k % 7) - 1.0f;
    std::vector<std::int32_t> first_classes;
    std::vector<float> first_probs;
    for (auto kernel : supported_kernels()) {
      LogregFixedPredictor fixed(p.W.data(), bias.data(), p.features, c, kernel);
      std::vector<std::int32_t> classes(static_cast<std::size_t>(p.rows), -1);
      std::vector<float> probs(static_cast<std::size_t>(p.rows * c), -1.0f);
      for (std::int64_t first = 0, n = 1; first < p.rows; first += n, n = n * 3 + 2) {
        const std::int64_t rows = std::min(n, p.rows - first);
        fixed.predict(p.X.data() + first * p.features, rows, classes.data() + first, probs.data() + first * c);
      }
      for (std::int64_t r = 0; r < p.rows; ++r) {
        std::vector<double> z(static_cast<std::size_t>(c));
        for (int k = 0; k < c; ++k) {
          double v = bias[static_cast<std::size_t>(k)];
          for (int f = 0; f < p.features; ++f)
            v += static_cast<double>(p.X[static_cast<std::size_t>(r * p.features + f)]) *
                 p.W[static_cast<std::size_t>(f * c + k)];
          z[static_cast<std::size_t>(k)] = v;
        }
        const double m = *std::max_element(z.begin(), z.end());
        double sum = 0.0;
        for (double v : z) sum += std::exp(v - m);
        std::vector<double> sorted = z;
        std::sort(sorted.rbegin(), sorted.rend());
        const auto best = std::max_element(z.begin(), z.end()) - z.begin();
        if (sorted[0] - sorted[1] > 1e-4) EXPECT_EQ(classes[static_cast<std::size_t>(r)], best) << "row " << r;
        double total = 0.0;
        for (int k = 0; k < c; ++k) {
          const float got = probs[static_cast<std::size_t>(r * c + k)];
          EXPECT_NEAR(got, std::exp(z[static_cast<std::size_t>(k)] - m) / sum, 2e-6) << "row " << r << " class " << k;
          total += got;
        }
        EXPECT_NEAR(total, 1.0, 1e-5);
      }
      if (first_classes.empty()) {
        first_classes = classes;
        first_probs = probs;
      } else {
        EXPECT_EQ(classes, first_classes) << to_string(kernel);
        EXPECT_EQ(0, std::memcmp(probs.data(), first_probs.data(), probs.size() * sizeof(float))) << to_string(kernel);
      }
    }
  }
}

TEST(LogregKernel, FixedPredictorRefusesBadShapes) {
  const std::vector<float> W(6, 0.0f);
  EXPECT_THROW(LogregFixedPredictor(W.data(), nullptr, 0, 3), spmd::Error);
  EXPECT_THROW(LogregFixedPredictor(W.data(), nullptr, 3, 0), spmd::Error);
}

TEST(LogregKernel, WorkspaceRejectsUnsupportedKernelAndResolvesAutomatic) {
  LogregWorkspace ws;
  EXPECT_EQ(ws.kernel(), logreg_best_kernel());
  EXPECT_NE(ws.kernel(), LogregKernel::automatic);
  for (auto k : {LogregKernel::avx2, LogregKernel::avx512}) {
    if (!logreg_kernel_supported(k)) EXPECT_THROW(LogregWorkspace{k}, spmd::Error);
  }
}

}  // namespace

}  // namespace logreg_kernel_test
