#pragma once
// Strong Wolfe line search (Nocedal & Wright, "Numerical Optimization", 2nd ed., Alg. 3.5
// and 3.6), the "zoom" of JAXopt's LBFGS. Accepts a step a with
//   phi(a) <= phi(0) + c1 a phi'(0)   and   |phi'(a)| <= c2 |phi'(0)|.
// Bracketing: trials a0, 2 a0, 4 a0, ... until a trial breaks sufficient decrease, fails to
// decrease phi, has phi' >= 0, or is non-finite; that brackets a strong Wolfe step. Zoom:
// the minimiser of the cubic through both ends (values and slopes), safeguarded to the
// middle 80% of the interval, or bisection when the cubic is unusable or one end is
// non-finite. The search stops when the interval is narrower than the Scalar epsilon
// relative to its ends (further trials could not change x) or after max_linesearch
// evaluations. Then, rather than fail, it returns the best point found that satisfies
// sufficient decrease (the zoom's low end) if there is one, as JAXopt does: the solver
// still gets a decrease, and a step that breaks the curvature condition merely skips the
// history update (s.y <= eps y.y). Policy signature: see line_search.hpp.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <vector>

#include "spmd/optim/line_search.hpp"

namespace spmd::optim {

template <class Scalar>
class LineSearchZoom {
 public:
  static constexpr Scalar kGrowth = Scalar(2);      // bracketing: next trial = 2 x this one
  static constexpr double kSafeguard = 0.1;         // cubic trial kept >= 10% from either end

  explicit LineSearchZoom(std::size_t n) : best_x_(n), best_grad_(n) {}

  template <Objective<Scalar> F>
  LineSearchOutcome<Scalar> search(F& f, const LBFGSParams<Scalar>& params, std::span<const Scalar> x,
                                   Scalar value, std::span<const Scalar> direction, double slope,
                                   Scalar initial_step, std::span<Scalar> x_new,
                                   std::span<Scalar> grad_new) {
    using Point = detail::TrialPoint<Scalar>;
    const double curvature_bound = -static_cast<double>(params.c2) * slope;
    const Point origin{Scalar(0), value, slope, true};
    LineSearchOutcome<Scalar> outcome;
    outcome.value = value;
    bool saw_finite = false;
    bool have_best = false;
    Point best = origin;

    auto evaluate = [&](Scalar step) {
      ++outcome.evaluations;
      Point t = detail::evaluate_trial(f, x, direction, step, x_new, grad_new);
      saw_finite = saw_finite || t.finite;
      return t;
    };
    auto armijo = [&](const Point& t) { return detail::sufficient_decrease(t, value, slope, params.c1); };
    auto curvature = [&](const Point& t) { return std::abs(t.slope) <= curvature_bound; };
    // The zoom's low end is always the best sufficient-decrease point so far: keep a copy.
    auto remember = [&](const Point& t) {
      std::copy(x_new.begin(), x_new.end(), best_x_.begin());
      std::copy(grad_new.begin(), grad_new.end(), best_grad_.begin());
      best = t;
      have_best = true;
    };
    auto accept = [&](const Point& t) {
      outcome.status = LineSearchStatus::ok;
      outcome.step = t.step;
      outcome.value = t.value;
      return outcome;
    };

    // Bracketing phase.
    Point prev = origin, lo = origin, hi = origin;
    bool bracketed = false;
    Scalar step = initial_step;
    while (outcome.evaluations < params.max_linesearch) {
      const Point t = evaluate(step);
      if (!t.finite || !armijo(t) || (prev.step > 0 && t.value >= prev.value)) {
        lo = prev;
        hi = t;
        bracketed = true;
        break;
      }
      if (curvature(t)) return accept(t);
      remember(t);
      if (t.slope >= 0) {
        lo = t;
        hi = prev;
        bracketed = true;
        break;
      }
      prev = t;
      step = t.step * kGrowth;
      if (!std::isfinite(step)) break;
    }

    // Zoom phase: lo satisfies sufficient decrease with the lowest value so far; hi is the
    // other end (maybe non-finite); the interval contains a strong Wolfe step.
    while (bracketed && outcome.evaluations < params.max_linesearch) {
      const Scalar a = next_trial(lo, hi);
      if (!(a != lo.step && a != hi.step)) break;  // interval exhausted at Scalar precision
      const Point t = evaluate(a);
      if (!t.finite || !armijo(t) || t.value >= lo.value) {
        hi = t;
        continue;
      }
      if (curvature(t)) return accept(t);
      if (t.slope * (static_cast<double>(hi.step) - static_cast<double>(lo.step)) >= 0) hi = lo;
      lo = t;
      remember(t);
    }

    if (have_best) {
      std::copy(best_x_.begin(), best_x_.end(), x_new.begin());
      std::copy(best_grad_.begin(), best_grad_.end(), grad_new.begin());
      return accept(best);
    }
    outcome.status = saw_finite ? LineSearchStatus::failed : LineSearchStatus::non_finite;
    return outcome;
  }

 private:
  // Next trial inside (lo, hi): safeguarded cubic minimiser, or bisection.
  static Scalar next_trial(const detail::TrialPoint<Scalar>& lo, const detail::TrialPoint<Scalar>& hi) {
    const double a = lo.step, b = hi.step;
    const double width = std::abs(b - a);
    if (width <= std::numeric_limits<Scalar>::epsilon() * std::max(std::abs(a), std::abs(b)))
      return lo.step;  // collapsed: the caller stops
    const double mid = 0.5 * (a + b);
    double trial = mid;
    if (hi.finite) {
      const double fa = lo.value, fb = hi.value, da = lo.slope, db = hi.slope;
      const double d1 = da + db - 3.0 * (fa - fb) / (a - b);
      const double radicand = d1 * d1 - da * db;
      if (radicand >= 0) {
        const double d2 = std::copysign(std::sqrt(radicand), b - a);
        const double cubic = b - (b - a) * (db + d2 - d1) / (db - da + 2.0 * d2);
        const double low = std::min(a, b) + kSafeguard * width;
        const double high = std::max(a, b) - kSafeguard * width;
        if (std::isfinite(cubic)) trial = std::clamp(cubic, low, high);
      }
    }
    return static_cast<Scalar>(trial);
  }

  std::vector<Scalar> best_x_;
  std::vector<Scalar> best_grad_;
};

}  // namespace spmd::optim
