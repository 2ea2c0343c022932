// The CPU member engine (cnn_engine.hpp) is the free-function model with its state kept
// inside: the same steps give the same parameters, losses and probabilities.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "spmd/models/cnn_engine.hpp"
#include "spmd/models/cnn_init.hpp"

namespace {

using spmd::models::CnnParams;

TEST(CnnEngine, CpuEngineMatchesTheFreeFunctionsStepForStep) {
  const int batch = 7, eval_batch = 11;
  std::mt19937 rng(51);
  std::uniform_real_distribution<float> pixel(0.0f, 1.0f);
  std::vector<float> images(static_cast<std::size_t>(eval_batch) * 784);
  for (auto& v : images) v = pixel(rng);
  std::vector<std::int32_t> labels(eval_batch);
  for (int i = 0; i < eval_batch; ++i) labels[static_cast<std::size_t>(i)] = (i * 7) % 10;

  CnnParams params, trace;
  spmd::models::cnn_init(params, spmd::models::ensemble_member_key(8, 1, 3));
  auto engine = spmd::models::make_cnn_cpu_engine(eval_batch, batch);
  EXPECT_EQ(engine->max_batch(), eval_batch);
  EXPECT_EQ(engine->max_train_batch(), batch);
  EXPECT_GT(engine->device_bytes(), static_cast<std::int64_t>(2 * CnnParams::size() * sizeof(float)));
  EXPECT_NE(engine->describe().find("cpu"), std::string::npos);
  engine->set_state(params, trace);

  spmd::models::CnnWorkspace ws(eval_batch, batch);
  const spmd::optim::SgdMomentum opt{0.1f, 0.9f};
  for (int step = 0; step < 3; ++step) {
    std::vector<float> p_engine(static_cast<std::size_t>(batch) * 10), p_free(p_engine.size());
    const float l_engine = engine->train_step(images.data(), labels.data(), batch, opt, p_engine.data());
    const float l_free = spmd::models::cnn_train_step(params, trace, opt, images.data(), labels.data(), batch,
                                                      p_free.data(), ws);
    EXPECT_EQ(l_engine, l_free) << "step " << step;
    EXPECT_EQ(p_engine, p_free) << "step " << step;
  }
  CnnParams got_params, got_trace;
  engine->get_state(&got_params, nullptr);
  engine->get_state(nullptr, &got_trace);
  EXPECT_TRUE(std::equal(got_params.flat().begin(), got_params.flat().end(), params.flat().begin()));
  EXPECT_TRUE(std::equal(got_trace.flat().begin(), got_trace.flat().end(), trace.flat().begin()));
  EXPECT_FALSE(std::all_of(got_trace.flat().begin(), got_trace.flat().end(), [](float v) { return v == 0.0f; }));

  const std::vector<std::uint8_t> mask = {1, 1, 0, 1, 0, 1, 1, 1, 1, 0, 1};
  std::vector<float> pe(static_cast<std::size_t>(eval_batch) * 10), pf(pe.size());
  const auto se = engine->evaluate(images.data(), labels.data(), mask.data(), eval_batch, pe.data());
  const auto sf = spmd::models::cnn_evaluate(params, images.data(), labels.data(), mask.data(), eval_batch, pf.data(), ws);
  EXPECT_EQ(se.count, 8);
  EXPECT_EQ(se.count, sf.count);
  EXPECT_EQ(se.loss_sum, sf.loss_sum);
  EXPECT_EQ(pe, pf);
}

}  // namespace
