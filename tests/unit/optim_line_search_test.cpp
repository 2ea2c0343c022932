// The line searches checked against their definitions, on the 1-D restrictions
// phi(a) = f(x0 + a d) of known functions (line_search_functions.hpp):
//   zoom:         phi(a) <= phi(0) + c1 a phi'(0)  and  |phi'(a)| <= c2 |phi'(0)|  (strong Wolfe)
//   backtracking: the first a0 * factor^k with phi(a) <= phi(0) + c1 a phi'(0)      (Armijo)
// Each accepted step is re-evaluated here, independently of what the search reports; steps
// that break a condition must be rejected; the zoom's step and evaluation count on every
// case are pinned and compared with scipy.optimize.line_search (run at test time by
// tests/support/line_search_reference.py); and every step L-BFGS accepts on a logistic
// regression satisfies the conditions of its line search.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "line_search_functions.hpp"
#include "spmd/optim/lbfgs.hpp"

// Its own namespace: the unity build compiles this file with others whose helpers share names.
namespace optim_line_search_test {

namespace {

namespace fs = std::filesystem;
using namespace spmd::optim;
using spmd::test::LineSearchFunction;

constexpr const char* kPython = "/usr/bin/python3";

// How scipy.optimize.line_search's zoom relates to ours on a case. Bracketing is the same
// algorithm in both (trials a0, 2 a0, 4 a0, ...); inside a bracket scipy interpolates a
// quadratic, then cubics through the last three points, and bisects when the trial lies
// within 10% (20% for cubics) of an end, where ours takes the Hermite cubic of both ends
// clamped to the middle 80%: different trials, each a strong Wolfe step.
enum class Scipy {
  same_trials,    // accepted while bracketing: same trials, same step
  same_interval,  // different trials; both steps in the same interval of strong Wolfe steps
  gives_up,       // scipy's zoom stops after 10 iterations without a step (ours finds one)
};

struct LineCase {
  std::string name;
  LineSearchFunction function;
  std::vector<double> x0;
  std::vector<double> direction;  // empty: -grad f(x0)
  double initial_step;
  double c1, c2;
  // Pinned: what our zoom spends and accepts (ZoomIsPinned says why).
  int zoom_evaluations;
  double zoom_step;
  Scipy scipy;
};

// phi and phi' at a, evaluated here from scratch.
struct Phi {
  LineSearchFunction f;
  std::vector<double> x0, d;
  double value0 = 0, slope0 = 0;

  explicit Phi(const LineCase& c) : f(c.function), x0(c.x0), d(c.x0.size()) {
    std::vector<double> g(x0.size());
    value0 = f.value_and_grad(x0, g);
    for (std::size_t i = 0; i < d.size(); ++i) {
      d[i] = c.direction.empty() ? -g[i] : c.direction[i];
      slope0 += g[i] * d[i];
    }
  }
  std::pair<double, double> at(double a) {
    std::vector<double> x(x0.size()), g(x0.size());
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = x0[i] + a * d[i];
    const double value = f.value_and_grad(x, g);
    double slope = 0;
    for (std::size_t i = 0; i < x.size(); ++i) slope += g[i] * d[i];
    return {value, slope};
  }
  bool armijo(double a, double c1) { return at(a).first <= value0 + c1 * a * slope0; }
  bool curvature(double a, double c2) { return std::abs(at(a).second) <= c2 * std::abs(slope0); }
};

std::vector<LineCase> cases() {
  using spmd::test::conditioned_quadratic;
  using spmd::test::named;
  using spmd::test::quadratic;
  const auto logistic = spmd::test::small_logistic(12, 4, 3, 0.01);
  // The first trial of L-BFGS's first iteration: a unit step along -grad.
  const auto unit = [](LineSearchFunction f, const std::vector<double>& x0) {
    std::vector<double> g(x0.size());
    f.value_and_grad(x0, g);
    double norm = 0;
    for (double v : g) norm += v * v;
    return 1 / std::sqrt(norm);
  };
  const std::vector<double> z5(5, 0.0), z12(12, 0.0), z1{0.0};
  const auto rb = named("rosenbrock");
  const std::vector<double> rc{-1.2, 1}, ro{0, 0}, rf{2, 2};  // classic, origin, far
  const auto mt1 = named("more_thuente1", 2.0), mt2 = named("more_thuente2", 0.004);
  const auto q1 = conditioned_quadratic(5, 1), q100 = conditioned_quadratic(5, 100);
  const auto q1e4 = conditioned_quadratic(5, 1e4);
  const auto half = quadratic({1}, {1});  // a^2/2 - a along d = 1
  const auto same = Scipy::same_trials, interval = Scipy::same_interval, gives_up = Scipy::gives_up;
  // clang-format off
  // name, function, x0, direction (empty: -grad), first trial, c1, c2, then our zoom's pinned
  // evaluations and step, and how scipy's relates
  return {
    {"quadratic_cond1",          q1,       z5,  {},    1.0,            1e-4, 0.9, 1,  1,                      same},
    {"quadratic_cond100",        q100,     z5,  {},    1.0,            1e-4, 0.9, 3,  0.010462082632159142,   interval},
    {"quadratic_cond100_tight",  q100,     z5,  {},    1.0,            1e-4, 0.1, 3,  0.010462082632159142,   interval},
    {"quadratic_cond1e4",        q1e4,     z5,  {},    unit(q1e4, z5), 1e-4, 0.9, 1,  1.9935947420206942e-05, same},
    {"armijo_not_curvature",     half,     z1,  {},    0.01,           1e-4, 0.9, 5,  0.16,                   same},
    {"neither_condition",        half,     z1,  {},    3.0,            1e-4, 0.9, 2,  1,                      same},
    {"rosenbrock_classic",       rb,       rc,  {},    unit(rb, rc),   1e-4, 0.9, 2,  0.00084689334089136595, interval},
    {"rosenbrock_classic_tight", rb,       rc,  {},    unit(rb, rc),   1e-4, 0.1, 2,  0.00084689334089136595, interval},
    {"rosenbrock_origin",        rb,       ro,  {},    unit(rb, ro),   1e-4, 0.9, 3,  0.08173421365988566,    interval},
    {"rosenbrock_far",           rb,       rf,  {},    unit(rb, rf),   1e-4, 0.9, 1,  0.00060562653462125824, same},
    {"logistic_unit",            logistic, z12, {},    1.0,            1e-4, 0.9, 1,  1,                      same},
    {"logistic_overshoot",       logistic, z12, {},    30.0,           1e-4, 0.1, 2,  5.452097628192444,      interval},
    {"more_thuente1_1e-3",       mt1,      z1,  {1.0}, 1e-3,           1e-3, 0.1, 13, 1.4262510133612687,     interval},
    {"more_thuente1_1e-1",       mt1,      z1,  {1.0}, 1e-1,           1e-3, 0.1, 5,  1.6000000000000001,     same},
    {"more_thuente1_10",         mt1,      z1,  {1.0}, 10.0,           1e-3, 0.1, 1,  10,                     same},
    {"more_thuente1_1e3",        mt1,      z1,  {1.0}, 1e3,            1e-3, 0.1, 4,  37.053890221600412,     interval},
    {"more_thuente2_1e-3",       mt2,      z1,  {1.0}, 1e-3,           0.1,  0.5, 19, 1.5959999999902514,     gives_up},
    {"more_thuente2_1e-1",       mt2,      z1,  {1.0}, 1e-1,           0.1,  0.5, 8,  1.5960000000124934,     interval},
    {"more_thuente2_10",         mt2,      z1,  {1.0}, 10.0,           0.1,  0.5, 8,  1.5960000034281121,     interval},
    {"more_thuente2_1e3",        mt2,      z1,  {1.0}, 1e3,            0.1,  0.5, 14, 1.5960000005553725,     gives_up},
  };
  // clang-format on
}

LBFGSParams<double> params_of(const LineCase& c) {
  LBFGSParams<double> p;
  p.c1 = c.c1;
  p.c2 = c.c2;
  return p;
}

// One search on a case with policy LS; the function's own evaluation counter included.
template <class LS>
struct Searched {
  LineSearchOutcome<double> outcome;
  int function_evaluations = 0;
  std::vector<double> x_new, grad_new;
};

template <class LS>
Searched<LS> search(const LineCase& c, const LBFGSParams<double>& params) {
  Phi phi(c);
  LineSearchFunction f = c.function;
  const std::size_t n = c.x0.size();
  Searched<LS> s;
  s.x_new.assign(n, 0.0);
  s.grad_new.assign(n, 0.0);
  LS ls(n);
  s.outcome = ls.search(f, params, std::span<const double>(c.x0), phi.value0, std::span<const double>(phi.d),
                        phi.slope0, c.initial_step, std::span<double>(s.x_new), std::span<double>(s.grad_new));
  s.function_evaluations = f.evaluations;
  return s;
}

// What the search reports about its step is what phi is there.
template <class LS>
void expect_consistent(const LineCase& c, const Searched<LS>& s) {
  Phi phi(c);
  const auto [value, slope] = phi.at(s.outcome.step);
  EXPECT_EQ(s.outcome.value, value) << c.name;
  EXPECT_EQ(s.outcome.evaluations, s.function_evaluations) << c.name;
  double reported_slope = 0;
  for (std::size_t i = 0; i < c.x0.size(); ++i) {
    EXPECT_DOUBLE_EQ(s.x_new[i], c.x0[i] + s.outcome.step * phi.d[i]) << c.name << " x_new[" << i << "]";
    reported_slope += s.grad_new[i] * phi.d[i];
  }
  EXPECT_DOUBLE_EQ(reported_slope, slope) << c.name << ": grad_new is not the gradient at the step";
}

TEST(LineSearchZoom, EveryAcceptedStepSatisfiesTheStrongWolfeConditions) {
  for (const LineCase& c : cases()) {
    const auto s = search<LineSearchZoom<double>>(c, params_of(c));
    ASSERT_EQ(s.outcome.status, LineSearchStatus::ok) << c.name;
    Phi phi(c);
    const double a = s.outcome.step;
    EXPECT_GT(a, 0.0) << c.name;
    EXPECT_TRUE(phi.armijo(a, c.c1)) << c.name << ": step " << a << " breaks sufficient decrease";
    EXPECT_TRUE(phi.curvature(a, c.c2)) << c.name << ": step " << a << " has |phi'| = " << std::abs(phi.at(a).second)
                                        << " > c2 |phi'(0)| = " << c.c2 * std::abs(phi.slope0);
    expect_consistent(c, s);
  }
}

TEST(LineSearchBacktracking, AcceptsTheFirstArmijoStepOfTheGeometricSequence) {
  for (const LineCase& c : cases()) {
    const auto params = params_of(c);
    // The definition, evaluated here: the first k whose step satisfies Armijo.
    Phi phi(c);
    int k = 0;
    double want = c.initial_step;
    while (!phi.armijo(want, c.c1)) want *= params.backtrack_factor, ++k;
    ASSERT_LT(k + 1, params.max_linesearch) << c.name;
    const auto s = search<LineSearchBacktracking<double>>(c, params);
    ASSERT_EQ(s.outcome.status, LineSearchStatus::ok) << c.name;
    EXPECT_EQ(s.outcome.step, want) << c.name;
    EXPECT_EQ(s.outcome.evaluations, k + 1) << c.name;
    EXPECT_TRUE(phi.armijo(s.outcome.step, c.c1)) << c.name;
    expect_consistent(c, s);
  }
}

const LineCase& case_named(const std::string& name) {
  static const std::vector<LineCase> all = cases();
  for (const auto& c : all)
    if (c.name == name) return c;
  throw std::runtime_error("no case " + name);
}

// phi(a) = a^2/2 - a from a0 = 0.01: the first trial decreases phi enough but phi' there is
// -0.99, beyond c2 |phi'(0)| = 0.9. The zoom must go on doubling until |phi'| <= 0.9
// (a = 0.16, the fifth trial); a search that took the first trial would stop after one.
TEST(LineSearchZoom, RejectsAFirstTrialThatSatisfiesArmijoButNotCurvature) {
  const LineCase& c = case_named("armijo_not_curvature");
  Phi phi(c);
  ASSERT_TRUE(phi.armijo(c.initial_step, c.c1));
  ASSERT_FALSE(phi.curvature(c.initial_step, c.c2));
  const auto s = search<LineSearchZoom<double>>(c, params_of(c));
  ASSERT_EQ(s.outcome.status, LineSearchStatus::ok);
  EXPECT_GT(s.outcome.evaluations, 1);
  EXPECT_NE(s.outcome.step, c.initial_step);
  EXPECT_LE(std::abs(phi.at(s.outcome.step).second), c.c2 * std::abs(phi.slope0));
  EXPECT_EQ(s.outcome.step, 0.16);  // 0.01, 0.02, 0.04, 0.08, 0.16: phi' = -0.84
}

// The same phi from a0 = 3: phi(3) = 1.5 > phi(0), phi'(3) = 2. Both conditions fail; the
// zoom interpolates back to 1, backtracking halves to 1.5.
TEST(LineSearchZoom, RejectsAFirstTrialThatSatisfiesNeitherCondition) {
  const LineCase& c = case_named("neither_condition");
  Phi phi(c);
  ASSERT_FALSE(phi.armijo(c.initial_step, c.c1));
  ASSERT_FALSE(phi.curvature(c.initial_step, c.c2));
  const auto zoom = search<LineSearchZoom<double>>(c, params_of(c));
  ASSERT_EQ(zoom.outcome.status, LineSearchStatus::ok);
  EXPECT_GT(zoom.outcome.evaluations, 1);
  EXPECT_TRUE(phi.armijo(zoom.outcome.step, c.c1));
  EXPECT_TRUE(phi.curvature(zoom.outcome.step, c.c2));
  const auto back = search<LineSearchBacktracking<double>>(c, params_of(c));
  ASSERT_EQ(back.outcome.status, LineSearchStatus::ok);
  EXPECT_EQ(back.outcome.step, 1.5);
  EXPECT_EQ(back.outcome.evaluations, 2);
}

// phi(a) = a^2/2 - a with c1 = 0.3 from a0 = 1.8: phi(1.8) = -0.18 < phi(0), a decrease,
// but not the sufficient one (-0.54). Both searches must reject it.
TEST(LineSearchBacktracking, RejectsADecreaseThatIsNotSufficient) {
  LineCase c = case_named("neither_condition");
  c.initial_step = 1.8;
  c.c1 = 0.3;
  Phi phi(c);
  ASSERT_LT(phi.at(c.initial_step).first, phi.value0);
  ASSERT_FALSE(phi.armijo(c.initial_step, c.c1));
  const auto back = search<LineSearchBacktracking<double>>(c, params_of(c));
  ASSERT_EQ(back.outcome.status, LineSearchStatus::ok);
  EXPECT_EQ(back.outcome.step, 0.9);
  EXPECT_EQ(back.outcome.evaluations, 2);
  const auto zoom = search<LineSearchZoom<double>>(c, params_of(c));
  ASSERT_EQ(zoom.outcome.status, LineSearchStatus::ok);
  EXPECT_GT(zoom.outcome.evaluations, 1);
  EXPECT_TRUE(phi.armijo(zoom.outcome.step, c.c1));
}

// Our zoom's evaluations and step on every case, as they are now: a change to the
// bracketing, the interpolation or the safeguards shows here first, to be explained (and
// checked against scipy below) before the numbers are updated. Steps to 1e-12 relative:
// libm differences between machines stay far below.
TEST(LineSearchZoom, EvaluationCountsAndStepsArePinned) {
  for (const LineCase& c : cases()) {
    const auto s = search<LineSearchZoom<double>>(c, params_of(c));
    ASSERT_EQ(s.outcome.status, LineSearchStatus::ok) << c.name;
    EXPECT_EQ(s.outcome.evaluations, c.zoom_evaluations) << c.name;
    EXPECT_NEAR(s.outcome.step, c.zoom_step, 1e-12 * c.zoom_step) << c.name;
  }
}

// scipy.optimize.line_search on the same cases (same phi, c1, c2, first trial), run by
// tests/support/line_search_reference.py; skipped, saying why, without python3-scipy.
class LineSearchScipy : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (std::system((std::string(kPython) + " -c 'import numpy, scipy' >/dev/null 2>&1").c_str()) != 0) {
      skip_reason_ = std::string(kPython) + " with numpy and scipy is not available (Debian: python3-scipy)";
      return;
    }
    const fs::path dir = fs::temp_directory_path() / ("spmd_line_search_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    nlohmann::json input;
    for (const LineCase& c : cases()) {
      const Phi phi(c);
      input["cases"].push_back({{"name", c.name},
                                {"function", c.function.spec()},
                                {"x0", c.x0},
                                {"direction", phi.d},
                                {"initial_step", c.initial_step},
                                {"c1", c.c1},
                                {"c2", c.c2}});
    }
    std::ofstream(dir / "cases.json") << input.dump();
    const std::string command = std::string(kPython) + " " SPMD_SOURCE_DIR "/tests/support/line_search_reference.py " +
                                (dir / "cases.json").string() + " " + (dir / "result.json").string();
    const int rc = std::system(command.c_str());
    std::ifstream in(dir / "result.json");
    if (rc == 0 && in) {
      const auto result = nlohmann::json::parse(in);
      for (const auto& r : result["results"]) results_.push_back(r);
    }
    fs::remove_all(dir);
  }
  void SetUp() override {
    if (!skip_reason_.empty()) GTEST_SKIP() << skip_reason_;
    ASSERT_EQ(results_.size(), cases().size()) << "tests/support/line_search_reference.py failed";
  }
  static inline std::vector<nlohmann::json> results_;
  static inline std::string skip_reason_;
};

TEST_F(LineSearchScipy, ZoomAgreesWithScipyOnEveryCase) {
  const auto all = cases();
  for (std::size_t i = 0; i < all.size(); ++i) {
    const LineCase& c = all[i];
    const auto& r = results_[i];
    ASSERT_EQ(r["name"], c.name);
    const auto ours = search<LineSearchZoom<double>>(c, params_of(c));
    ASSERT_EQ(ours.outcome.status, LineSearchStatus::ok) << c.name;
    const double a = ours.outcome.step;
    if (c.scipy == Scipy::gives_up) {
      EXPECT_TRUE(r["step"].is_null()) << c.name << ": scipy found a step now; compare it";
      continue;
    }
    ASSERT_FALSE(r["step"].is_null()) << c.name << ": scipy found no step";
    const double b = r["step"].get<double>();
    Phi phi(c);
    EXPECT_TRUE(phi.armijo(b, c.c1) && phi.curvature(b, c.c2)) << c.name << ": scipy's step " << b;
    if (c.scipy == Scipy::same_trials) {
      // scipy scales the direction by the first trial and back: a rounding apart.
      EXPECT_NEAR(a, b, 1e-14 * b) << c.name;
      EXPECT_EQ(ours.outcome.evaluations, r["evaluations"].get<int>()) << c.name;
      continue;
    }
    // Different trials: the two steps must lie in one interval of strong Wolfe steps
    // (every point between them acceptable), i.e. the searches found the same minimiser's
    // neighbourhood, whatever point of it each interpolation landed on.
    for (int k = 0; k <= 200; ++k) {
      const double t = a + (b - a) * k / 200.0;
      ASSERT_TRUE(phi.armijo(t, c.c1) && phi.curvature(t, c.c2))
          << c.name << ": " << t << " between our step " << a << " and scipy's " << b << " is not strong Wolfe";
    }
    std::printf("%-26s ours %2d evaluations, step %.10g; scipy %2d, step %.10g\n", c.name.c_str(),
                ours.outcome.evaluations, a, r["evaluations"].get<int>(), b);
  }
}

// L-BFGS on a logistic regression: every step it accepts satisfies the conditions of its
// line search. The objective records each evaluation; the callback names the accepted one
// (by its value). With s = x_new - x = a d the conditions are scale-free:
//   f(x_new) <= f(x) + c1 g.s   and (zoom)   |g_new.s| <= c2 |g.s|
// (a slack of 1e-12 relative covers x + a d rounded to x_new).
struct RecordingObjective {
  LineSearchFunction f;
  struct Point {
    std::vector<double> x, g;
    double value;
  };
  std::vector<Point> points;
  double value_and_grad(std::span<const double> x, std::span<double> g) {
    const double v = f.value_and_grad(x, g);
    points.push_back({{x.begin(), x.end()}, {g.begin(), g.end()}, v});
    return v;
  }
};

TEST(LBFGSLineSearch, EveryAcceptedStepSatisfiesItsLineSearchConditions) {
  for (auto kind : {LineSearchKind::zoom, LineSearchKind::backtracking}) {
    RecordingObjective f{spmd::test::small_logistic(60, 5, 4, 1e-3), {}};
    LBFGSParams<double> params;
    params.linesearch = kind;
    params.tol = 1e-6;
    params.maxiter = 200;
    std::vector<std::size_t> accepted;  // indices: points grows
    const std::vector<double> w0(20, 0.0);
    const auto r = lbfgs_minimize<double>(f, std::span<const double>(w0), params, [&](const LBFGSIteration& it) {
      // The latest evaluation with the reported value.
      for (std::size_t k = f.points.size(); k-- > 0;) {
        if (f.points[k].value == it.value) {
          accepted.push_back(k);
          return;
        }
      }
      ADD_FAILURE() << "iteration " << it.iteration << ": no evaluation has its value " << it.value;
    });
    ASSERT_EQ(r.status, LBFGSStatus::converged) << to_string(kind) << ": " << to_string(r.status);
    ASSERT_GT(r.iterations, 5) << to_string(kind);
    ASSERT_EQ(accepted.size(), static_cast<std::size_t>(r.iterations));
    const RecordingObjective::Point* from = &f.points.front();  // x0
    for (std::size_t i = 0; i < accepted.size(); ++i) {
      const auto* to = &f.points[accepted[i]];
      double gs = 0, gs_new = 0;
      for (std::size_t k = 0; k < w0.size(); ++k) {
        const double s = to->x[k] - from->x[k];
        gs += from->g[k] * s;
        gs_new += to->g[k] * s;
      }
      ASSERT_LT(gs, 0) << to_string(kind) << " iteration " << i + 1 << ": not a descent step";
      EXPECT_LE(to->value, from->value + params.c1 * gs + 1e-12 * std::abs(from->value))
          << to_string(kind) << " iteration " << i + 1 << ": no sufficient decrease";
      if (kind == LineSearchKind::zoom)
        EXPECT_LE(std::abs(gs_new), params.c2 * std::abs(gs) * (1 + 1e-12))
            << "iteration " << i + 1 << ": |phi'(a)| = " << std::abs(gs_new)
            << " > c2 |phi'(0)| = " << params.c2 * std::abs(gs);
      from = to;
    }
  }
}

}  // namespace

}  // namespace optim_line_search_test
