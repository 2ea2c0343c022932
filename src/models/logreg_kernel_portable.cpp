// The logistic-regression kernel in plain scalar C++: the statement of the arithmetic in
// logreg_kernel_spec.hpp, executable. Used where the CPU lacks AVX2 and as the oracle the
// vector variants must match bit for bit.
#pragma GCC optimize("fp-contract=off")  // only the explicit std::fma may fuse

#include <cmath>
#include <cstdint>

#include "spmd/models/logreg_kernel_spec.hpp"

namespace spmd::models::logreg_detail {
namespace {

void logits_portable(const float* X, int rows, const TileShape& shape, const float* WT, float* Z, const float*, int) {
  const int F = shape.features, Fpad = shape.padded_features;
  for (int i = 0; i < rows; ++i) {
    const float* x = X + static_cast<std::int64_t>(i) * F;
    for (int c = 0; c < shape.classes; ++c) {
      const float* w = WT + static_cast<std::int64_t>(c) * Fpad;
      float acc[kLanes] = {};
      for (int k = 0; k < Fpad; k += kLanes)
        for (int j = 0; j < kLanes; ++j) {
          const int f = k + j;
          acc[j] = std::fma(f < F ? x[f] : 0.0f, w[f], acc[j]);
        }
      Z[i * shape.padded_classes + c] = tree16_sum(acc);
    }
  }
}

void softmax_portable(const float* Z, const std::int32_t* labels, int rows, const TileShape& shape, float* D,
                      double& loss) {
  const int C = shape.classes;
  for (int i = 0; i < rows; ++i) {
    const float* z = Z + i * shape.padded_classes;
    float m = z[0];
    for (int c = 1; c < C; ++c) m = max_like_x86(m, z[c]);
    float s = 0.0f;
    for (int c = 0; c < C; ++c) {
      const float e = exp_spec(z[c] - m);
      D[c * kTileRows + i] = e;
      s = c == 0 ? e : s + e;
    }
    const float inverse = 1.0f / s;
    const int y = labels[i];
    for (int c = 0; c < C; ++c) {
      float& d = D[c * kTileRows + i];
      d = d * inverse - (c == y ? 1.0f : 0.0f);
    }
    loss += (static_cast<double>(m) + std::log(static_cast<double>(s))) - static_cast<double>(z[y]);
  }
}

void gradient_portable(const float* X, const float* D, int rows, const TileShape& shape, float* Gf,
                       const float* /*next_X*/, int /*next_rows*/) {
  const int F = shape.features;
  for (int i = 0; i < rows; ++i) {
    const float* x = X + static_cast<std::int64_t>(i) * F;
    for (int c = 0; c < shape.classes; ++c) {
      const float d = D[c * kTileRows + i];
      float* g = Gf + static_cast<std::int64_t>(c) * shape.padded_features;
      for (int f = 0; f < F; ++f) g[f] = std::fma(d, x[f], g[f]);
    }
  }
}

}  // namespace

KernelOps portable_ops() { return {logits_portable, softmax_portable, gradient_portable}; }

}  // namespace spmd::models::logreg_detail
