#pragma once
// SGD with momentum, as optax.sgd(learning_rate, momentum) (Flax's ensembling guide):
//   trace = momentum * trace + grad;  params -= learning_rate * trace
// over flat float spans (the CNN keeps parameters, gradients and the trace as one buffer
// each, see models/cnn_params.hpp). Header-only: a loop the compiler vectorises.
#include <cmath>
#include <cstddef>
#include <span>
#include <string>

#include "spmd/runtime/error.hpp"

namespace spmd::optim {

struct SgdMomentum {
  float learning_rate = 0.1f;  // > 0, finite
  float momentum = 0.9f;       // in [0, 1)
};

// Throws spmd::Error naming the option and the constraint it breaks.
inline void validate(const SgdMomentum& opt) {
  if (!(std::isfinite(opt.learning_rate) && opt.learning_rate > 0.0f))
    throw Error("SGD 'learning_rate' must be finite and > 0, got " + std::to_string(opt.learning_rate));
  if (!(opt.momentum >= 0.0f && opt.momentum < 1.0f))
    throw Error("SGD 'momentum' must satisfy 0 <= momentum < 1, got " + std::to_string(opt.momentum));
}

// In place on params and trace. All three spans must have the same size (spmd::Error
// otherwise); they must not overlap.
inline void sgd_momentum_step(std::span<float> params, std::span<float> trace, std::span<const float> grads,
                              const SgdMomentum& opt) {
  if (params.size() != trace.size() || params.size() != grads.size())
    throw Error("sgd_momentum_step: params, trace and grads must have the same size, got " +
                std::to_string(params.size()) + ", " + std::to_string(trace.size()) + ", " +
                std::to_string(grads.size()));
  float* __restrict w = params.data();
  float* __restrict t = trace.data();
  const float* __restrict g = grads.data();
  const float lr = opt.learning_rate;
  const float m = opt.momentum;
  const std::size_t n = params.size();
  for (std::size_t i = 0; i < n; ++i) {
    const float ti = m * t[i] + g[i];
    t[i] = ti;
    w[i] -= lr * ti;
  }
}

}  // namespace spmd::optim
