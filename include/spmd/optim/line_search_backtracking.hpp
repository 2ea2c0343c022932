#pragma once
// Backtracking line search: accept the first trial a = a0 * factor^k that satisfies the
// Armijo condition phi(a) <= phi(0) + c1 a phi'(0); non-finite trials count as rejected.
// Policy signature: see line_search.hpp.
#include <cstddef>
#include <span>

#include "spmd/optim/line_search.hpp"

namespace spmd::optim {

template <class Scalar>
class LineSearchBacktracking {
 public:
  explicit LineSearchBacktracking(std::size_t /*n*/) {}

  template <Objective<Scalar> F>
  LineSearchOutcome<Scalar> search(F& f, const LBFGSParams<Scalar>& params, std::span<const Scalar> x,
                                   Scalar value, std::span<const Scalar> direction, double slope,
                                   Scalar initial_step, std::span<Scalar> x_new,
                                   std::span<Scalar> grad_new) {
    LineSearchOutcome<Scalar> outcome;
    outcome.value = value;
    bool saw_finite = false;
    Scalar step = initial_step;
    while (outcome.evaluations < params.max_linesearch) {
      const auto trial = detail::evaluate_trial(f, x, direction, step, x_new, grad_new);
      ++outcome.evaluations;
      if (trial.finite) {
        saw_finite = true;
        if (detail::sufficient_decrease(trial, value, slope, params.c1)) {
          outcome.status = LineSearchStatus::ok;
          outcome.step = step;
          outcome.value = trial.value;
          return outcome;
        }
      }
      step *= params.backtrack_factor;
    }
    outcome.status = saw_finite ? LineSearchStatus::failed : LineSearchStatus::non_finite;
    return outcome;
  }
};

}  // namespace spmd::optim
