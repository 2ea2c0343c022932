#pragma once
// Limited-memory BFGS (Nocedal & Wright, "Numerical Optimization", 2nd ed., Alg. 7.4 and
// 7.5), following JAXopt's LBFGS as used in the data-parallel logistic-regression example.
//
// Iteration k (x, g = grad f(x)):
//   d = -H g by the two-loop recursion over the last `history` pairs (s, y), with the
//       initial inverse Hessian gamma I, gamma = s.y / y.y of the newest pair (eq. 7.20);
//       with no pair yet (first iteration, or after a reset) gamma = 1, i.e. d = -g, as
//       JAXopt's compute_gamma does on its zero-initialised history.
//   If d is not a descent direction (g.d >= 0 or not finite, possible only through
//       rounding) the history is cleared and d = -g.
//   Step: stepsize > 0 -> x + stepsize d (no check but finiteness); else the line search
//       policy, first trial `initial_step` (1: the quasi-Newton step) except when the
//       history is empty, where d = -g is unscaled and the first trial is
//       min(initial_step, 1/||d||) (as L-BFGS-B and LBFGSpp do), so a large first gradient
//       cannot throw x far away.
//   History: the pair s = x_new - x, y = g_new - g is stored only when s.y > eps * y.y,
//       eps = numeric_limits<Scalar>::epsilon() (curvature condition, scale-free); other
//       pairs would make H indefinite and are skipped (the oldest pair is then kept).
//   error = ||g_new||_2 (JAXopt's state.error); converged when error <= tol.
// The convergence test is also made at x0 (then iterations = 0). Dot products and norms
// accumulate in double in index order; every decision depends only on values returned by
// the objective, so ranks fed bitwise identical values take identical decisions. Solver
// outcomes are LBFGSStatus values, never exceptions; invalid parameters throw spmd::Error.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <limits>
#include <span>
#include <utility>
#include <vector>

#include "spmd/optim/lbfgs_params.hpp"
#include "spmd/optim/line_search.hpp"
#include "spmd/optim/line_search_backtracking.hpp"
#include "spmd/optim/line_search_zoom.hpp"
#include "spmd/optim/objective.hpp"
#include "spmd/optim/vector_ops.hpp"

namespace spmd::optim {

// Called after every accepted step (live tables, timing). Must not change the solver's
// course; runs on every rank alike.
using LBFGSCallback = std::function<void(const LBFGSIteration&)>;

// Asked before every iteration (after the first evaluation, then after every accepted
// step): true ends the solve with status `stopped` at the current iterate. Called at the
// same points on every rank fed the same values, so it may be collective (an agreed stop).
using LBFGSStop = std::function<bool()>;

namespace detail {

// The last m curvature pairs in a ring buffer, and the two-loop recursion over them.
template <class Scalar>
class LBFGSHistory {
 public:
  LBFGSHistory(int capacity, std::size_t n)
      : s_(static_cast<std::size_t>(capacity), std::vector<Scalar>(n)),
        y_(static_cast<std::size_t>(capacity), std::vector<Scalar>(n)),
        next_s_(n),
        next_y_(n),
        rho_(static_cast<std::size_t>(capacity)),
        alpha_(static_cast<std::size_t>(capacity)) {}

  bool empty() const { return count_ == 0; }
  void clear() { count_ = 0; }

  // Stores (x_new - x, g_new - g) when it satisfies the curvature condition; returns
  // whether it did. The pair is formed aside and swapped in only when kept: in a full
  // history the next slot is the oldest pair's, which a refused pair must leave intact.
  bool push(std::span<const Scalar> x, std::span<const Scalar> x_new, std::span<const Scalar> g,
            std::span<const Scalar> g_new) {
    for (std::size_t i = 0; i < next_s_.size(); ++i) {
      next_s_[i] = x_new[i] - x[i];
      next_y_[i] = g_new[i] - g[i];
    }
    const double sy = dot<Scalar>(next_s_, next_y_);
    const double yy = dot<Scalar>(next_y_, next_y_);
    if (!(sy > std::numeric_limits<Scalar>::epsilon() * yy) || !std::isfinite(sy) || !std::isfinite(yy))
      return false;
    const std::size_t slot = (first_ + count_) % capacity();
    std::swap(s_[slot], next_s_);
    std::swap(y_[slot], next_y_);
    rho_[slot] = 1.0 / sy;
    gamma_ = sy / yy;
    if (count_ < capacity())
      ++count_;
    else
      first_ = (first_ + 1) % capacity();
    return true;
  }

  // direction = -H grad.
  void direction(std::span<const Scalar> grad, std::span<Scalar> direction) {
    std::copy(grad.begin(), grad.end(), direction.begin());
    std::span<const Scalar> q(direction.data(), direction.size());
    for (std::size_t k = count_; k-- > 0;) {
      const std::size_t slot = (first_ + k) % capacity();
      alpha_[slot] = rho_[slot] * dot<Scalar>(s_[slot], q);
      const Scalar a = static_cast<Scalar>(alpha_[slot]);
      const auto& y = y_[slot];
      for (std::size_t i = 0; i < direction.size(); ++i) direction[i] -= a * y[i];
    }
    const Scalar gamma = static_cast<Scalar>(empty() ? 1.0 : gamma_);
    for (auto& v : direction) v *= gamma;
    for (std::size_t k = 0; k < count_; ++k) {
      const std::size_t slot = (first_ + k) % capacity();
      const double beta = rho_[slot] * dot<Scalar>(y_[slot], q);
      const Scalar c = static_cast<Scalar>(alpha_[slot] - beta);
      const auto& s = s_[slot];
      for (std::size_t i = 0; i < direction.size(); ++i) direction[i] += c * s[i];
    }
    for (auto& v : direction) v = -v;
  }

 private:
  std::size_t capacity() const { return s_.size(); }

  std::vector<std::vector<Scalar>> s_, y_;
  std::vector<Scalar> next_s_, next_y_;  // the pair being formed (allocated once, swapped in)
  std::vector<double> rho_, alpha_;
  double gamma_ = 1.0;
  std::size_t first_ = 0;  // slot of the oldest pair
  std::size_t count_ = 0;
};

// Whether a failed line search failed for want of precision: the decrease that the first
// trial step promises to first order (-slope * step; the quadratic model promises half of
// it) is within a few units in the last place of the value, so no trial could show a
// sufficient decrease in Scalar arithmetic. Near a minimum in float32 this is where L-BFGS
// stops improving, whatever tol asks.
template <class Scalar>
bool decrease_unrepresentable(Scalar value, double slope, Scalar first_trial, double objective_precision) {
  const double precision =
      objective_precision > 0 ? objective_precision : static_cast<double>(std::numeric_limits<Scalar>::epsilon());
  const double resolution = 8.0 * precision * std::abs(static_cast<double>(value));
  return -slope * static_cast<double>(first_trial) <= resolution;
}

// Records an accepted iterate in result, tells the callback, and returns whether it meets
// tol (then status is converged).
template <class Scalar, class Callback>
bool accept_iterate(LBFGSResult<Scalar>& result, int iteration, Scalar value, double error, Scalar step, Scalar tol,
                    const Callback& callback) {
  result.iterations = iteration;
  result.value = value;
  result.error = static_cast<Scalar>(error);
  if (callback)
    callback(LBFGSIteration{iteration, static_cast<double>(value), error, static_cast<double>(step),
                            result.evaluations});
  if (!(error <= static_cast<double>(tol))) return false;
  result.status = LBFGSStatus::converged;
  return true;
}

}  // namespace detail

// L-BFGS with a compile-time line-search policy (LineSearchZoom, LineSearchBacktracking or
// any class with the signature in line_search.hpp; unused when params.stepsize > 0).
// x0 is copied; the result holds the last accepted iterate.
template <class Scalar, class LineSearch, Objective<Scalar> F>
LBFGSResult<Scalar> lbfgs_minimize_with(F& f, std::span<const Scalar> x0, const LBFGSParams<Scalar>& params,
                                        const LBFGSCallback& callback = {}, const LBFGSStop& stop = {}) {
  validate(params);
  const std::size_t n = x0.size();
  LBFGSResult<Scalar> result;
  result.x.assign(x0.begin(), x0.end());
  std::vector<Scalar> grad(n), x_new(n), grad_new(n), direction(n);

  Scalar value = f.value_and_grad(std::span<const Scalar>(result.x), std::span<Scalar>(grad));
  result.evaluations = 1;
  double error = detail::l2_norm<Scalar>(grad);
  result.value = value;
  result.error = static_cast<Scalar>(error);
  if (!std::isfinite(value) || !detail::all_finite<Scalar>(grad)) {
    result.status = LBFGSStatus::non_finite;
    return result;
  }
  if (error <= static_cast<double>(params.tol)) {
    result.status = LBFGSStatus::converged;
    return result;
  }

  detail::LBFGSHistory<Scalar> history(params.history, n);
  LineSearch line_search(n);
  for (int iteration = 1; iteration <= params.maxiter; ++iteration) {
    if (stop && stop()) {
      result.status = LBFGSStatus::stopped;
      return result;
    }
    history.direction(grad, direction);
    double slope = detail::dot<Scalar>(grad, direction);
    if (!(slope < 0) || !std::isfinite(slope)) {
      history.clear();
      history.direction(grad, direction);
      slope = detail::dot<Scalar>(grad, direction);
    }
    if (!(slope < 0)) {  // grad underflowed to zero while error > tol: nowhere to go
      result.status = LBFGSStatus::linesearch_failed;
      return result;
    }

    Scalar step;
    Scalar value_new;
    if (params.stepsize > 0) {
      step = params.stepsize;
      detail::step_along<Scalar>(result.x, step, direction, x_new);
      value_new = f.value_and_grad(std::span<const Scalar>(x_new), std::span<Scalar>(grad_new));
      ++result.evaluations;
      if (!std::isfinite(value_new) || !detail::all_finite<Scalar>(grad_new)) {
        result.status = LBFGSStatus::non_finite;
        return result;
      }
    } else {
      Scalar first_trial = params.initial_step;
      if (history.empty()) {
        const double inverse_norm = 1.0 / detail::l2_norm<Scalar>(direction);
        first_trial = static_cast<Scalar>(std::min(static_cast<double>(params.initial_step), inverse_norm));
        if (!(first_trial > 0)) first_trial = std::numeric_limits<Scalar>::min();
      }
      const auto outcome = line_search.search(f, params, std::span<const Scalar>(result.x), value,
                                              std::span<const Scalar>(direction), slope, first_trial,
                                              std::span<Scalar>(x_new), std::span<Scalar>(grad_new));
      result.evaluations += outcome.evaluations;
      if (outcome.status != LineSearchStatus::ok) {
        result.status = outcome.status == LineSearchStatus::non_finite ? LBFGSStatus::non_finite
                        : detail::decrease_unrepresentable<Scalar>(value, slope, first_trial,
                                                                                  params.objective_precision)
                            ? LBFGSStatus::precision_limit
                            : LBFGSStatus::linesearch_failed;
        return result;
      }
      step = outcome.step;
      value_new = outcome.value;
    }

    history.push(result.x, x_new, grad, grad_new);
    std::swap(result.x, x_new);
    std::swap(grad, grad_new);
    value = value_new;
    error = detail::l2_norm<Scalar>(grad);
    if (detail::accept_iterate(result, iteration, value, error, step, params.tol, callback)) return result;
  }
  result.status = LBFGSStatus::max_iterations;
  return result;
}

// L-BFGS with the line search named by params.linesearch (the run-time choice of the CLI).
template <class Scalar, Objective<Scalar> F>
LBFGSResult<Scalar> lbfgs_minimize(F& f, std::span<const Scalar> x0, const LBFGSParams<Scalar>& params,
                                   const LBFGSCallback& callback = {}, const LBFGSStop& stop = {}) {
  if (params.linesearch == LineSearchKind::backtracking)
    return lbfgs_minimize_with<Scalar, LineSearchBacktracking<Scalar>>(f, x0, params, callback, stop);
  return lbfgs_minimize_with<Scalar, LineSearchZoom<Scalar>>(f, x0, params, callback, stop);
}

}  // namespace spmd::optim
