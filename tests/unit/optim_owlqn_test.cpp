// OWL-QN against solutions known without it: the soft threshold of a separable quadratic,
// and coordinate descent (its own optimality conditions, in long double) on a coupled one;
// the support is exact, unpenalised entries are not shrunk, bad arguments are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <span>
#include <vector>

#include "spmd/optim/owlqn.hpp"
#include "spmd/runtime/error.hpp"

namespace {

using namespace spmd::optim;

// 0.5 x^T A x - b^T x with A = M^T M + 0.1 I (coupled, well conditioned enough).
struct CoupledQuadratic {
  int n;
  std::vector<double> A, b;
  explicit CoupledQuadratic(int size, unsigned seed) : n(size), A(static_cast<size_t>(size * size)), b(static_cast<size_t>(size)) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> normal;
    std::vector<double> M(static_cast<size_t>(size * size));
    for (auto& v : M) v = normal(rng) / std::sqrt(size);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) {
        double s = i == j ? 0.1 : 0.0;
        for (int k = 0; k < n; ++k) s += M[static_cast<size_t>(k * n + i)] * M[static_cast<size_t>(k * n + j)];
        A[static_cast<size_t>(i * n + j)] = s;
      }
    for (auto& v : b) v = normal(rng);
  }
  double value_and_grad(std::span<const double> x, std::span<double> g) {
    double f = 0;
    for (int i = 0; i < n; ++i) {
      double ax = 0;
      for (int j = 0; j < n; ++j) ax += A[static_cast<size_t>(i * n + j)] * x[static_cast<size_t>(j)];
      g[static_cast<size_t>(i)] = ax - b[static_cast<size_t>(i)];
      f += x[static_cast<size_t>(i)] * (0.5 * ax - b[static_cast<size_t>(i)]);
    }
    return f;
  }
  // Coordinate descent to the exact minimiser of 0.5 x'Ax - b'x + l1 |x[:penalised]|_1.
  std::vector<double> coordinate_descent(double l1, int penalised) const {
    std::vector<long double> x(static_cast<size_t>(n), 0.0L);
    for (int sweep = 0; sweep < 20000; ++sweep)
      for (int i = 0; i < n; ++i) {
        long double r = b[static_cast<size_t>(i)];
        for (int j = 0; j < n; ++j)
          if (j != i) r -= A[static_cast<size_t>(i * n + j)] * x[static_cast<size_t>(j)];
        const long double a = A[static_cast<size_t>(i * n + i)];
        const long double t = i < penalised ? l1 : 0.0L;
        x[static_cast<size_t>(i)] = r > t ? (r - t) / a : r < -t ? (r + t) / a : 0.0L;
      }
    return {x.begin(), x.end()};
  }
};

// 0.5 sum (x_i - t_i)^2.
struct Separable {
  std::vector<double> t;
  double value_and_grad(std::span<const double> x, std::span<double> g) const {
    double v = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      g[i] = x[i] - t[i];
      v += 0.5 * g[i] * g[i];
    }
    return v;
  }
};

TEST(Owlqn, SeparableQuadraticIsTheSoftThreshold) {
  // f = 0.5 sum (x_i - t_i)^2: the minimiser of f + l1 |x| is sign(t) max(|t| - l1, 0).
  const std::vector<double> t = {3.0, -2.0, 0.4, -0.7, 1.5, 0.0, -0.99, 1.01};
  const double l1 = 1.0;
  Separable objective{t};
  LBFGSParams<double> p;
  p.tol = 1e-12;
  p.maxiter = 200;
  const std::vector<double> x0(t.size(), 0.0);
  const auto r = owlqn_minimize<double>(objective, std::span<const double>(x0), p, l1, t.size());
  ASSERT_EQ(r.status, LBFGSStatus::converged) << to_string(r.status);
  for (size_t i = 0; i < t.size(); ++i) {
    const double want = std::copysign(std::max(std::abs(t[i]) - l1, 0.0), t[i]);
    if (want == 0)
      EXPECT_EQ(r.x[i], 0.0) << "entry " << i << " must be exactly zero";
    else
      EXPECT_NEAR(r.x[i], want, 1e-10) << i;
  }
  double value = 0;
  for (size_t i = 0; i < t.size(); ++i) value += 0.5 * (r.x[i] - t[i]) * (r.x[i] - t[i]) + l1 * std::abs(r.x[i]);
  EXPECT_NEAR(r.value, value, 1e-12) << "the value reported includes the L1 term";
}

TEST(Owlqn, CoupledQuadraticMatchesCoordinateDescentWithTheSameSupport) {
  for (unsigned seed : {1u, 2u, 3u}) {
    CoupledQuadratic q(24, seed);
    for (double l1 : {0.05, 0.3, 1.0}) {
      const int penalised = 20;  // the last 4 are free, like an intercept
      const auto want = q.coordinate_descent(l1, penalised);
      LBFGSParams<double> p;
      p.tol = 1e-9;
      p.maxiter = 2000;
      const std::vector<double> x0(24, 0.0);
      const auto r = owlqn_minimize<double>(q, std::span<const double>(x0), p, l1, penalised);
      ASSERT_TRUE(r.status == LBFGSStatus::converged || r.status == LBFGSStatus::precision_limit)
          << to_string(r.status) << " seed " << seed << " l1 " << l1;
      int zeros = 0;
      for (int i = 0; i < 24; ++i) {
        EXPECT_EQ(r.x[static_cast<size_t>(i)] == 0.0, want[static_cast<size_t>(i)] == 0.0)
            << "support differs at " << i << " (seed " << seed << ", l1 " << l1 << "): " << r.x[static_cast<size_t>(i)]
            << " vs " << want[static_cast<size_t>(i)];
        // Near the minimum F is flat: double's value resolves x to ~1e-7 here, not better.
        EXPECT_NEAR(r.x[static_cast<size_t>(i)], want[static_cast<size_t>(i)], 2e-6) << i;
        zeros += want[static_cast<size_t>(i)] == 0.0;
      }
      std::vector<double> g(24);
      double best = q.value_and_grad(want, g);
      for (int i = 0; i < penalised; ++i) best += l1 * std::abs(want[static_cast<size_t>(i)]);
      EXPECT_NEAR(r.value, best, 1e-12 * std::abs(best)) << "seed " << seed << " l1 " << l1;
      if (l1 >= 1.0) EXPECT_GT(zeros, 0) << "a strong L1 term zeroes some entries (else this checks no sparsity)";
    }
  }
}

TEST(Owlqn, UnpenalisedEntriesAreNotShrunk) {
  // Entry 3 (unpenalised) would be zeroed by l1 = 1 if it were penalised: it stays at t.
  Separable objective{{2.0, 0.5, -3.0, 0.5}};
  LBFGSParams<double> p;
  p.tol = 1e-12;
  const std::vector<double> x0(4, 0.0);
  const auto r = owlqn_minimize<double>(objective, std::span<const double>(x0), p, 1.0, 3);
  ASSERT_EQ(r.status, LBFGSStatus::converged);
  EXPECT_NEAR(r.x[0], 1.0, 1e-10);
  EXPECT_EQ(r.x[1], 0.0);
  EXPECT_NEAR(r.x[2], -2.0, 1e-10);
  EXPECT_NEAR(r.x[3], 0.5, 1e-10);
}

TEST(Owlqn, AStrongPenaltyConvergesAtTheStartWithZeros) {
  CoupledQuadratic q(10, 7);
  double largest = 0;
  for (double v : q.b) largest = std::max(largest, std::abs(v));
  LBFGSParams<double> p;
  const std::vector<double> x0(10, 0.0);
  const auto r = owlqn_minimize<double>(q, std::span<const double>(x0), p, largest * 1.01, 10);
  EXPECT_EQ(r.status, LBFGSStatus::converged);
  EXPECT_EQ(r.iterations, 0);
  EXPECT_EQ(r.error, 0.0);
}

TEST(Owlqn, FloatScalarReachesItsPrecision) {
  CoupledQuadratic q(16, 11);
  const auto want = q.coordinate_descent(0.2, 16);
  auto f = [&](std::span<const float> x, std::span<float> g) {
    std::vector<double> xd(x.begin(), x.end()), gd(x.size());
    const double v = q.value_and_grad(xd, gd);
    for (size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>(gd[i]);
    return static_cast<float>(v);
  };
  auto objective = make_objective<float>(f);
  LBFGSParams<float> p;
  p.tol = 1e-5f;
  p.maxiter = 500;
  p.objective_precision = 1.2e-7;
  const std::vector<float> x0(16, 0.0f);
  const auto r = owlqn_minimize<float>(objective, std::span<const float>(x0), p, 0.2, 16);
  ASSERT_TRUE(r.status == LBFGSStatus::converged || r.status == LBFGSStatus::precision_limit) << to_string(r.status);
  for (size_t i = 0; i < 16; ++i) EXPECT_NEAR(r.x[i], want[i], 2e-3) << i;
}

TEST(Owlqn, RefusesBadArguments) {
  CoupledQuadratic q(4, 1);
  LBFGSParams<double> p;
  const std::vector<double> x0(4, 0.0);
  EXPECT_THROW(owlqn_minimize<double>(q, std::span<const double>(x0), p, -1.0, 4), spmd::Error);
  EXPECT_THROW(owlqn_minimize<double>(q, std::span<const double>(x0), p, std::nan(""), 4), spmd::Error);
  EXPECT_THROW(owlqn_minimize<double>(q, std::span<const double>(x0), p, 1.0, 5), spmd::Error);
}

}  // namespace
