#pragma once
// The logistic-regression tests' plain double-precision reference: the same partials as
// models::logreg_chunk_partials (logreg.hpp), computed with double logits, std::exp and
// std::log, rows in order; no tiles, no float, no fixed exp. W is float or double; row i
// weighted by row_weights[i] when given.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "spmd/models/logreg.hpp"
#include "spmd/runtime/error.hpp"

namespace spmd::models {

// The kernel variants this CPU runs (portable always).
inline std::vector<LogregKernel> supported_logreg_kernels() {
  std::vector<LogregKernel> kernels;
  for (auto k : {LogregKernel::portable, LogregKernel::avx2, LogregKernel::avx512})
    if (logreg_kernel_supported(k)) kernels.push_back(k);
  return kernels;
}

template <class T>
void logreg_reference_partials(const float* X, const std::int32_t* labels, std::int64_t rows, int features,
                               int classes, const T* W, double* out, const double* row_weights = nullptr) {
  if (features < 1 || classes < 1 || rows < 0)
    throw Error("logreg reference: needs features >= 1, classes >= 1, rows >= 0");
  const std::size_t size = logreg_partials_size(features, classes);
  std::fill(out, out + size, 0.0);
  std::vector<double> z(static_cast<std::size_t>(classes));
  for (std::int64_t i = 0; i < rows; ++i) {
    const float* x = X + i * features;
    const int y = labels[i];
    if (y < 0 || y >= classes) throw Error("logreg reference: label " + std::to_string(y) + " out of range");
    for (int c = 0; c < classes; ++c) {
      double sum = 0.0;
      for (int f = 0; f < features; ++f)
        sum += static_cast<double>(x[f]) * static_cast<double>(W[static_cast<std::size_t>(f) * classes + c]);
      z[c] = sum;
    }
    const double m = *std::max_element(z.begin(), z.end());
    double s = 0.0;
    for (int c = 0; c < classes; ++c) s += std::exp(z[c] - m);
    const double w = row_weights == nullptr ? 1.0 : row_weights[i];
    out[0] += w * (m + std::log(s) - z[y]);
    for (int c = 0; c < classes; ++c) {
      const double delta = w * (std::exp(z[c] - m) / s - (c == y ? 1.0 : 0.0));
      for (int f = 0; f < features; ++f)
        out[1 + static_cast<std::size_t>(f) * classes + c] += static_cast<double>(x[f]) * delta;
    }
  }
}

}  // namespace spmd::models
