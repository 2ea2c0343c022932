// The logistic-regression kernels (float32 and float64) in plain scalar C++: the statement
// of the arithmetic in logreg_kernel_spec.hpp, executable, in T = float or double. Used
// where the CPU lacks AVX2, as the oracle the vector variants must match bit for bit, and
// (the float64 softmax) by every float64 variant: the softmax is C exponentials per row
// against the F x C multiply-adds of the logits and the gradient each.
#pragma GCC optimize("fp-contract=off")  // only the explicit std::fma may fuse

#include <cmath>
#include <cstdint>

#include "spmd/models/logreg_kernel_spec.hpp"

namespace spmd::models::logreg_detail {
namespace {

template <class T>
void logits_portable(const float* X, int rows, const TileShape& shape, const T* WT, T* Z, const float*, int) {
  constexpr int lanes = kLanesOf<T>;
  const int F = shape.features, Fpad = shape.padded_features;
  for (int i = 0; i < rows; ++i) {
    const float* x = X + static_cast<std::int64_t>(i) * F;
    for (int c = 0; c < shape.classes; ++c) {
      const T* w = WT + static_cast<std::int64_t>(c) * Fpad;
      T acc[lanes] = {};
      for (int k = 0; k < Fpad; k += lanes)
        for (int j = 0; j < lanes; ++j) {
          const int f = k + j;
          acc[j] = std::fma(f < F ? static_cast<T>(x[f]) : T(0), w[f], acc[j]);
        }
      Z[i * shape.padded_classes + c] = tree_sum<lanes>(acc);
    }
  }
}

template <class T>
void softmax_portable(const T* Z, const std::int32_t* labels, int rows, const TileShape& shape, T* D, double* row_loss) {
  const int C = shape.classes;
  for (int i = 0; i < rows; ++i) {
    const T* z = Z + i * shape.padded_classes;
    T m = z[0];
    for (int c = 1; c < C; ++c) m = max_like_x86(m, z[c]);
    T s = T(0);
    for (int c = 0; c < C; ++c) {
      const T e = exp_spec(z[c] - m);
      D[c * kTileRows + i] = e;
      s = c == 0 ? e : s + e;
    }
    const T inverse = T(1) / s;
    const int y = labels[i];
    for (int c = 0; c < C; ++c) {
      T& d = D[c * kTileRows + i];
      d = d * inverse - (c == y ? T(1) : T(0));
    }
    row_loss[i] = (static_cast<double>(m) + log_spec(static_cast<double>(s))) - static_cast<double>(z[y]);
  }
}

template <class T>
void gradient_portable(const float* X, const T* D, int rows, const TileShape& shape, T* Gf,
                       const float* /*next_X*/, int /*next_rows*/) {
  const int F = shape.features;
  for (int i = 0; i < rows; ++i) {
    const float* x = X + static_cast<std::int64_t>(i) * F;
    for (int c = 0; c < shape.classes; ++c) {
      const T d = D[c * kTileRows + i];
      T* g = Gf + static_cast<std::int64_t>(c) * shape.padded_features;
      for (int f = 0; f < F; ++f) g[f] = std::fma(d, static_cast<T>(x[f]), g[f]);
    }
  }
}

}  // namespace

KernelOps portable_ops() { return {logits_portable<float>, softmax_portable<float>, gradient_portable<float>}; }
KernelOps64 portable_ops64() { return {logits_portable<double>, softmax_portable<double>, gradient_portable<double>}; }

}  // namespace spmd::models::logreg_detail
