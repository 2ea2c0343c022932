#pragma once
// What every line-search policy shares. A policy is a class with one fixed signature (the
// LBFGSpp style), so the solver is written once:
//
//   explicit Policy(std::size_t n);   // n = number of parameters; scratch allocated here once
//   template <Objective<Scalar> F>
//   LineSearchOutcome<Scalar> search(F& f, const LBFGSParams<Scalar>& params,
//                                    std::span<const Scalar> x, Scalar value,
//                                    std::span<const Scalar> direction, double slope,
//                                    Scalar initial_step,
//                                    std::span<Scalar> x_new, std::span<Scalar> grad_new);
//
// It searches phi(a) = f(x + a*direction) for a > 0, given value = phi(0) and
// slope = phi'(0) = grad(x).direction < 0. On status ok, x_new and grad_new hold the accepted
// point and its gradient, and the outcome its step and value. A trial whose value or any
// gradient entry is NaN/Inf is never accepted: it is treated as "too far" and the step
// shrinks. Every decision compares values the objective returned (identical on all ranks).
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>

#include "spmd/optim/lbfgs_params.hpp"
#include "spmd/optim/objective.hpp"
#include "spmd/optim/vector_ops.hpp"

namespace spmd::optim {

enum class LineSearchStatus {
  ok,          // a step was accepted (x_new, grad_new filled)
  failed,      // finite trials only, none acceptable within max_linesearch evaluations
  non_finite,  // every trial gave a non-finite value or gradient
};

template <class Scalar>
struct LineSearchOutcome {
  LineSearchStatus status = LineSearchStatus::failed;
  Scalar step = Scalar(0);   // accepted step (0 when not ok)
  Scalar value = Scalar(0);  // phi(step) (phi(0) when not ok)
  int evaluations = 0;       // objective evaluations spent
};

namespace detail {

// One evaluated point of phi.
template <class Scalar>
struct TrialPoint {
  Scalar step = Scalar(0);
  Scalar value = Scalar(0);
  double slope = 0.0;  // phi'(step) = grad(x + step*d).d; NaN when not finite
  bool finite = true;
};

// Evaluates f at x + step*direction into x_new / grad_new.
template <class Scalar, class F>
TrialPoint<Scalar> evaluate_trial(F& f, std::span<const Scalar> x, std::span<const Scalar> direction,
                                  Scalar step, std::span<Scalar> x_new, std::span<Scalar> grad_new) {
  step_along(x, step, direction, x_new);
  TrialPoint<Scalar> t;
  t.step = step;
  t.value = f.value_and_grad(std::span<const Scalar>(x_new), grad_new);
  t.finite = std::isfinite(t.value) && all_finite(std::span<const Scalar>(grad_new));
  t.slope = t.finite ? dot(std::span<const Scalar>(grad_new), direction)
                     : std::numeric_limits<double>::quiet_NaN();
  return t;
}

// Armijo: phi(a) <= phi(0) + c1 * a * phi'(0), evaluated in double.
template <class Scalar>
bool sufficient_decrease(const TrialPoint<Scalar>& t, Scalar value0, double slope0, Scalar c1) {
  return static_cast<double>(t.value) <=
         static_cast<double>(value0) + static_cast<double>(c1) * static_cast<double>(t.step) * slope0;
}

}  // namespace detail
}  // namespace spmd::optim
