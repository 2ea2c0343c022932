// Geometry as data: CnnConfig validation, the layout derived from it, and two non-default
// geometries trained on the CPU with every kernel set against the double-precision scalar
// reference of tests/support/cnn_reference.hpp (written from the network's description,
// not from the library's layer code):
//   rgb: 32x32x3 images, conv 8, 16, dense 32, 5 classes (32 -> 16 -> 8)
//   odd: 30x26x2 images, conv 5, 7, dense 12, 3 classes (30x26 -> 15x13 -> 7x6: both
//        pools drop a row or a column; no width is a multiple of 8 or 16, so every GEMM
//        runs its masked tail)
//   gray: 15x9x1 images, conv 32, 3, no hidden dense layer, 4 classes: the direct kernel
//        of a one-channel first layer on rows that are not a whole number of its tiles,
//        and a classifier fed by the flattened features
// (rgb and odd have several input channels: their first layer is im2col + GEMM.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cnn_gradient_check.hpp"
#include "cnn_reference.hpp"
#include "spmd/models/cnn_cpu.hpp"
#include "spmd/models/cnn_init.hpp"
#include "spmd/runtime/error.hpp"

namespace {

using spmd::models::CnnConfig;
using spmd::models::CnnLayout;
using spmd::models::CnnParams;
using spmd::models::CnnWorkspace;
using spmd::models::cnn_cpu::Isa;
using spmd::test::Batch;
using spmd::test::make_config;
using spmd::test::random_batch;
using spmd::test::Reference;
using spmd::test::test_params;
using spmd::test::to_double;

const CnnConfig kRgb = make_config(32, 32, 3, {8, 16}, {32}, 5);
const CnnConfig kOdd = make_config(30, 26, 2, {5, 7}, {12}, 3);
const CnnConfig kGray = make_config(15, 9, 1, {32, 3}, {}, 4);

struct Case {
  const char* name;
  CnnConfig config;
  Isa isa;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name << "/" << spmd::models::cnn_cpu::to_string(c.isa); }

std::vector<Case> cases() {
  std::vector<Case> out;
  for (Isa isa : {Isa::Avx2, Isa::Avx512, Isa::Blas}) {
    if (!spmd::models::cnn_cpu::isa_supported(isa)) continue;
    out.push_back({"rgb", kRgb, isa});
    out.push_back({"odd", kOdd, isa});
    out.push_back({"gray", kGray, isa});
  }
  return out;
}

class CnnGeometry : public ::testing::TestWithParam<Case> {};

TEST_P(CnnGeometry, ForwardMatchesScalarReference) {
  const Case& c = GetParam();
  std::mt19937 rng(31);
  const CnnParams p = test_params(c.config, 3);
  const Reference ref(c.config, p.layout());
  const auto pd = to_double(p);
  CnnWorkspace ws(c.config, 5, 0, c.isa);
  const int classes = c.config.classes;
  for (int batch : {1, 5}) {
    const Batch b = random_batch(c.config, batch, rng);
    std::vector<float> probs(static_cast<std::size_t>(batch * classes));
    const auto sum = spmd::models::cnn_evaluate(p, b.images.data(), b.labels.data(), nullptr, batch, probs.data(), ws);
    std::vector<double> ref_probs(probs.size());
    const double ref_loss = ref.loss(pd, b.images, b.labels, &ref_probs);
    EXPECT_EQ(sum.count, batch);
    // float32 against double: each logit is a chain of sums of <= 1024 products of O(1)
    // terms; rounding leaves ~1e-6 relative, an indexing error O(1). 2e-5 lies between.
    EXPECT_NEAR(sum.loss_sum / batch, ref_loss, 2e-5 * (1 + ref_loss));
    const auto logits = ws.logits(batch);
    for (int r = 0; r < batch; ++r) {
      const auto z = ref.logits(pd, b.images.data() + static_cast<std::size_t>(r * c.config.input_size()));
      for (int j = 0; j < classes; ++j) {
        const std::size_t i = static_cast<std::size_t>(r * classes + j);
        EXPECT_NEAR(logits[i], z[static_cast<std::size_t>(j)], 2e-5 * (1 + std::abs(z[static_cast<std::size_t>(j)])))
            << "row " << r << " class " << j;
        EXPECT_NEAR(probs[i], ref_probs[i], 2e-6) << "row " << r << " class " << j;
      }
    }
  }
}

TEST_P(CnnGeometry, GradientOfEveryTensorMatchesFiniteDifferencesOfTheReference) {
  const Case& c = GetParam();
  std::mt19937 rng(32);
  const int batch = 3;
  const CnnParams p = test_params(c.config, 4);
  const Reference ref(c.config, p.layout());
  const Batch b = random_batch(c.config, batch, rng);
  CnnWorkspace ws(c.config, batch, batch, c.isa);
  CnnParams grad(c.config);
  std::fill(grad.flat().begin(), grad.flat().end(), 7.0f);  // every float must be overwritten
  const float loss =
      spmd::models::cnn_loss_and_grad(p, b.images.data(), b.labels.data(), nullptr, batch, grad, nullptr, ws);
  std::vector<double> pd = to_double(p);
  EXPECT_NEAR(loss, ref.loss(pd, b.images, b.labels), 2e-5 * (1 + loss));

  std::size_t end = 0;
  for (const auto& info : p.layout().tensors()) {
    for (std::size_t i = end; i < info.offset; ++i) ASSERT_EQ(grad.flat()[i], 0.0f) << "gap before " << info.name;
    end = info.offset + info.size;
  }
  spmd::test::expect_gradient_matches_finite_differences(
      grad, pd, [&](const std::vector<double>& q) { return ref.loss(q, b.images, b.labels); }, rng, 4);
}

TEST_P(CnnGeometry, TrainStepIsParamsMinusLearningRateTimesTheMomentumTrace) {
  const Case& c = GetParam();
  std::mt19937 rng(33);
  const int batch = 4;
  const spmd::optim::SgdMomentum opt{0.05f, 0.9f};
  CnnParams params = test_params(c.config, 5), trace(c.config), grad(c.config);
  // A non-zero trace, so that the momentum term shows (gaps between tensors stay zero).
  std::normal_distribution<float> normal(0.0f, 0.01f);
  for (std::size_t t = 0; t < trace.layout().tensors().size(); ++t)
    for (float& v : trace.tensor(t)) v = normal(rng);
  const Batch b = random_batch(c.config, batch, rng);
  CnnWorkspace ws(c.config, batch, batch, c.isa);
  std::vector<float> probs_ref(static_cast<std::size_t>(batch * c.config.classes)), probs(probs_ref.size());
  const float loss_ref = spmd::models::cnn_loss_and_grad(params, b.images.data(), b.labels.data(), nullptr, batch, grad,
                                                         probs_ref.data(), ws);
  const CnnParams before = params, trace_before = trace;
  const float loss = spmd::models::cnn_train_step(params, trace, opt, b.images.data(), b.labels.data(), batch,
                                                  probs.data(), ws);
  EXPECT_NEAR(loss, loss_ref, 1e-6 * loss_ref);
  for (std::size_t i = 0; i < probs.size(); ++i) ASSERT_NEAR(probs[i], probs_ref[i], 1e-6) << i;
  const auto& tensors = params.layout().tensors();
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    const std::span<const float> w0 = before.tensor(t), t0 = trace_before.tensor(t), g = std::as_const(grad).tensor(t);
    const auto w1 = params.tensor(t), t1 = trace.tensor(t);
    std::size_t moved = 0;
    for (std::size_t i = 0; i < g.size(); ++i) {
      // optax.sgd with momentum: trace' = m * trace + g; params' = params - lr * trace'. The
      // step does the same float operations as this line (the fused update included), so
      // only a compiler's different contraction could separate them: 1e-6 relative.
      const float want_trace = opt.momentum * t0[i] + g[i];
      const float want = w0[i] - opt.learning_rate * want_trace;
      ASSERT_NEAR(t1[i], want_trace, 1e-6f * (1 + std::abs(want_trace))) << tensors[t].name << "[" << i << "]";
      ASSERT_NEAR(w1[i], want, 1e-6f * (1 + std::abs(want))) << tensors[t].name << "[" << i << "]";
      moved += w1[i] != w0[i];
    }
    EXPECT_GT(moved, g.size() / 2) << tensors[t].name << " barely moved";
  }
}

INSTANTIATE_TEST_SUITE_P(Configs, CnnGeometry, ::testing::ValuesIn(cases()), [](const auto& info) {
  return std::string(info.param.name) + "_" + spmd::models::cnn_cpu::to_string(info.param.isa);
});

// ---- the config and the layout derived from it ---------------------------------------

TEST(CnnConfig, SeedDefaultIsTheFashionMnistModel) {
  const CnnConfig c = CnnConfig::seed_default();
  EXPECT_EQ(c, make_config(28, 28, 1, {32, 64}, {256}, 10));
  EXPECT_EQ(c.input_size(), 784);
  EXPECT_EQ(c.image_text(), "28x28x1");
  EXPECT_TRUE(c.accepts_sample_shape({28, 28, 1}));
  EXPECT_TRUE(c.accepts_sample_shape({28, 28}));
  EXPECT_FALSE(c.accepts_sample_shape({28, 28, 3}));
  EXPECT_FALSE(kRgb.accepts_sample_shape({32, 32}));  // [H, W] only stands for one channel
  EXPECT_TRUE(kRgb.accepts_sample_shape({32, 32, 3}));
  EXPECT_EQ(CnnLayout(c).param_count(), 824458u);
}

TEST(CnnConfig, PooledSizesFloorAndFlattenedSizeFollows) {
  const auto flat = [](const CnnConfig& c) { return CnnLayout(c).flat_features(); };
  EXPECT_EQ(flat(CnnConfig::seed_default()), 7 * 7 * 64);  // 28 -> 14 -> 7
  EXPECT_EQ(flat(kRgb), 8 * 8 * 16);                        // 32 -> 16 -> 8
  EXPECT_EQ(flat(kOdd), 7 * 6 * 7);                         // 30 -> 15 -> 7, 26 -> 13 -> 6
  const CnnLayout odd(kOdd);
  ASSERT_EQ(odd.convs().size(), 2u);
  EXPECT_EQ(odd.convs()[1].height, 15);
  EXPECT_EQ(odd.convs()[1].width, 13);
  EXPECT_EQ(odd.convs()[1].pooled_height, 7);
  EXPECT_EQ(odd.convs()[1].pooled_width, 6);
  EXPECT_EQ(flat(make_config(4, 5, 1, {3, 2}, {}, 2)), 1 * 1 * 2);  // the smallest input two pools allow
}

TEST(CnnConfig, TensorsStartOnCacheLinesAndGapsAreDocumented) {
  for (const CnnConfig& c : {CnnConfig::seed_default(), kRgb, kOdd, make_config(5, 7, 3, {1}, {}, 2)}) {
    const CnnLayout layout(c);
    std::size_t end = 0, gaps = 0;
    for (const auto& info : layout.tensors()) {
      EXPECT_EQ(info.offset % 16, 0u) << c.describe() << " " << info.name;
      EXPECT_GE(info.offset, end) << c.describe() << " " << info.name << " overlaps the previous tensor";
      EXPECT_LT(info.offset - end, 16u) << c.describe() << " " << info.name;
      gaps += info.offset - end;
      end = info.offset + info.size;
    }
    EXPECT_EQ(end, layout.param_count()) << c.describe();
    if (c == CnnConfig::seed_default()) EXPECT_EQ(gaps, 0u);
  }
  // kOdd: Conv_0/kernel holds 3*3*2*5 = 90 floats, so Conv_0/bias starts at 96.
  const CnnLayout odd(kOdd);
  EXPECT_EQ(odd.tensors()[1].name, "Conv_0/bias");
  EXPECT_EQ(odd.tensors()[1].offset, 96u);
  EXPECT_EQ(odd.tensors().back().name, "Dense_1/bias");
  EXPECT_EQ(odd.forward_multiply_adds(), 30 * 26 * 18 * 5 + 15 * 13 * 45 * 7 + 294 * 12 + 12 * 3);
}

TEST(CnnConfig, ValidationNamesTheField) {
  const auto message = [](const CnnConfig& c) -> std::string {
    try {
      c.validate();
    } catch (const spmd::Error& e) {
      return e.what();
    }
    return "";
  };
  const auto with = [](auto change) {
    CnnConfig c = CnnConfig::seed_default();
    change(c);
    return c;
  };
  EXPECT_EQ(message(CnnConfig::seed_default()), "");
  EXPECT_EQ(message(kOdd), "");
  const std::pair<CnnConfig, std::string> bad[] = {
      {with([](CnnConfig& c) { c.height = 0; }), "'height' must be >= 1"},
      {with([](CnnConfig& c) { c.width = -3; }), "'width' must be >= 1"},
      {with([](CnnConfig& c) { c.channels = 0; }), "'channels' must be >= 1"},
      {with([](CnnConfig& c) { c.conv_features.clear(); }), "'conv_features' must list at least one"},
      {with([](CnnConfig& c) { c.conv_features[1] = 0; }), "'conv_features[1]' must be >= 1"},
      {with([](CnnConfig& c) { c.dense_features[0] = 0; }), "'dense_features[0]' must be >= 1"},
      {with([](CnnConfig& c) { c.classes = 1; }), "'classes' must be >= 2"},
      {with([](CnnConfig& c) { c.kernel_size = 5; }), "'kernel_size' must be 3"},
      {with([](CnnConfig& c) { c.pool_size = 3; }), "'pool_size' must be 2"},
      {with([](CnnConfig& c) { c.height = 3; }), "'height' must be >= 4 for 2 conv layer(s)"},
      {with([](CnnConfig& c) { c.width = 7, c.conv_features = {4, 4, 4}; }), "'width' must be >= 8 for 3 conv layer(s)"},
      {with([](CnnConfig& c) { c.height = 1 << 16, c.width = 1 << 16; }), "would hold"},
  };
  for (const auto& [config, expected] : bad) {
    const std::string got = message(config);
    EXPECT_NE(got.find(expected), std::string::npos) << "expected '" << expected << "' in '" << got << "'";
    EXPECT_THROW(CnnLayout{config}, spmd::Error) << expected;
  }
}

TEST(CnnConfig, JsonRoundTripsAndBadTextIsNamed) {
  for (const CnnConfig& c : {CnnConfig::seed_default(), kRgb, kOdd, make_config(4, 4, 1, {2, 3}, {}, 2)})
    EXPECT_EQ(CnnConfig::from_json(c.to_json(), "test"), c) << c.to_json();
  EXPECT_EQ(CnnConfig::seed_default().to_json(),
            R"({"channels":1,"classes":10,"conv_features":[32,64],"dense_features":[256],"height":28,)"
            R"("kernel_size":3,"pool_size":2,"width":28})");
  const auto message = [](const std::string& text) -> std::string {
    try {
      CnnConfig::from_json(text, "file.h5");
    } catch (const spmd::Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(message("not json").find("file.h5"), std::string::npos);
  EXPECT_NE(message("[1, 2]").find("not a JSON object"), std::string::npos);
  std::string no_classes = CnnConfig::seed_default().to_json();
  no_classes.replace(no_classes.find("\"classes\""), 9, "\"klasses\"");
  EXPECT_NE(message(no_classes).find("'classes'"), std::string::npos) << message(no_classes);
  std::string zero_height = CnnConfig::seed_default().to_json();
  zero_height.replace(zero_height.find("\"height\":28"), 11, "\"height\":0");
  EXPECT_NE(message(zero_height).find("'height' must be >= 1"), std::string::npos) << message(zero_height);
}

TEST(CnnConfig, ParamsAndWorkspacesOfAnotherGeometryAreRefused) {
  const CnnParams rgb(kRgb), odd(kOdd);
  CnnParams grad(kOdd);
  CnnWorkspace ws(kOdd, 2, 2, Isa::Auto);
  std::mt19937 rng(1);
  const Batch b = random_batch(kOdd, 2, rng);
  EXPECT_NO_THROW(spmd::models::cnn_forward(odd, b.images.data(), 2, nullptr, ws));
  EXPECT_THROW(spmd::models::cnn_forward(rgb, b.images.data(), 2, nullptr, ws), spmd::Error);
  CnnParams rgb_grad(kRgb);
  EXPECT_THROW(spmd::models::cnn_loss_and_grad(odd, b.images.data(), b.labels.data(), nullptr, 2, rgb_grad, nullptr, ws),
               spmd::Error);
  // Equal configs from different objects are the same geometry.
  CnnParams odd_again(CnnLayout::make(kOdd));
  EXPECT_NO_THROW(spmd::models::cnn_forward(odd_again, b.images.data(), 2, nullptr, ws));
}

}  // namespace
