// SGD with momentum (optim/sgd.hpp) against a scalar loop of optax's definition.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "spmd/optim/sgd.hpp"

namespace {

TEST(CnnSgd, MomentumStepMatchesScalarLoopOverSeveralStepsAndSizes) {
  std::mt19937 rng(31);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const spmd::optim::SgdMomentum opt{0.1f, 0.9f};
  for (std::size_t n : {0u, 1u, 7u, 16u, 17u, 1000u, 4099u}) {
    std::vector<float> w(n), t(n), w_ref, t_ref;
    for (auto& v : w) v = normal(rng);
    for (auto& v : t) v = normal(rng);
    w_ref = w;
    t_ref = t;
    for (int step = 0; step < 3; ++step) {
      std::vector<float> g(n);
      for (auto& v : g) v = normal(rng);
      spmd::optim::sgd_momentum_step(w, t, g, opt);
      for (std::size_t i = 0; i < n; ++i) {
        // optax: trace = grad + momentum * trace; update = -lr * trace; params += update
        t_ref[i] = g[i] + opt.momentum * t_ref[i];
        w_ref[i] = w_ref[i] + (-opt.learning_rate * t_ref[i]);
      }
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_NEAR(t[i], t_ref[i], 1e-6f * (1 + std::abs(t_ref[i]))) << "n=" << n << " step " << step << " i=" << i;
        ASSERT_NEAR(w[i], w_ref[i], 1e-6f * (1 + std::abs(w_ref[i]))) << "n=" << n << " step " << step << " i=" << i;
      }
    }
  }
}

TEST(CnnSgd, FirstStepFromZeroTraceIsPlainSgdAndZeroMomentumForgets) {
  std::vector<float> w = {1.0f, -2.0f}, t = {0.0f, 0.0f};
  const std::vector<float> g = {0.5f, 4.0f};
  spmd::optim::sgd_momentum_step(w, t, g, {0.25f, 0.9f});
  EXPECT_FLOAT_EQ(w[0], 1.0f - 0.125f);
  EXPECT_FLOAT_EQ(w[1], -2.0f - 1.0f);
  EXPECT_FLOAT_EQ(t[1], 4.0f);
  spmd::optim::sgd_momentum_step(w, t, g, {0.25f, 0.0f});
  EXPECT_FLOAT_EQ(t[1], 4.0f);  // momentum 0: the trace is the gradient
  EXPECT_FLOAT_EQ(w[1], -4.0f);
}

TEST(CnnSgd, InvalidOptionsAndSizeMismatchAreErrors) {
  EXPECT_NO_THROW(spmd::optim::validate({0.1f, 0.9f}));
  EXPECT_NO_THROW(spmd::optim::validate({0.1f, 0.0f}));
  EXPECT_THROW(spmd::optim::validate({0.0f, 0.9f}), spmd::Error);
  EXPECT_THROW(spmd::optim::validate({-0.1f, 0.9f}), spmd::Error);
  EXPECT_THROW(spmd::optim::validate({0.1f, 1.0f}), spmd::Error);
  EXPECT_THROW(spmd::optim::validate({0.1f, -0.5f}), spmd::Error);
  EXPECT_THROW(spmd::optim::validate({std::nanf(""), 0.5f}), spmd::Error);
  std::vector<float> a(3), b(3), c(2);
  EXPECT_THROW(spmd::optim::sgd_momentum_step(a, b, c, {}), spmd::Error);
  EXPECT_THROW(spmd::optim::sgd_momentum_step(a, c, b, {}), spmd::Error);
}

}  // namespace
