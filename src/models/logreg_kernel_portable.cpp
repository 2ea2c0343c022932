// The logistic-regression kernel in plain scalar C++: the statement of the arithmetic in
// logreg_kernel_spec.hpp, executable. Used where the CPU lacks AVX2 and as the oracle the
// vector variants must match bit for bit.
#pragma GCC optimize("fp-contract=off")  // only the explicit std::fma may fuse

#include <cmath>
#include <cstdint>
#include <limits>

#include "logreg_kernel_spec.hpp"

namespace spmd::models::logreg_detail {
namespace {

void logits_portable(const float* X, int rows, const TileShape& shape, const float* WT, float* Z) {
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
      Z[i * shape.padded_classes + c] = tree16(acc, [](float a, float b) { return a + b; });
    }
  }
}

void softmax_portable(const float* Z, const std::int32_t* labels, int rows, const TileShape& shape, float* D,
                      double& loss) {
  const int C = shape.classes, Cpad = shape.padded_classes;
  constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
  for (int i = 0; i < rows; ++i) {
    const float* z = Z + i * Cpad;
    float* d = D + i * Cpad;
    float lanes[kLanes];
    for (int j = 0; j < kLanes; ++j) lanes[j] = j < C ? z[j] : kMinusInf;
    for (int b = kLanes; b < Cpad; b += kLanes)
      for (int j = 0; j < kLanes; ++j) lanes[j] = max_like_x86(lanes[j], b + j < C ? z[b + j] : kMinusInf);
    const float m = tree16(lanes, max_like_x86);

    for (int c = 0; c < Cpad; ++c) d[c] = c < C ? exp_spec(z[c] - m) : 0.0f;
    for (int j = 0; j < kLanes; ++j) lanes[j] = d[j];
    for (int b = kLanes; b < Cpad; b += kLanes)
      for (int j = 0; j < kLanes; ++j) lanes[j] = lanes[j] + d[b + j];
    const float s = tree16(lanes, [](float a, float b) { return a + b; });

    const float inverse = 1.0f / s;
    for (int c = 0; c < Cpad; ++c) d[c] = d[c] * inverse;
    const int y = labels[i];
    d[y] = d[y] - 1.0f;
    loss += (static_cast<double>(m) + std::log(static_cast<double>(s))) - static_cast<double>(z[y]);
  }
}

void gradient_portable(const float* X, const float* D, int rows, const TileShape& shape, float* Gf) {
  const int F = shape.features;
  for (int i = 0; i < rows; ++i) {
    const float* x = X + static_cast<std::int64_t>(i) * F;
    const float* d = D + i * shape.padded_classes;
    for (int c = 0; c < shape.classes; ++c) {
      float* g = Gf + static_cast<std::int64_t>(c) * shape.padded_features;
      for (int f = 0; f < F; ++f) g[f] = std::fma(d[c], x[f], g[f]);
    }
  }
}

}  // namespace

KernelOps portable_ops() { return {logits_portable, softmax_portable, gradient_portable}; }

}  // namespace spmd::models::logreg_detail
