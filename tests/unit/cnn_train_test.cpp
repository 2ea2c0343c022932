// Short training runs of one ensemble member (the step of Flax's ensembling guide: batch 32, SGD lr 0.1,
// momentum 0.9, the (seed, epoch) shuffle): the loss on the training images must fall.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "spmd/data/h5_reader.hpp"
#include "spmd/models/cnn_cpu.hpp"
#include "spmd/models/cnn_init.hpp"

namespace {

using spmd::models::CnnParams;
using spmd::models::CnnWorkspace;

struct Examples {
  std::vector<float> images;  // [n, 28, 28, 1]
  std::vector<std::int32_t> labels;
  int count() const { return static_cast<int>(labels.size()); }
};

// Ten smooth random class templates plus pixel noise: learnable, but not in one step.
Examples synthetic_examples(int n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> noise(0.0f, 0.3f);
  std::uniform_real_distribution<float> phase(0.0f, 6.28f);
  std::vector<std::vector<float>> templates(10, std::vector<float>(784));
  for (auto& t : templates) {
    const float fx = 1 + phase(rng) / 2, fy = 1 + phase(rng) / 2, px = phase(rng), py = phase(rng);
    for (int y = 0; y < 28; ++y)
      for (int x = 0; x < 28; ++x)
        t[static_cast<std::size_t>(y * 28 + x)] = 0.5f + 0.5f * std::sin(fx * x / 4.0f + px) * std::cos(fy * y / 4.0f + py);
  }
  Examples ex;
  for (int i = 0; i < n; ++i) {
    const int label = i % 10;
    ex.labels.push_back(label);
    for (float v : templates[static_cast<std::size_t>(label)]) ex.images.push_back(v + noise(rng));
  }
  return ex;
}

double mean_loss(const CnnParams& p, const Examples& ex, CnnWorkspace& ws) {
  const auto sum = spmd::models::cnn_evaluate(p, ex.images.data(), ex.labels.data(), nullptr, ex.count(), nullptr, ws);
  return sum.loss_sum / static_cast<double>(sum.count);
}

// Trains member 0 of a 2-member ensemble for `epochs` epochs over ex; returns the losses on
// ex before and after.
std::pair<double, double> train(const Examples& ex, int epochs) {
  const int batch = 32;
  const auto config = spmd::models::CnnConfig::seed_default();
  CnnParams params(config), trace(config);
  spmd::models::cnn_init(params, spmd::models::ensemble_member_key(0, 0, 2));
  CnnWorkspace ws(config, ex.count(), batch);
  const double before = mean_loss(params, ex, ws);
  const spmd::optim::SgdMomentum opt{0.1f, 0.9f};
  std::vector<float> images(static_cast<std::size_t>(batch) * 784);
  std::vector<std::int32_t> labels(batch);
  const int steps = ex.count() / batch;  // the remainder is dropped, as in Flax's ensembling guide
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    const auto perm = spmd::models::epoch_permutation(0, epoch, ex.count());
    for (int s = 0; s < steps; ++s) {
      for (int r = 0; r < batch; ++r) {
        const auto src = static_cast<std::size_t>(perm[static_cast<std::size_t>(s * batch + r)]);
        std::copy_n(ex.images.begin() + static_cast<long>(src * 784), 784, images.begin() + r * 784);
        labels[static_cast<std::size_t>(r)] = ex.labels[src];
      }
      const float loss = spmd::models::cnn_train_step(params, trace, opt, images.data(), labels.data(), batch, nullptr, ws);
      EXPECT_TRUE(std::isfinite(loss)) << "epoch " << epoch << " step " << s;
    }
  }
  return {before, mean_loss(params, ex, ws)};
}

TEST(CnnTrain, SyntheticTemplatesLossFalls) {
  const Examples ex = synthetic_examples(200, 41);
  const auto [before, after] = train(ex, 4);
  EXPECT_NEAR(before, std::log(10.0), 0.5);
  EXPECT_LT(after, 0.5 * before) << "loss " << before << " -> " << after;
}

TEST(CnnTrain, FashionMnistSubsetLossFalls) {
  const std::string path = std::string(SPMD_TEST_DATA_DIR) + "/fashion/test.h5";
  if (!std::filesystem::exists(path))
    GTEST_SKIP() << path << " is missing (made by the data.prepare ctest fixture; run `ctest -R data.prepare`)";
  spmd::data::H5Reader reader(path);
  const auto pixels = reader.read<float>("images");
  const auto all_labels = reader.read<std::int32_t>("labels");
  Examples ex;
  const int n = 256;
  ASSERT_GE(static_cast<int>(all_labels.size()), n);
  for (std::size_t i = 0; i < static_cast<std::size_t>(n) * 784; ++i) ex.images.push_back(pixels[i] / 255.0f);
  ex.labels.assign(all_labels.begin(), all_labels.begin() + n);
  const auto [before, after] = train(ex, 5);
  EXPECT_NEAR(before, std::log(10.0), 0.5);
  EXPECT_LT(after, 0.6 * before) << "loss " << before << " -> " << after;
}

}  // namespace
