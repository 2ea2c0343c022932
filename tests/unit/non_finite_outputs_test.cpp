// Rows whose scores hold a NaN or an infinity (models/classifier.hpp, non_finite_rows): each
// CPU predictor counts exactly those rows, call after call, and still gives every row a class;
// rows beside them are unaffected (every row is predicted on its own). The eval report and the
// ONNX predictors (a free and a fixed batch size) are checked end to end by
// tests/cli/eval_predictions.sh.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "spmd/models/argmax.hpp"
#include "spmd/models/classifier.hpp"
#include "spmd/models/cnn_classifier.hpp"
#include "spmd/models/cnn_config.hpp"
#include "spmd/models/cnn_params.hpp"
#include "spmd/models/device_models.hpp"

// Its own namespace: the unity build compiles this file with others whose helpers share names.
namespace non_finite_outputs_test {

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

spmd::runtime::DeviceInfo cpu_device() {
  spmd::runtime::DeviceInfo d;
  d.name = "cpu:0";
  return d;
}

TEST(NonFiniteOutputs, ArgmaxSaysWhetherEveryScoreWasFinite) {
  bool finite = false;
  const float plain[] = {1.0f, 3.0f, 2.0f};
  EXPECT_EQ(spmd::models::argmax(plain, 3, finite), 1);
  EXPECT_TRUE(finite);
  const float nan_inside[] = {1.0f, kNaN, 2.0f};
  EXPECT_EQ(spmd::models::argmax(nan_inside, 3, finite), 2);  // the class argmax() gives
  EXPECT_FALSE(finite);
  const float nan_first[] = {kNaN, 5.0f};
  EXPECT_EQ(spmd::models::argmax(nan_first, 2, finite), 0);
  EXPECT_FALSE(finite);
  const float inf_last[] = {1.0f, -kInf};
  EXPECT_EQ(spmd::models::argmax(inf_last, 2, finite), 0);
  EXPECT_FALSE(finite);
  const double one[] = {7.0};
  EXPECT_EQ(spmd::models::argmax(one, 1, finite), 0);
  EXPECT_TRUE(finite);
}

TEST(NonFiniteOutputs, LogregPredictorCountsTheRowsThatOverflowOrHoldNaN) {
  constexpr int F = 37, C = 4, rows = 5;  // F not a multiple of the kernels' lanes
  spmd::models::LogregParameters p;
  p.features = F;
  p.classes = C;
  p.W.assign(F * C, 0.5f);
  auto predictor = spmd::models::make_logreg_predictor(cpu_device(), p, rows);
  std::vector<float> X(rows * F, 0.25f);
  for (int f = 0; f < F; ++f) X[1 * F + f] = 3e38f;  // every logit overflows to +inf
  X[3 * F + 17] = kNaN;                             // one NaN feature: every logit NaN
  std::vector<std::int32_t> classes(rows, -1);
  std::vector<float> probs(rows * C);
  predictor->predict(X.data(), rows, classes.data(), probs.data());
  EXPECT_EQ(predictor->non_finite_rows(), 2);
  for (int r : {0, 2, 4})
    for (int c = 0; c < C; ++c) EXPECT_TRUE(std::isfinite(probs[r * C + c])) << "row " << r;
  for (int r = 0; r < rows; ++r) EXPECT_GE(classes[r], 0);
  predictor->predict(X.data() + 3 * F, 2, classes.data(), nullptr);  // rows 3 and 4 again, no probabilities
  EXPECT_EQ(predictor->non_finite_rows(), 3);
}

TEST(NonFiniteOutputs, CnnEnsemblePredictorCountsRowsNotMembers) {
  const auto config = spmd::models::CnnConfig::seed_default();
  const spmd::models::CnnParams params(config);
  // Every parameter 0.01: an image of 3e38 overflows to +inf in the layers (a NaN pixel would
  // not do: ReLU maps NaN to 0), so all its logits are +inf and its softmax NaN.
  const std::vector<float> member(params.size(), 0.01f);
  // Two members: such a row is one non-finite row, not one per member.
  auto predictor =
      spmd::models::make_cnn_classifier(config, {member, member}, "test")->make_predictor(cpu_device(), 3);
  std::vector<float> images(3 * 784, 0.5f);
  std::fill(images.begin() + 784, images.begin() + 2 * 784, 3e38f);
  std::vector<std::int32_t> classes(3, -1);
  std::vector<float> probs(3 * 10);
  predictor->predict(images.data(), 3, classes.data(), probs.data());
  EXPECT_EQ(predictor->non_finite_rows(), 1);
  for (int r : {0, 2})
    for (int c = 0; c < 10; ++c) EXPECT_TRUE(std::isfinite(probs[r * 10 + c])) << "row " << r;
  EXPECT_FALSE(std::isfinite(probs[10]));
}

}  // namespace

}  // namespace non_finite_outputs_test
