#pragma once
// Orthant-wise limited-memory quasi-Newton (OWL-QN; Andrew & Gao, "Scalable training of
// L1-regularized log-linear models", ICML 2007): L-BFGS for
//
//   F(x) = f(x) + l1 * sum_{i < penalised} |x_i|
//
// with f smooth (the objective's value_and_grad) and the L1 term on the first `penalised`
// entries only (the logistic regression's intercept row, stored last, is left out as sklearn
// and Spark leave it). F is not differentiable where a penalised x_i = 0; OWL-QN works with
// its pseudo-gradient
//
//   pg_i = g_i + l1 sign(x_i)                    x_i != 0
//        = g_i + l1 if g_i + l1 < 0, g_i - l1 if g_i - l1 > 0, else 0       x_i = 0
//
// (the steepest-descent direction of F is -pg), and per iteration:
//   d = -H pg by the two-loop recursion over pairs (s, y) of SMOOTH gradients (y = g_new -
//       g: the L1 term has no curvature), initial scaling as lbfgs.hpp;
//   d_i = 0 where d_i pg_i >= 0 (a penalised coordinate must move against its pseudo-
//       gradient), and if pg.d >= 0 even so the history is cleared and d = -pg;
//   the orthant xi_i = sign(x_i), or sign(-pg_i) where x_i = 0;
//   backtracking on the projected path x(a) = P(x + a d), P zeroing the penalised entries
//       that leave their orthant, until F(x(a)) <= F(x) + c1 pg.(x(a) - x) (trial 1, or
//       min(1, 1/||d||) with an empty history, times backtrack_factor per rejection, at most
//       max_linesearch evaluations);
//   error = ||pg||_2 at the new iterate; converged when error <= tol; precision_limit when
//       no trial lowers F by more than rounding (as lbfgs.hpp's line searches decide).
// A zero that pg leaves at zero stays exactly zero: the support of the solution is read
// off x. Every decision depends only on the objective's values and index-order sums in
// double (vector_ops.hpp), so ranks fed the same bits stay in step, as with lbfgs.hpp.
// Outcomes are LBFGSStatus values; l1 < 0, NaN or penalised > n throw spmd::Error.
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "spmd/optim/lbfgs.hpp"

namespace spmd::optim {

namespace detail {

template <class Scalar>
double l1_norm(std::span<const Scalar> x, std::size_t count) {
  double sum = 0;
  for (std::size_t i = 0; i < count; ++i) sum += std::abs(static_cast<double>(x[i]));
  return sum;
}

template <class Scalar>
void pseudo_gradient(std::span<const Scalar> x, std::span<const Scalar> g, double l1, std::size_t penalised,
                     std::span<Scalar> pg) {
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double gi = static_cast<double>(g[i]);
    double v = gi;
    if (i < penalised) {
      if (x[i] > 0)
        v = gi + l1;
      else if (x[i] < 0)
        v = gi - l1;
      else if (gi + l1 < 0)
        v = gi + l1;
      else if (gi - l1 > 0)
        v = gi - l1;
      else
        v = 0;
    }
    pg[i] = static_cast<Scalar>(v);
  }
}

}  // namespace detail

template <class Scalar, Objective<Scalar> F>
LBFGSResult<Scalar> owlqn_minimize(F& f, std::span<const Scalar> x0, const LBFGSParams<Scalar>& params, double l1,
                                   std::size_t penalised, const LBFGSCallback& callback = {},
                                   const LBFGSStop& stop = {}) {
  validate(params);
  const std::size_t n = x0.size();
  if (!(l1 >= 0) || !std::isfinite(l1))
    throw Error("OWL-QN: the L1 strength must be finite and >= 0 (got " + detail::describe(l1) + ")");
  if (penalised > n)
    throw Error("OWL-QN: " + std::to_string(penalised) + " penalised entries of a vector of " + std::to_string(n));
  LBFGSResult<Scalar> result;
  result.x.assign(x0.begin(), x0.end());
  std::vector<Scalar> grad(n), pg(n), x_new(n), grad_new(n), direction(n), orthant(n);
  const auto total = [&](Scalar smooth, std::span<const Scalar> x) {
    return static_cast<Scalar>(static_cast<double>(smooth) + l1 * detail::l1_norm<Scalar>(x, penalised));
  };

  Scalar value = total(f.value_and_grad(std::span<const Scalar>(result.x), std::span<Scalar>(grad)), result.x);
  result.evaluations = 1;
  result.value = value;
  if (!std::isfinite(value) || !detail::all_finite<Scalar>(grad)) {
    result.status = LBFGSStatus::non_finite;
    return result;
  }
  detail::pseudo_gradient<Scalar>(result.x, grad, l1, penalised, pg);
  double error = detail::l2_norm<Scalar>(pg);
  result.error = static_cast<Scalar>(error);
  if (error <= static_cast<double>(params.tol)) {
    result.status = LBFGSStatus::converged;
    return result;
  }

  detail::LBFGSHistory<Scalar> history(params.history, n);
  const auto constrained_direction = [&] {
    history.direction(pg, direction);
    for (std::size_t i = 0; i < penalised; ++i)
      if (static_cast<double>(direction[i]) * static_cast<double>(pg[i]) >= 0) direction[i] = 0;
    return detail::dot<Scalar>(pg, direction);
  };
  for (int iteration = 1; iteration <= params.maxiter; ++iteration) {
    if (stop && stop()) {
      result.status = LBFGSStatus::stopped;
      return result;
    }
    double slope = constrained_direction();
    if (!(slope < 0) || !std::isfinite(slope)) {
      history.clear();
      slope = constrained_direction();
    }
    if (!(slope < 0)) {
      result.status = LBFGSStatus::linesearch_failed;
      return result;
    }
    for (std::size_t i = 0; i < n; ++i)
      orthant[i] = result.x[i] > 0 ? Scalar(1) : result.x[i] < 0 ? Scalar(-1) : pg[i] < 0 ? Scalar(1) : pg[i] > 0 ? Scalar(-1) : Scalar(0);

    Scalar step = params.initial_step;
    if (history.empty()) {
      const double inverse_norm = 1.0 / detail::l2_norm<Scalar>(direction);
      step = static_cast<Scalar>(std::min(static_cast<double>(params.initial_step), inverse_norm));
      if (!(step > 0)) step = std::numeric_limits<Scalar>::min();
    }
    const Scalar first_trial = step;
    bool accepted = false, non_finite = false;
    Scalar value_new = value;
    for (int trial = 0; trial < params.max_linesearch; ++trial) {
      for (std::size_t i = 0; i < n; ++i) {
        Scalar v = result.x[i] + step * direction[i];
        if (i < penalised && v * orthant[i] <= 0) v = 0;
        x_new[i] = v;
      }
      value_new = total(f.value_and_grad(std::span<const Scalar>(x_new), std::span<Scalar>(grad_new)), x_new);
      ++result.evaluations;
      if (std::isfinite(value_new) && detail::all_finite<Scalar>(grad_new)) {
        double decrease = 0;  // pg.(x_new - x), in index order
        for (std::size_t i = 0; i < n; ++i)
          decrease += static_cast<double>(pg[i]) * (static_cast<double>(x_new[i]) - static_cast<double>(result.x[i]));
        if (static_cast<double>(value_new) <= static_cast<double>(value) + static_cast<double>(params.c1) * decrease) {
          accepted = true;
          break;
        }
        non_finite = false;
      } else {
        non_finite = true;
      }
      step *= params.backtrack_factor;
    }
    if (!accepted) {
      result.status = non_finite ? LBFGSStatus::non_finite
                      : detail::decrease_unrepresentable<Scalar>(value, slope, first_trial, params.objective_precision)
                          ? LBFGSStatus::precision_limit
                          : LBFGSStatus::linesearch_failed;
      return result;
    }
    // Near the minimum F's value stops resolving the progress (a step is accepted on equality)
    // while the pseudo-gradient still shrinks: go on while either improves, and stop at the
    // first step that improves neither (else tiny steps would creep on until maxiter).
    detail::pseudo_gradient<Scalar>(x_new, grad_new, l1, penalised, pg);
    const double error_new = detail::l2_norm<Scalar>(pg);
    if (!(value_new < value) && !(error_new < error)) {
      result.status = LBFGSStatus::precision_limit;
      return result;
    }
    history.push(result.x, x_new, grad, grad_new);
    std::swap(result.x, x_new);
    std::swap(grad, grad_new);
    value = value_new;
    error = error_new;
    if (detail::accept_iterate(result, iteration, value, error, step, params.tol, callback)) return result;
  }
  result.status = LBFGSStatus::max_iterations;
  return result;
}

}  // namespace spmd::optim
