#pragma once
// The CNN tests' gradient check: every tensor's gradient against central finite differences
// of a double-precision reference loss, on the tensor's largest entry and a few random ones
// (expect_gradient_matches_finite_differences), or as one relative error per tensor
// (gradient_block_errors), over configurations that reach every layer path
// (gradient_path_configs).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cnn_reference.hpp"
#include "spmd/models/cnn_config.hpp"
#include "spmd/models/cnn_params.hpp"

namespace spmd::test {

// Central difference of loss(p) in p[at]. Truncation ~eps^2 and cancellation ~1e-16 / eps,
// both far below the float32 gradient's own rounding (~1e-6 relative).
template <class Loss>
double central_difference(std::vector<double>& p, std::size_t at, Loss& loss) {
  const double eps = 1e-6, saved = p[at];
  p[at] = saved + eps;
  const double up = loss(p);
  p[at] = saved - eps;
  const double down = loss(p);
  p[at] = saved;
  return (up - down) / (2 * eps);
}

// grad: the model's gradient; p: its parameters in double (perturbed and restored here);
// loss(p): the reference loss. Each tensor's gradient must be non-zero somewhere.
template <class Loss>
void expect_gradient_matches_finite_differences(const models::CnnParams& grad, std::vector<double>& p, Loss&& loss,
                                                std::mt19937& rng, int random_picks) {
  for (const auto& info : grad.layout().tensors()) {
    const auto g = grad.flat().subspan(info.offset, info.size);
    double rms = 0;
    for (float v : g) rms += static_cast<double>(v) * v;
    rms = std::sqrt(rms / static_cast<double>(g.size()));
    ASSERT_GT(rms, 0.0) << info.name << " has an all-zero gradient";
    std::vector<std::size_t> picks = {static_cast<std::size_t>(
        std::max_element(g.begin(), g.end(), [](float a, float c) { return std::abs(a) < std::abs(c); }) - g.begin())};
    std::uniform_int_distribution<std::size_t> any(0, info.size - 1);
    for (int i = 0; i < random_picks; ++i) picks.push_back(any(rng));
    for (std::size_t i : picks) {
      const double fd = central_difference(p, info.offset + i, loss);
      // 0.2% of the entry plus 0.1% of the tensor's RMS: float32 accumulation over a few
      // thousand terms stays well inside; a wrong index or a missing term does not.
      EXPECT_NEAR(g[i], fd, 2e-3 * std::abs(fd) + 1e-3 * rms) << info.name << "[" << i << "]";
    }
  }
}

struct BlockError {
  std::string tensor;
  double relative = 0;      // ||g - fd|| / ||fd|| over the checked entries
  std::size_t checked = 0;  // entries compared
};

// One relative error per tensor of grad against finite differences of loss at p: every
// entry of tensors with at most `max_entries`, else the largest `max_entries / 4` entries of
// the gradient and random others. A block error, rather than each entry's, is what a wrong
// scale or a missing mask changes by O(1) while float32 rounding keeps it near 1e-6; a
// tensor whose gradient is zero everywhere is reported as an error of 1.
template <class Loss>
std::vector<BlockError> gradient_block_errors(const models::CnnParams& grad, std::vector<double>& p, Loss&& loss,
                                              std::mt19937& rng, std::size_t max_entries) {
  std::vector<BlockError> out;
  for (const auto& info : grad.layout().tensors()) {
    const auto g = grad.flat().subspan(info.offset, info.size);
    std::vector<std::size_t> picks(info.size);
    std::iota(picks.begin(), picks.end(), std::size_t{0});
    if (info.size > max_entries) {
      const auto by_size = [&](std::size_t a, std::size_t b) { return std::abs(g[a]) > std::abs(g[b]); };
      const std::size_t largest = max_entries / 4;
      std::partial_sort(picks.begin(), picks.begin() + largest, picks.end(), by_size);
      std::shuffle(picks.begin() + largest, picks.end(), rng);
      picks.resize(max_entries);
    }
    double diff = 0, norm = 0, gnorm = 0;
    for (std::size_t i : picks) {
      const double fd = central_difference(p, info.offset + i, loss);
      diff += (g[i] - fd) * (g[i] - fd);
      norm += fd * fd;
      gnorm += static_cast<double>(g[i]) * g[i];
    }
    const double relative = norm > 0 ? std::sqrt(diff / norm) : (gnorm > 0 ? 1.0 : 0.0);
    out.push_back({info.name, gnorm > 0 ? relative : 1.0, picks.size()});
  }
  return out;
}

// Fails naming every tensor above the tolerance; prints the worst either way, so that the
// margin a run leaves is visible in the log.
inline void expect_block_errors_below(const std::vector<BlockError>& errors, double tolerance,
                                      const std::string& context) {
  const BlockError* worst = nullptr;
  for (const auto& e : errors) {
    EXPECT_LE(e.relative, tolerance) << context << ": " << e.tensor << " gradient off by " << e.relative
                                     << " relative over " << e.checked << " entries";
    if (worst == nullptr || e.relative > worst->relative) worst = &e;
  }
  if (worst != nullptr)
    std::printf("%s: worst relative gradient error %.2e (%s, %zu entries)\n", context.c_str(), worst->relative,
                worst->tensor.c_str(), worst->checked);
}

// Small configurations that between them reach every layer path of the CNN: 0, 1, 2 and 3
// hidden dense layers (the ReLU mask between hidden layers needs 2+), 1 and 3 conv layers
// (a conv layer fed by another's pooled output), odd sizes that each pool floors (5x5,
// 7x9, 13x13, 9x11), 1 and 3 input channels, and a one-channel first layer both by the
// direct kernel (32 outputs) and by im2col + GEMM (3 outputs).
struct PathConfig {
  const char* name;
  models::CnnConfig config;
};

inline std::vector<PathConfig> gradient_path_configs() {
  const auto make = make_config;
  return {
      {"conv1_dense0_5x5x1", make(5, 5, 1, {3}, {}, 3)},
      {"conv1_dense1_7x9x3", make(7, 9, 3, {4}, {6}, 3)},
      {"conv1_dense2_13x13x1_direct", make(13, 13, 1, {32}, {8, 6}, 4)},
      {"conv3_dense2_13x13x3", make(13, 13, 3, {4, 5, 6}, {7, 5}, 3)},
      {"conv3_dense3_9x11x1", make(9, 11, 1, {3, 4, 5}, {6, 5, 4}, 2)},
  };
}

}  // namespace spmd::test
