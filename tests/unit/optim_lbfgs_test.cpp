// L-BFGS and its line searches: outcomes as status values on known functions, in float and
// double, with both line-search policies; parameter validation messages.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "spmd/optim/lbfgs.hpp"
#include "spmd/runtime/error.hpp"

namespace {

using namespace spmd::optim;

// Extended Rosenbrock: sum_i 100 (x_{i+1} - x_i^2)^2 + (1 - x_i)^2, minimum 0 at (1, ..., 1).
template <class Scalar>
struct Rosenbrock {
  int evaluations = 0;
  Scalar value_and_grad(std::span<const Scalar> x, std::span<Scalar> g) {
    ++evaluations;
    Scalar f = 0;
    for (auto& v : g) v = 0;
    for (std::size_t i = 0; i + 1 < x.size(); ++i) {
      const Scalar a = x[i + 1] - x[i] * x[i], b = 1 - x[i];
      f += 100 * a * a + b * b;
      g[i] += -400 * a * x[i] - 2 * b;
      g[i + 1] += 200 * a;
    }
    return f;
  }
};

// 0.5 sum_i a_i (x_i - t_i)^2 with a_i in [0.5, 2].
template <class Scalar>
struct Quadratic {
  std::vector<Scalar> a, target;
  explicit Quadratic(std::size_t n, unsigned seed) : a(n), target(n) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> scale(0.5, 2.0), where(-3.0, 3.0);
    for (std::size_t i = 0; i < n; ++i) {
      a[i] = static_cast<Scalar>(scale(rng));
      target[i] = static_cast<Scalar>(where(rng));
    }
  }
  Scalar value_and_grad(std::span<const Scalar> x, std::span<Scalar> g) {
    Scalar f = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const Scalar d = x[i] - target[i];
      f += a[i] * d * d / 2;
      g[i] = a[i] * d;
    }
    return f;
  }
};

template <class Scalar>
std::vector<Scalar> rosenbrock_start(std::size_t n) {
  std::vector<Scalar> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = i % 2 == 0 ? Scalar(-1.2) : Scalar(1);
  return x;
}

template <class Scalar>
class LBFGSTyped : public ::testing::Test {};
using ScalarTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(LBFGSTyped, ScalarTypes);

template <class Scalar>
Scalar loose_tol() {
  return std::is_same_v<Scalar, float> ? Scalar(2e-3) : Scalar(1e-7);
}

TYPED_TEST(LBFGSTyped, RosenbrockConvergesWithEveryLineSearch) {
  using Scalar = TypeParam;
  for (auto kind : {LineSearchKind::zoom, LineSearchKind::backtracking})
    for (std::size_t n : {2u, 5u, 20u}) {
      Rosenbrock<Scalar> f;
      LBFGSParams<Scalar> params;
      params.linesearch = kind;
      params.maxiter = 2000;
      params.tol = loose_tol<Scalar>();
      std::vector<int> seen;
      const auto x0 = rosenbrock_start<Scalar>(n);
      const auto r = lbfgs_minimize<Scalar>(f, std::span<const Scalar>(x0), params,
                                            [&](const LBFGSIteration& it) { seen.push_back(it.iteration); });
      ASSERT_EQ(r.status, LBFGSStatus::converged) << to_string(kind) << " n=" << n << " " << to_string(r.status)
                                                  << " after " << r.iterations << " error " << r.error;
      EXPECT_LE(r.error, params.tol);
      EXPECT_EQ(r.evaluations, f.evaluations);
      EXPECT_EQ(static_cast<int>(seen.size()), r.iterations);
      for (std::size_t i = 0; i < n; ++i) EXPECT_NEAR(r.x[i], 1.0, (std::is_same_v<Scalar, float> ? 2e-2 : 1e-6));
    }
}

TYPED_TEST(LBFGSTyped, QuadraticConvergesToItsMinimum) {
  using Scalar = TypeParam;
  for (std::size_t n : {1u, 2u, 7u, 50u}) {
    Quadratic<Scalar> f(n, 3u + n);
    LBFGSParams<Scalar> params;
    params.tol = loose_tol<Scalar>();
    const std::vector<Scalar> x0(n, Scalar(0));
    const auto r = lbfgs_minimize<Scalar>(f, std::span<const Scalar>(x0), params);
    ASSERT_EQ(r.status, LBFGSStatus::converged) << n;
    for (std::size_t i = 0; i < n; ++i) EXPECT_NEAR(r.x[i], f.target[i], 10 * params.tol);
  }
}

TYPED_TEST(LBFGSTyped, CallbackSeesEveryIterationAndDecreasingValues) {
  using Scalar = TypeParam;
  Rosenbrock<Scalar> f;
  LBFGSParams<Scalar> params;
  params.maxiter = 30;
  params.tol = 0;
  std::vector<LBFGSIteration> its;
  const auto x0 = rosenbrock_start<Scalar>(4);
  const auto r = lbfgs_minimize<Scalar>(f, std::span<const Scalar>(x0), params,
                                        [&](const LBFGSIteration& it) { its.push_back(it); });
  ASSERT_FALSE(its.empty());
  double previous_value = std::numeric_limits<double>::infinity();
  std::int64_t previous_evaluations = 1;
  for (std::size_t k = 0; k < its.size(); ++k) {
    EXPECT_EQ(its[k].iteration, static_cast<int>(k) + 1);
    EXPECT_LT(its[k].value, previous_value);  // sufficient decrease holds at every accepted step
    EXPECT_GT(its[k].evaluations, previous_evaluations);
    EXPECT_GT(its[k].stepsize, 0.0);
    previous_value = its[k].value;
    previous_evaluations = its[k].evaluations;
  }
  EXPECT_EQ(its.back().evaluations, r.evaluations);
  EXPECT_DOUBLE_EQ(its.back().value, static_cast<double>(r.value));
}

TYPED_TEST(LBFGSTyped, StopsAtMaxIterations) {
  using Scalar = TypeParam;
  for (auto kind : {LineSearchKind::zoom, LineSearchKind::backtracking}) {
    Rosenbrock<Scalar> f;
    LBFGSParams<Scalar> params;
    params.linesearch = kind;
    params.maxiter = 3;
    const auto x0 = rosenbrock_start<Scalar>(2);
    const auto r = lbfgs_minimize<Scalar>(f, std::span<const Scalar>(x0), params);
    EXPECT_EQ(r.status, LBFGSStatus::max_iterations) << to_string(kind);
    EXPECT_EQ(r.iterations, 3);
    EXPECT_TRUE(std::isfinite(r.value));
  }
}

// The stop predicate (a signal agreed across ranks in logreg) ends the solve between
// iterations at the last accepted iterate, the same one a run with maxiter = that many
// iterations reaches; asked before the first step too.
TYPED_TEST(LBFGSTyped, StopsWhenThePredicateHolds) {
  using Scalar = TypeParam;
  for (auto kind : {LineSearchKind::zoom, LineSearchKind::backtracking}) {
    Rosenbrock<Scalar> f;
    LBFGSParams<Scalar> params;
    params.linesearch = kind;
    const auto x0 = rosenbrock_start<Scalar>(2);
    int asked = 0;
    const auto stopped = lbfgs_minimize<Scalar>(f, std::span<const Scalar>(x0), params, {}, [&] { return ++asked > 3; });
    EXPECT_EQ(stopped.status, LBFGSStatus::stopped) << to_string(kind);
    EXPECT_EQ(stopped.iterations, 3);
    EXPECT_EQ(asked, 4);
    params.maxiter = 3;
    const auto capped = lbfgs_minimize<Scalar>(f, std::span<const Scalar>(x0), params);
    EXPECT_EQ(stopped.x, capped.x) << to_string(kind);
    const auto at_start = lbfgs_minimize<Scalar>(f, std::span<const Scalar>(x0), params, {}, [] { return true; });
    EXPECT_EQ(at_start.status, LBFGSStatus::stopped);
    EXPECT_EQ(at_start.iterations, 0);
    EXPECT_EQ(at_start.x, x0);
  }
  EXPECT_STREQ(to_string(LBFGSStatus::stopped), "stopped");
}

TYPED_TEST(LBFGSTyped, ConvergedAtTheStartTakesNoStep) {
  using Scalar = TypeParam;
  Quadratic<Scalar> f(3, 1u);
  const LBFGSParams<Scalar> params;
  const auto r = lbfgs_minimize<Scalar>(f, std::span<const Scalar>(f.target), params);
  EXPECT_EQ(r.status, LBFGSStatus::converged);
  EXPECT_EQ(r.iterations, 0);
  EXPECT_EQ(r.evaluations, 1);
}

// Reports the negated gradient: every search direction climbs, no step decreases f.
template <class Scalar>
struct WrongGradient {
  Quadratic<Scalar> inner{4, 9u};
  Scalar value_and_grad(std::span<const Scalar> x, std::span<Scalar> g) {
    const Scalar f = inner.value_and_grad(x, g);
    for (auto& v : g) v = -v;
    return f;
  }
};

TYPED_TEST(LBFGSTyped, LineSearchFailsWhenNoStepDecreases) {
  using Scalar = TypeParam;
  for (auto kind : {LineSearchKind::zoom, LineSearchKind::backtracking}) {
    WrongGradient<Scalar> f;
    LBFGSParams<Scalar> params;
    params.linesearch = kind;
    params.max_linesearch = 12;
    const std::vector<Scalar> x0(4, Scalar(0));
    const auto r = lbfgs_minimize<Scalar>(f, std::span<const Scalar>(x0), params);
    EXPECT_EQ(r.status, LBFGSStatus::linesearch_failed) << to_string(kind);
    EXPECT_EQ(r.iterations, 0);
    EXPECT_LE(r.evaluations, 1 + params.max_linesearch);
    EXPECT_EQ(r.x, x0);
  }
}

// A quadratic on top of a large constant: near the minimum, the decrease a step could make is
// below the value's resolution in Scalar long before the gradient reaches an unreachable tol.
template <class Scalar>
struct OffsetQuadratic {
  Quadratic<Scalar> inner{6, 5u};
  Scalar offset = Scalar(1000);
  Scalar value_and_grad(std::span<const Scalar> x, std::span<Scalar> g) { return offset + inner.value_and_grad(x, g); }
};

TYPED_TEST(LBFGSTyped, PrecisionLimitIsReportedAsSuchNotAsALineSearchFailure) {
  using Scalar = TypeParam;
  for (auto kind : {LineSearchKind::zoom, LineSearchKind::backtracking}) {
    OffsetQuadratic<Scalar> f;
    LBFGSParams<Scalar> params;
    params.linesearch = kind;
    params.maxiter = 500;
    params.tol = std::numeric_limits<Scalar>::denorm_min();  // never met while the gradient is non-zero
    const std::vector<Scalar> x0(6, Scalar(0));
    const auto r = lbfgs_minimize<Scalar>(f, std::span<const Scalar>(x0), params);
    if (r.status == LBFGSStatus::converged) {
      EXPECT_EQ(r.error, Scalar(0)) << to_string(kind);  // only an exact zero gradient meets that tol
      continue;
    }
    // Backtracking's Armijo test accepts a step whose promised decrease rounds away (f_new ==
    // f0 passes f0 + c1 t slope == f0), so it may keep moving until maxiter instead.
    if (kind == LineSearchKind::backtracking && r.status == LBFGSStatus::max_iterations) continue;
    EXPECT_EQ(r.status, LBFGSStatus::precision_limit) << to_string(kind) << " error " << r.error;
    EXPECT_GT(r.iterations, 0);
    // The iterate is at the minimum as far as Scalar can tell: the value is the offset to
    // within a few ulps, and the gradient small against the start's (|a * target| ~ 1).
    EXPECT_LE(std::abs(static_cast<double>(r.value) - 1000.0), 1e4 * std::numeric_limits<Scalar>::epsilon())
        << to_string(kind);
    EXPECT_LT(static_cast<double>(r.error), 1e-1) << to_string(kind);
  }
}

TYPED_TEST(LBFGSTyped, NonFiniteAtTheStart) {
  using Scalar = TypeParam;
  const Scalar nan = std::numeric_limits<Scalar>::quiet_NaN();
  auto nan_value = [&](std::span<const Scalar>, std::span<Scalar> g) {
    for (auto& v : g) v = 1;
    return nan;
  };
  auto nan_gradient = [&](std::span<const Scalar>, std::span<Scalar> g) {
    for (auto& v : g) v = 1;
    g[1] = std::numeric_limits<Scalar>::infinity();
    return Scalar(1);
  };
  const std::vector<Scalar> x0(3, Scalar(1));
  const LBFGSParams<Scalar> params;
  auto f1 = make_objective<Scalar>(nan_value);
  auto f2 = make_objective<Scalar>(nan_gradient);
  for (auto r : {lbfgs_minimize<Scalar>(f1, std::span<const Scalar>(x0), params),
                 lbfgs_minimize<Scalar>(f2, std::span<const Scalar>(x0), params)}) {
    EXPECT_EQ(r.status, LBFGSStatus::non_finite);
    EXPECT_EQ(r.iterations, 0);
    EXPECT_EQ(r.evaluations, 1);
  }
}

TYPED_TEST(LBFGSTyped, NothingFiniteAlongTheDirection) {
  // Finite only at x0 exactly: every trial is NaN, so the line search ends non_finite and
  // x0 is returned untouched. (10 trials: the 2^-10 step still moves x in float; after
  // ~25 halvings x + a d would round back to x0 itself, which is finite.)
  using Scalar = TypeParam;
  const std::vector<Scalar> x0 = {Scalar(0.5), Scalar(-2)};
  auto only_start = [&](std::span<const Scalar> x, std::span<Scalar> g) {
    g[0] = 1;
    g[1] = -1;
    return x[0] == x0[0] && x[1] == x0[1] ? Scalar(3) : std::numeric_limits<Scalar>::quiet_NaN();
  };
  for (auto kind : {LineSearchKind::zoom, LineSearchKind::backtracking}) {
    auto f = make_objective<Scalar>(only_start);
    LBFGSParams<Scalar> params;
    params.linesearch = kind;
    params.max_linesearch = 10;
    const auto r = lbfgs_minimize<Scalar>(f, std::span<const Scalar>(x0), params);
    EXPECT_EQ(r.status, LBFGSStatus::non_finite) << to_string(kind);
    EXPECT_EQ(r.x, x0);
    EXPECT_EQ(r.value, Scalar(3));
    EXPECT_EQ(r.evaluations, 1 + params.max_linesearch);
  }
}

TYPED_TEST(LBFGSTyped, NeverAcceptsANonFiniteIterate) {
  // A quadratic with its minimum at x = 2 that is NaN for x > 1: the solver crawls towards
  // the wall, every accepted point finite, until a line search finds no finite decrease
  // (linesearch_failed or, when all its trials land past the wall, non_finite) or maxiter.
  using Scalar = TypeParam;
  auto walled = [](std::span<const Scalar> x, std::span<Scalar> g) {
    g[0] = x[0] - 2;
    return x[0] > 1 ? std::numeric_limits<Scalar>::quiet_NaN() : (x[0] - 2) * (x[0] - 2) / 2;
  };
  for (auto kind : {LineSearchKind::zoom, LineSearchKind::backtracking}) {
    auto f = make_objective<Scalar>(walled);
    LBFGSParams<Scalar> params;
    params.linesearch = kind;
    params.maxiter = 50;
    const std::vector<Scalar> x0 = {Scalar(-5)};
    bool all_finite = true;
    const auto r = lbfgs_minimize<Scalar>(f, std::span<const Scalar>(x0), params, [&](const LBFGSIteration& it) {
      all_finite = all_finite && std::isfinite(it.value) && std::isfinite(it.error);
    });
    EXPECT_TRUE(all_finite);
    EXPECT_NE(r.status, LBFGSStatus::converged) << to_string(r.status);
    EXPECT_LE(r.x[0], Scalar(1));
    EXPECT_GT(r.x[0], Scalar(0.9));  // it did get close to the wall
    EXPECT_TRUE(std::isfinite(r.value));
  }
}

TYPED_TEST(LBFGSTyped, FixedStepsize) {
  using Scalar = TypeParam;
  Quadratic<Scalar> f(6, 4u);
  LBFGSParams<Scalar> params;
  params.stepsize = Scalar(0.5);
  params.maxiter = 500;
  params.tol = loose_tol<Scalar>();
  const std::vector<Scalar> x0(6, Scalar(0));
  const auto r = lbfgs_minimize<Scalar>(f, std::span<const Scalar>(x0), params);
  EXPECT_EQ(r.status, LBFGSStatus::converged);
  EXPECT_EQ(r.evaluations, r.iterations + 1);  // one evaluation per step, no line search

  // A fixed step into a NaN region ends non_finite without accepting it.
  auto blows_up = [](std::span<const Scalar> x, std::span<Scalar> g) {
    g[0] = -1;
    return x[0] > 10 ? std::numeric_limits<Scalar>::infinity() : -x[0];
  };
  auto g = make_objective<Scalar>(blows_up);
  params.stepsize = Scalar(100);
  const std::vector<Scalar> start = {Scalar(0)};
  const auto blown = lbfgs_minimize<Scalar>(g, std::span<const Scalar>(start), params);
  EXPECT_EQ(blown.status, LBFGSStatus::non_finite);
  EXPECT_EQ(blown.iterations, 0);
  EXPECT_EQ(blown.x, start);
}

// The first line search (empty history, d = -g unscaled) tries min(initial_step, 1/||g||)
// first, as L-BFGS-B and LBFGSpp do: a unit-length step when the gradient is large, the
// plain gradient step when it is small. Seen as the point of the second evaluation.
TYPED_TEST(LBFGSTyped, FirstTrialStepIsBoundedByTheGradientsLength) {
  using Scalar = TypeParam;
  for (auto kind : {LineSearchKind::zoom, LineSearchKind::backtracking})
    for (const double scale : {0.02, 0.5, 8.0, 300.0}) {
      // 0.5 scale ||x - t||^2 from x0 = 0: g0 = -scale t, ||g0|| = 5 scale.
      Quadratic<Scalar> q(2, 1u);
      q.a.assign(2, static_cast<Scalar>(scale));
      q.target = {Scalar(3), Scalar(-4)};
      const auto& target = q.target;
      std::vector<std::vector<Scalar>> points;
      auto bowl = [&](std::span<const Scalar> x, std::span<Scalar> g) {
        points.emplace_back(x.begin(), x.end());
        return q.value_and_grad(x, g);
      };
      auto f = make_objective<Scalar>(bowl);
      LBFGSParams<Scalar> params;
      params.linesearch = kind;
      params.maxiter = 1;
      const std::vector<Scalar> x0(2, Scalar(0));
      lbfgs_minimize<Scalar>(f, std::span<const Scalar>(x0), params);
      ASSERT_GE(points.size(), 2u) << to_string(kind) << " scale " << scale;
      const double gradient_norm = 5 * scale, trial = std::min(1.0, 1.0 / gradient_norm);
      for (std::size_t i = 0; i < 2; ++i)
        EXPECT_NEAR(points[1][i], trial * scale * static_cast<double>(target[i]), 1e-5 * std::max(1.0, trial * scale * 5))
            << to_string(kind) << " scale " << scale << " coordinate " << i;
    }
}

// A pair (s, y) enters the history only when s.y > eps y.y: a pair of zero or negative
// curvature (a non-convex stretch) would make H indefinite. A rejected pair leaves the
// history as it was; an accepted one sets gamma = s.y / y.y.
TYPED_TEST(LBFGSTyped, HistoryKeepsOnlyPairsOfPositiveCurvature) {
  using Scalar = TypeParam;
  using History = detail::LBFGSHistory<Scalar>;
  const std::vector<Scalar> x = {Scalar(0), Scalar(0)}, g = {Scalar(1), Scalar(-2)};
  const std::vector<Scalar> grad = {Scalar(2), Scalar(1)};
  std::vector<Scalar> d(2);
  auto push = [&](History& h, std::vector<Scalar> x_new, std::vector<Scalar> g_new) {
    return h.push(std::span<const Scalar>(x), std::span<const Scalar>(x_new), std::span<const Scalar>(g),
                  std::span<const Scalar>(g_new));
  };
  const double eps = std::numeric_limits<Scalar>::epsilon();
  struct Pair {
    std::vector<Scalar> s, y;
    const char* what;
  };
  const Pair refused[] = {
      {{Scalar(1), Scalar(0)}, {Scalar(-1), Scalar(0)}, "negative curvature"},
      {{Scalar(1), Scalar(0)}, {Scalar(0), Scalar(3)}, "zero curvature (y orthogonal to s)"},
      {{Scalar(1), Scalar(0)}, {static_cast<Scalar>(eps / 2 * 9), Scalar(3)}, "s.y below eps y.y"},
  };
  for (const auto& p : refused) {
    History h(3, 2);
    std::vector<Scalar> x_new(2), g_new(2);
    for (std::size_t i = 0; i < 2; ++i) {
      x_new[i] = x[i] + p.s[i];
      g_new[i] = g[i] + p.y[i];
    }
    EXPECT_FALSE(push(h, x_new, g_new)) << p.what;
    EXPECT_TRUE(h.empty()) << p.what;
    h.direction(std::span<const Scalar>(grad), std::span<Scalar>(d));
    EXPECT_EQ(d[0], -grad[0]) << p.what;  // still steepest descent
    EXPECT_EQ(d[1], -grad[1]) << p.what;
  }
  // s = (1, 0), y = (2, 0): s.y = 2, y.y = 4, gamma = 0.5; the one-pair H maps e0 to 0.5 e0
  // (the secant condition H y = s) and keeps e1's gamma scaling: d = -(0.5 * 2, 0.5 * 1).
  // A refused pair after it changes nothing, in a history with room and in a full one (whose
  // next slot is its oldest pair's).
  for (const int capacity : {3, 1}) {
    History kept(capacity, 2);
    EXPECT_TRUE(push(kept, {Scalar(1), Scalar(0)}, {Scalar(3), Scalar(-2)}));
    for (const bool after_refused : {false, true}) {
      if (after_refused)
        EXPECT_FALSE(push(kept, {Scalar(1), Scalar(0)}, {Scalar(0), Scalar(-2)})) << "capacity " << capacity;
      kept.direction(std::span<const Scalar>(grad), std::span<Scalar>(d));
      EXPECT_NEAR(d[0], -1.0, 1e-6) << "capacity " << capacity << ", after a refused pair: " << after_refused;
      EXPECT_NEAR(d[1], -0.5, 1e-6) << "capacity " << capacity << ", after a refused pair: " << after_refused;
    }
  }
}

void expect_invalid(const LBFGSParams<double>& params, const std::string& fragment) {
  try {
    validate(params);
    ADD_FAILURE() << "accepted; expected an error containing: " << fragment;
  } catch (const spmd::Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(LBFGSParams, ValidationNamesTheParameterAndConstraint) {
  EXPECT_NO_THROW(validate(LBFGSParams<double>{}));
  EXPECT_NO_THROW(validate(LBFGSParams<float>{}));
  LBFGSParams<double> p;
  p.history = 0;
  expect_invalid(p, "'history' must be >= 1 (got 0)");
  p = {};
  p.maxiter = 0;
  expect_invalid(p, "'maxiter' must be >= 1");
  p = {};
  p.tol = -1e-3;
  expect_invalid(p, "'tol' must be >= 0");
  p = {};
  p.tol = std::nan("");
  expect_invalid(p, "'tol' must be >= 0");
  p = {};
  p.stepsize = -0.1;
  expect_invalid(p, "'stepsize' must be >= 0");
  p = {};
  p.max_linesearch = 0;
  expect_invalid(p, "'max_linesearch' must be >= 1");
  p = {};
  p.c1 = 0.95;
  expect_invalid(p, "'c1' must satisfy 0 < c1 < c2 < 1 (got c1=0.95, c2=0.9)");
  p = {};
  p.c2 = 1.0;
  expect_invalid(p, "0 < c1 < c2 < 1");
  p = {};
  p.c1 = 0;
  expect_invalid(p, "0 < c1 < c2 < 1");
  p = {};
  p.backtrack_factor = 1.0;
  expect_invalid(p, "'backtrack_factor' must satisfy 0 < backtrack_factor < 1");
  p = {};
  p.initial_step = 0;
  expect_invalid(p, "'initial_step' must be > 0");

  Quadratic<double> f(2, 1u);
  const std::vector<double> x0(2, 0.0);
  p = {};
  p.history = -3;
  EXPECT_THROW(lbfgs_minimize<double>(f, std::span<const double>(x0), p), spmd::Error);
}

TEST(LBFGSParams, LineSearchNames) {
  EXPECT_EQ(parse_line_search("zoom"), LineSearchKind::zoom);
  EXPECT_EQ(parse_line_search("backtracking"), LineSearchKind::backtracking);
  EXPECT_STREQ(to_string(LineSearchKind::backtracking), "backtracking");
  try {
    parse_line_search("wolfe");
    ADD_FAILURE() << "accepted 'wolfe'";
  } catch (const spmd::Error& e) {
    EXPECT_NE(std::string(e.what()).find("'linesearch' must be 'zoom' or 'backtracking' (got 'wolfe')"),
              std::string::npos);
  }
}

}  // namespace
