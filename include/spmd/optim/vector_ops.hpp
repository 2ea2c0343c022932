#pragma once
// The few vector operations the solvers need. Reductions accumulate in double, in index
// order, whatever Scalar is: float histories stay usable for longer, and the results are
// the same bits on every rank given the same inputs (no threads, no reordering).
#include <cmath>
#include <cstddef>
#include <span>

namespace spmd::optim::detail {

template <class Scalar>
double dot(std::span<const Scalar> a, std::span<const Scalar> b) {
  double sum = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += static_cast<double>(a[i]) * static_cast<double>(b[i]);
  return sum;
}

template <class Scalar>
double l2_norm(std::span<const Scalar> a) {
  return std::sqrt(dot(a, a));
}

template <class Scalar>
bool all_finite(std::span<const Scalar> a) {
  for (const Scalar v : a)
    if (!std::isfinite(v)) return false;
  return true;
}

// out = x + step * direction, element by element in Scalar.
template <class Scalar>
void step_along(std::span<const Scalar> x, Scalar step, std::span<const Scalar> direction,
                std::span<Scalar> out) {
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = x[i] + step * direction[i];
}

}  // namespace spmd::optim::detail
