// The CNN ensemble member on a GPU against the CPU member: the same initial state, the same
// batches; probabilities, losses, parameters and momentum must agree to float rounding. The
// default geometry throughout, and two others (multi-channel input, widths that are not
// multiples of 16, odd sizes that the pooling floors) for forward and training steps.
// Every layer path's gradient against finite differences of the double-precision reference,
// for the configurations the CPU's cnn_gradient_paths_test.cpp checks.
// Skipped visibly where no GPU is visible (the no-GPU error is in cuda_logreg_test.cpp).
#include <gtest/gtest.h>

#include "gpu_test_support.hpp"

#include "cnn_gradient_check.hpp"
#include "cnn_reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "spmd/backends/cuda/step_graph.hpp"
#include "spmd/models/cnn_init.hpp"
#include "spmd/models/cnn_params.hpp"
#include "spmd/models/device_models.hpp"
#include "spmd/runtime/devices.hpp"
#include "spmd/runtime/error.hpp"

namespace {

using spmd::models::CnnConfig;
using spmd::models::CnnParams;

const CnnConfig kDefault = CnnConfig::seed_default();

spmd::runtime::DeviceInfo cpu_device() {
  spmd::runtime::DeviceInfo d;
  d.name = "cpu:0";
  return d;
}

struct Batch {
  std::vector<float> images;  // [n, H * W * C] in [0, 1]
  std::vector<std::int32_t> labels;
};

Batch random_batch(int n, std::uint32_t seed, const CnnConfig& config = kDefault) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> pixel(0.0f, 1.0f);
  std::uniform_int_distribution<std::int32_t> label(0, config.classes - 1);
  Batch b;
  b.images.resize(static_cast<std::size_t>(n) * static_cast<std::size_t>(config.input_size()));
  for (float& v : b.images) v = pixel(rng);
  b.labels.resize(static_cast<std::size_t>(n));
  for (auto& v : b.labels) v = label(rng);
  return b;
}

void expect_probs_near(const std::vector<float>& gpu, const std::vector<float>& cpu, int rows, const std::string& context,
                       int classes = 10) {
  for (int r = 0; r < rows; ++r) {
    double sum = 0;
    for (int j = 0; j < classes; ++j) {
      const std::size_t i = static_cast<std::size_t>(r) * static_cast<std::size_t>(classes) + static_cast<std::size_t>(j);
      ASSERT_NEAR(gpu[i], cpu[i], 1e-4) << context << " row " << r << " class " << j;
      sum += gpu[i];
    }
    ASSERT_NEAR(sum, 1.0, 1e-5) << context << " row " << r;
  }
}

double max_abs(std::span<const float> s) {
  double m = 0;
  for (float v : s) m = std::max(m, static_cast<double>(std::abs(v)));
  return m;
}

// Each tensor of a against b, to 1e-3 of `scale`'s largest entry in that tensor (the
// size of what the steps changed), so that a wrong gradient anywhere shows.
void expect_state_near(const CnnParams& a, const CnnParams& b, const CnnParams& scale, const std::string& context) {
  const auto& tensors = a.layout().tensors();
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    const auto& info = tensors[t];
    const auto x = a.tensor(t), y = b.tensor(t);
    const double tolerance = 1e-3 * max_abs(scale.tensor(t)) + 1e-7;
    double worst = 0;
    std::size_t at = 0;
    for (std::size_t i = 0; i < x.size(); ++i)
      if (std::abs(static_cast<double>(x[i]) - y[i]) > worst) worst = std::abs(static_cast<double>(x[i]) - y[i]), at = i;
    EXPECT_LE(worst, tolerance) << context << " " << info.name << " entry " << at << ": " << x[at] << " vs " << y[at];
  }
}

TEST(CudaCnnMember, ForwardMatchesCpuIncludingTiledBatches) {
  SKIP_WITHOUT_GPU();
  CnnParams params(kDefault), zero(kDefault);
  spmd::models::cnn_init(params, spmd::models::ensemble_member_key(3, 1, 4));
  zero.set_zero();
  // 600 rows is more than one 512-row forward pass: the tiles must join seamlessly.
  const int max_batch = 600;
  auto cpu = spmd::models::make_cnn_member(cpu_device(), kDefault, max_batch, 0);
  cpu->set_state(params, zero);
  for (int max_train : {0, 32}) {
    auto gpu = spmd::models::make_cnn_member(spmd::test::cuda_device(), kDefault, max_batch, max_train);
    gpu->set_state(params, zero);
    for (int n : {1, 7, 64, 513, 600}) {
      const Batch b = random_batch(n, static_cast<std::uint32_t>(n));
      std::vector<float> want(static_cast<std::size_t>(n) * 10), got(want.size(), -1.0f);
      cpu->forward(b.images.data(), n, want.data());
      gpu->forward(b.images.data(), n, got.data());
      expect_probs_near(got, want, n, "forward n=" + std::to_string(n) + " max_train=" + std::to_string(max_train));
    }
    std::vector<float> unused(10, -1.0f);
    gpu->forward(nullptr, 0, unused.data());
    EXPECT_EQ(unused, std::vector<float>(10, -1.0f));
    EXPECT_THROW(gpu->forward(nullptr, max_batch + 1, unused.data()), spmd::Error);
  }
}

// Five training steps on CPU and GPU members of `config` from the same state.
void expect_train_steps_match_cpu(const CnnConfig& config) {
  const int classes = config.classes;
  CnnParams init(config), zero(config);
  spmd::models::cnn_init(init, spmd::models::ensemble_member_key(0, 0, 2));
  zero.set_zero();
  const int max_batch = 64, max_train = 32;
  auto cpu = spmd::models::make_cnn_member(cpu_device(), config, max_batch, max_train);
  auto gpu = spmd::models::make_cnn_member(spmd::test::cuda_device(), config, max_batch, max_train);
  cpu->set_state(init, zero);
  gpu->set_state(init, zero);
  const spmd::optim::SgdMomentum sgd{0.1f, 0.9f};
  CnnParams cpu_params(config), cpu_trace(config), gpu_params(config), gpu_trace(config), change(config);
  // Full batches, a short one, an empty one (only the momentum moves), a full one.
  const int sizes[] = {32, 32, 17, 0, 32};
  for (int step = 0; step < 5; ++step) {
    const int n = sizes[step];
    const Batch b = random_batch(std::max(n, 1), 100 + static_cast<std::uint32_t>(step), config);
    std::vector<float> want(static_cast<std::size_t>(std::max(n, 1) * classes)), got(want.size(), -1.0f);
    const float cpu_loss = cpu->train_step(b.images.data(), b.labels.data(), n, sgd, want.data());
    const float gpu_loss = gpu->train_step(b.images.data(), b.labels.data(), n, sgd, got.data());
    const std::string context =
        config.describe() + " step " + std::to_string(step) + " (batch " + std::to_string(n) + ")";
    EXPECT_NEAR(gpu_loss, cpu_loss, 1e-4 * std::max(1.0f, cpu_loss)) << context;
    if (n == 0) {
      EXPECT_EQ(gpu_loss, 0.0f) << context;
    }
    expect_probs_near(got, want, n, context, classes);
    cpu->get_state(cpu_params, cpu_trace);
    gpu->get_state(gpu_params, gpu_trace);
    for (std::size_t i = 0; i < init.size(); ++i) change.data()[i] = cpu_params.data()[i] - init.data()[i];
    expect_state_near(gpu_params, cpu_params, change, context + " params");
    expect_state_near(gpu_trace, cpu_trace, cpu_trace, context + " momentum");
  }
  // Training moved every tensor (a gradient that stayed zero would pass the checks above).
  const auto& tensors = gpu_trace.layout().tensors();
  for (std::size_t t = 0; t < tensors.size(); ++t)
    EXPECT_GT(max_abs(gpu_trace.tensor(t)), 0.0) << config.describe() << " " << tensors[t].name;
}

TEST(CudaCnnMember, TrainStepsMatchCpu) {
  SKIP_WITHOUT_GPU();
  expect_train_steps_match_cpu(kDefault);
}

// The geometries of the CPU's non-default test (cnn_geometry_test.cpp).
std::vector<CnnConfig> other_configs() {
  CnnConfig rgb;
  rgb.height = 32, rgb.width = 32, rgb.channels = 3, rgb.conv_features = {8, 16}, rgb.dense_features = {32};
  rgb.classes = 5;
  CnnConfig odd;
  odd.height = 30, odd.width = 26, odd.channels = 2, odd.conv_features = {5, 7}, odd.dense_features = {12};
  odd.classes = 3;
  return {rgb, odd};
}

TEST(CudaCnnMember, OtherGeometriesMatchCpu) {
  SKIP_WITHOUT_GPU();
  for (const CnnConfig& config : other_configs()) {
    CnnParams params(config), zero(config);
    spmd::models::cnn_init(params, spmd::models::ensemble_member_key(7, 0, 1));
    auto cpu = spmd::models::make_cnn_member(cpu_device(), config, 40, 0);
    auto gpu = spmd::models::make_cnn_member(spmd::test::cuda_device(), config, 40, 0);
    cpu->set_state(params, zero);
    gpu->set_state(params, zero);
    const Batch b = random_batch(40, 9, config);
    std::vector<float> want(static_cast<std::size_t>(40 * config.classes)), got(want.size(), -1.0f);
    cpu->forward(b.images.data(), 40, want.data());
    gpu->forward(b.images.data(), 40, got.data());
    expect_probs_near(got, want, 40, config.describe() + " forward", config.classes);
    expect_train_steps_match_cpu(config);
  }
}

// Training steps replayed from CUDA graphs (cuda/step_graph.hpp) against the same steps run
// eagerly (SPMD_CUDA_GRAPHS=0 when the member is made): the same kernels with the same
// arguments, so the same bits. The batch sizes and the one-off learning rate walk the
// cache's rules: a key's first step eager, its second captured, the rest replayed.
TEST(CudaCnnMember, GraphReplayedStepsGiveTheBitsOfEagerSteps) {
  SKIP_WITHOUT_GPU();
  CnnParams init(kDefault), zero(kDefault);
  spmd::models::cnn_init(init, spmd::models::ensemble_member_key(1, 0, 2));
  zero.set_zero();
  ASSERT_EQ(setenv("SPMD_CUDA_GRAPHS", "0", 1), 0);
  auto eager = spmd::models::make_cnn_member(spmd::test::cuda_device(), kDefault, 32, 32);
  ASSERT_EQ(unsetenv("SPMD_CUDA_GRAPHS"), 0);
  auto graphed = spmd::models::make_cnn_member(spmd::test::cuda_device(), kDefault, 32, 32);
  eager->set_state(init, zero);
  graphed->set_state(init, zero);
  const auto before = spmd::backends::cuda::step_graph_counts();
  const int sizes[] = {32, 32, 32, 17, 32, 17, 17, 32, 32};
  const float rates[] = {0.1f, 0.1f, 0.1f, 0.1f, 0.1f, 0.1f, 0.1f, 0.1f, 0.05f};
  for (int step = 0; step < 9; ++step) {
    const int n = sizes[step];
    const Batch b = random_batch(n, 300 + static_cast<std::uint32_t>(step));
    std::vector<float> want(static_cast<std::size_t>(n) * 10), got(want.size(), -1.0f);
    const spmd::optim::SgdMomentum sgd{rates[step], 0.9f};
    const float want_loss = eager->train_step(b.images.data(), b.labels.data(), n, sgd, want.data());
    const float got_loss = graphed->train_step(b.images.data(), b.labels.data(), n, sgd, got.data());
    EXPECT_EQ(std::memcmp(&got_loss, &want_loss, sizeof(float)), 0) << "step " << step << ": " << got_loss << " vs " << want_loss;
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0) << "probabilities of step " << step;
  }
  CnnParams p_eager(kDefault), t_eager(kDefault), p_graph(kDefault), t_graph(kDefault);
  eager->get_state(p_eager, t_eager);
  graphed->get_state(p_graph, t_graph);
  EXPECT_EQ(std::memcmp(p_graph.data(), p_eager.data(), p_eager.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(t_graph.data(), t_eager.data(), t_eager.size() * sizeof(float)), 0);
  // The graphed member captured its two batch sizes and replayed six steps (the capturing
  // launches included); the learning rate seen once ran eagerly, as did the eager member.
  const auto after = spmd::backends::cuda::step_graph_counts();
  EXPECT_EQ(after.failed - before.failed, 0);
  EXPECT_EQ(after.captured - before.captured, 2);
  EXPECT_EQ(after.replayed - before.replayed, 6);
  EXPECT_EQ(after.eager - before.eager, 3 + 9);
}

TEST(CudaCnnMember, StateRoundTripsBitwise) {
  SKIP_WITHOUT_GPU();
  CnnParams params(kDefault), trace(kDefault), back_params(kDefault), back_trace(kDefault);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : params.flat()) v = normal(rng);
  for (float& v : trace.flat()) v = normal(rng);
  auto gpu = spmd::models::make_cnn_member(spmd::test::cuda_device(), kDefault, 4, 4);
  gpu->set_state(params, trace);
  gpu->get_state(back_params, back_trace);
  EXPECT_EQ(std::memcmp(params.data(), back_params.data(), params.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(trace.data(), back_trace.data(), trace.size() * sizeof(float)), 0);
  // State of another geometry is refused, not copied.
  CnnParams other(other_configs().front());
  EXPECT_THROW(gpu->set_state(other, other), spmd::Error);
}

TEST(CudaCnnMember, RefusesBadCalls) {
  SKIP_WITHOUT_GPU();
  EXPECT_THROW(spmd::models::make_cnn_member(spmd::test::cuda_device(), kDefault, 4, 8), spmd::Error);  // train batch > max batch
  EXPECT_THROW(spmd::models::make_cnn_member(spmd::test::cuda_device(), kDefault, -1, 0), spmd::Error);
  const spmd::optim::SgdMomentum sgd{0.1f, 0.9f};
  Batch b = random_batch(8, 1);
  auto forward_only = spmd::models::make_cnn_member(spmd::test::cuda_device(), kDefault, 8, 0);
  EXPECT_THROW(forward_only->train_step(b.images.data(), b.labels.data(), 1, sgd, nullptr), spmd::Error);
  auto member = spmd::models::make_cnn_member(spmd::test::cuda_device(), kDefault, 8, 4);
  EXPECT_THROW(member->train_step(b.images.data(), b.labels.data(), 5, sgd, nullptr), spmd::Error);
  b.labels[2] = 10;
  try {
    member->train_step(b.images.data(), b.labels.data(), 4, sgd, nullptr);
    FAIL() << "label 10 accepted";
  } catch (const spmd::Error& e) {
    EXPECT_NE(std::string(e.what()).find("batch row 2"), std::string::npos) << e.what();
  }
}

// The gradient a GPU train step applies, read back as the momentum trace after one step from
// a zero trace (trace' = m * 0 + g), against finite differences of the double-precision
// reference: one relative error per tensor, 1e-3 at most (float32 rounding leaves ~1e-6; a
// wrong pool scale or a missing ReLU mask O(0.1), as cnn_gradient_paths_test.cpp explains).
TEST(CudaCnnMember, TrainStepAppliesTheGradientOfTheReferenceOnEveryLayerPath) {
  SKIP_WITHOUT_GPU();
  const int batch = 4;
  for (const auto& path : spmd::test::gradient_path_configs()) {
    const CnnConfig& config = path.config;
    std::mt19937 rng(41);
    const spmd::test::Batch b = spmd::test::random_batch(config, batch, rng);
    const CnnParams params = spmd::test::test_params(config, 6);
    CnnParams zero(config), after(config), trace(config);
    zero.set_zero();
    auto gpu = spmd::models::make_cnn_member(spmd::test::cuda_device(), config, batch, batch);
    gpu->set_state(params, zero);
    gpu->train_step(b.images.data(), b.labels.data(), batch, spmd::optim::SgdMomentum{0.05f, 0.9f}, nullptr);
    gpu->get_state(after, trace);
    const spmd::test::Reference ref(config, params.layout());
    std::vector<double> p = spmd::test::to_double(params);
    std::mt19937 picks(42);
    const auto errors = spmd::test::gradient_block_errors(
        trace, p, [&](const std::vector<double>& q) { return ref.loss(q, b.images, b.labels); }, picks, 64);
    spmd::test::expect_block_errors_below(errors, 1e-3, std::string("gpu train_step ") + path.name);
  }
}

}  // namespace
