// The byte-sample entry points (models/classifier.hpp) on the CPU: the built-in models leave
// decoding to the host (a vectorised loop before predict()) and refuse bytes with a message
// that says what to do, rather than guessing; an ONNX graph decodes each chunk of bytes into
// its input tensor, with predict()'s bits. The GPU side is tests/cuda/cuda_byte_input_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "spmd/models/classifier.hpp"
#include "spmd/models/cnn_classifier.hpp"
#include "spmd/models/cnn_config.hpp"
#include "spmd/models/cnn_params.hpp"
#include "spmd/models/device_models.hpp"
#include "spmd/models/onnx_classifier.hpp"
#include "spmd/runtime/error.hpp"
#include "onnx_test_graphs.hpp"
#include "test_folder.hpp"

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

// Bytes through predict_bytes() and their table's floats through predict(): the same classes
// and probabilities, bit for bit, where the rows are copied as stored (one channel) and where
// they are transposed from NHWC and normalised per channel on the way in; for the tables of
// --input-scale auto (v / 255) and none (v), which are computed rather than looked up, and
// for another table (a factor), which is looked up.
TEST(ByteInput, AnOnnxGraphOnTheHostDecodesBytesWithThePredictBits) {
  spmd::test::TestFolder folder("spmd-byte-input");
  std::vector<spmd::models::ByteTable> tables(3);
  for (int v = 0; v < 256; ++v) {
    tables[0][static_cast<std::size_t>(v)] = static_cast<float>(v) / 255.0f;
    tables[1][static_cast<std::size_t>(v)] = static_cast<float>(v);
    tables[2][static_cast<std::size_t>(v)] = static_cast<float>(v) * 0.0137f - 1.5f;
  }
  for (const auto& table : tables)
  for (const std::int64_t channels : {1, 3}) {
    spmd::test::OnnxTestGraph g({channels, 5, 4});
    g.weights("k", {6, channels, 3, 3});
    g.node("Conv", {"x", "k"}, {"c"});
    g.node("Flatten", {"c"}, {"f"});
    g.weights("w", {6 * 3 * 2, 7});
    g.node("MatMul", {"f", "w"}, {"l"});
    g.node("Softmax", {"l"}, {"y"});
    const std::string path = folder.file("g" + std::to_string(channels) + ".onnx");
    g.save(path);
    spmd::models::OnnxInputNorm norm;
    if (channels == 3) norm = {{0.4f, 0.5f, 0.6f}, {0.2f, 0.3f, 0.25f}};
    const std::vector<std::int64_t> stored{5, 4, channels};  // NHWC on disk
    const auto model = spmd::models::make_onnx_classifier(path, {}, norm, nullptr,
                                                          [&] { return stored; });
    auto predictor = model->make_predictor(cpu_device(), 64);
    ASSERT_TRUE(predictor->decodes_bytes());
    const std::int64_t rows = 37, size = 5 * 4 * channels;
    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(rows * size));
    std::vector<float> floats(bytes.size());
    for (std::size_t k = 0; k < bytes.size(); ++k) {
      bytes[k] = static_cast<std::uint8_t>((k * 97 + k / 7) % 256);
      floats[k] = table[bytes[k]];
    }
    std::vector<std::int32_t> classes_b(rows), classes_f(rows);
    std::vector<float> probs_b(static_cast<std::size_t>(rows * 7)), probs_f(probs_b.size());
    predictor->predict_bytes(bytes.data(), rows, table, classes_b.data(), probs_b.data());
    predictor->predict(floats.data(), rows, classes_f.data(), probs_f.data());
    EXPECT_EQ(classes_b, classes_f) << channels << " channels";
    EXPECT_EQ(0, std::memcmp(probs_b.data(), probs_f.data(), probs_b.size() * sizeof(float))) << channels << " channels";
    // The rows' classes are not all one (a test where every row gives the same class would
    // pass with the wrong bytes too).
    EXPECT_NE(std::count(classes_f.begin(), classes_f.end(), classes_f[0]), rows) << channels << " channels";
  }
}

}  // namespace
