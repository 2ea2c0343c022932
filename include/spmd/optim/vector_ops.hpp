#pragma once
// The few vector operations the solvers need. Reductions accumulate in double whatever
// Scalar is (float histories stay usable for longer), in a fixed order: the results are the
// same bits on every rank given the same inputs (no threads, no data-dependent order).
#include <cmath>
#include <cstddef>
#include <span>

namespace spmd::optim::detail {

// Element i goes to partial sum i % 8; the eight are added pairwise at the end. A single
// running sum is one long chain of dependent additions (about 4 cycles each), and the
// two-loop recursion takes 20-odd dot products over W per evaluation.
template <class Scalar>
double dot(std::span<const Scalar> a, std::span<const Scalar> b) {
  constexpr std::size_t kLanes = 8;
  double lane[kLanes] = {};
  const std::size_t n = a.size();
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (std::size_t j = 0; j < kLanes; ++j) lane[j] += static_cast<double>(a[i + j]) * static_cast<double>(b[i + j]);
  for (std::size_t j = 0; i < n; ++i, ++j) lane[j] += static_cast<double>(a[i]) * static_cast<double>(b[i]);
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
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
