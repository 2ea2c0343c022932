// The byte-sample entry points (models/classifier.hpp) on the CPU: no CPU model claims to
// decode bytes (the host decodes them with a vectorised loop before predict()), and one
// that is called anyway refuses with a message that says what to do, rather than guessing.
// The GPU side (which does decode bytes) is tests/cuda/cuda_byte_input_test.cpp.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "spmd/models/classifier.hpp"
#include "spmd/models/cnn_classifier.hpp"
#include "spmd/models/cnn_config.hpp"
#include "spmd/models/cnn_params.hpp"
#include "spmd/models/device_models.hpp"
#include "spmd/runtime/error.hpp"

namespace {

spmd::runtime::DeviceInfo cpu_device() {
  spmd::runtime::DeviceInfo d;
  d.name = "cpu:0";
  return d;
}

void expect_refused(const std::function<void()>& call, const std::string& what) {
  try {
    call();
    ADD_FAILURE() << what << ": no error";
  } catch (const spmd::Error& e) {
    EXPECT_NE(std::string(e.what()).find("decodes no bytes"), std::string::npos) << what << ": " << e.what();
  }
}

TEST(ByteInput, CpuModelsLeaveDecodingToTheHostAndRefuseBytes) {
  const spmd::models::ByteTable table{};
  const std::vector<std::uint8_t> bytes(784, 7);
  std::vector<std::int32_t> classes(1);
  std::vector<float> probs(10);

  spmd::models::LogregParameters p;
  p.features = 784;
  p.classes = 10;
  p.W.assign(784 * 10, 0.0f);
  auto logreg = spmd::models::make_logreg_predictor(cpu_device(), p, 4);
  EXPECT_FALSE(logreg->decodes_bytes());
  expect_refused([&] { logreg->predict_bytes(bytes.data(), 1, table, classes.data(), probs.data()); }, "logreg");

  auto zero = spmd::models::make_zero_classifier(10)->make_predictor(cpu_device(), 4);
  EXPECT_FALSE(zero->decodes_bytes());
  expect_refused([&] { zero->predict_bytes(bytes.data(), 1, table, classes.data(), nullptr); }, "zero model");

  const auto config = spmd::models::CnnConfig::seed_default();
  const spmd::models::CnnParams params(config);
  auto cnn = spmd::models::make_cnn_classifier(
                 config, {std::vector<float>(params.data(), params.data() + params.size())}, "test")
                 ->make_predictor(cpu_device(), 4);
  EXPECT_FALSE(cnn->decodes_bytes());
  expect_refused([&] { cnn->predict_bytes(bytes.data(), 1, table, classes.data(), probs.data()); }, "cnn ensemble");

  auto member = spmd::models::make_cnn_member(cpu_device(), config, 4, 0);
  EXPECT_FALSE(member->decodes_bytes());
  expect_refused([&] { member->forward_bytes(bytes.data(), 1, table, probs.data()); }, "cnn member");
  const std::int32_t label = 0;
  expect_refused([&] { member->train_step_bytes(bytes.data(), &label, 1, table, {0.1f, 0.9f}, probs.data()); },
                 "cnn member training");
}

}  // namespace
