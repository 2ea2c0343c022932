#pragma once
// The CNN tests' gradient check: every tensor's gradient against central finite differences
// of a double-precision reference loss, on the tensor's largest entry and a few random ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "spmd/models/cnn_params.hpp"

namespace spmd::test {

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
      const std::size_t at = info.offset + i;
      const double saved = p[at];
      // Truncation ~eps^2 and cancellation ~1e-16 / eps, both far below the float32
      // gradient's own rounding (~1e-6 relative).
      const double eps = 1e-6;
      p[at] = saved + eps;
      const double up = loss(p);
      p[at] = saved - eps;
      const double down = loss(p);
      p[at] = saved;
      const double fd = (up - down) / (2 * eps);
      // 0.2% of the entry plus 0.1% of the tensor's RMS: float32 accumulation over a few
      // thousand terms stays well inside; a wrong index or a missing term does not.
      EXPECT_NEAR(g[i], fd, 2e-3 * std::abs(fd) + 1e-3 * rms) << info.name << "[" << i << "]";
    }
  }
}

}  // namespace spmd::test
