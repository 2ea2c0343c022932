// The float64 logistic-regression kernel in plain scalar C++: the statement of the float64
// arithmetic in logreg_kernel_spec.hpp, executable. Used where the CPU lacks AVX2, as the
// oracle the vector variants must match bit for bit, and (its softmax) by every variant:
// the softmax is C exponentials per row against the F x C multiply-adds of the logits and
// the gradient each.
#pragma GCC optimize("fp-contract=off")  // only the explicit std::fma may fuse

#include <cmath>
#include <cstdint>

#include "spmd/models/logreg_kernel_spec.hpp"

namespace spmd::models::logreg_detail {
namespace {

void logits_portable64(const float* X, int rows, const TileShape& shape, const double* WT, double* Z, const float*,
                       int) {
  const int F = shape.features, Fpad = shape.padded_features;
  for (int i = 0; i < rows; ++i) {
    const float* x = X + static_cast<std::int64_t>(i) * F;
    for (int c = 0; c < shape.classes; ++c) {
      const double* w = WT + static_cast<std::int64_t>(c) * Fpad;
      double acc[kLanes64] = {};
      for (int k = 0; k < Fpad; k += kLanes64)
        for (int j = 0; j < kLanes64; ++j) {
          const int f = k + j;
          acc[j] = std::fma(f < F ? static_cast<double>(x[f]) : 0.0, w[f], acc[j]);
        }
      Z[i * shape.padded_classes + c] = tree8_sum(acc);
    }
  }
}

void softmax_portable64(const double* Z, const std::int32_t* labels, int rows, const TileShape& shape, double* D,
                        double& loss) {
  const int C = shape.classes;
  for (int i = 0; i < rows; ++i) {
    const double* z = Z + i * shape.padded_classes;
    double m = z[0];
    for (int c = 1; c < C; ++c) m = max_like_x86(m, z[c]);
    double s = 0.0;
    for (int c = 0; c < C; ++c) {
      const double e = exp64_spec(z[c] - m);
      D[c * kTileRows + i] = e;
      s = c == 0 ? e : s + e;
    }
    const double inverse = 1.0 / s;
    const int y = labels[i];
    for (int c = 0; c < C; ++c) {
      double& d = D[c * kTileRows + i];
      d = d * inverse - (c == y ? 1.0 : 0.0);
    }
    loss += (m + std::log(s)) - z[y];
  }
}

void gradient_portable64(const float* X, const double* D, int rows, const TileShape& shape, double* G, const float*,
                         int) {
  const int F = shape.features;
  for (int i = 0; i < rows; ++i) {
    const float* x = X + static_cast<std::int64_t>(i) * F;
    for (int c = 0; c < shape.classes; ++c) {
      const double d = D[c * kTileRows + i];
      double* g = G + static_cast<std::int64_t>(c) * shape.padded_features;
      for (int f = 0; f < F; ++f) g[f] = std::fma(d, static_cast<double>(x[f]), g[f]);
    }
  }
}

}  // namespace

KernelOps64 portable_ops64() { return {logits_portable64, softmax_portable64, gradient_portable64}; }

}  // namespace spmd::models::logreg_detail
