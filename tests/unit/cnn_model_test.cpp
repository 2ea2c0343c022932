// The whole CNN (cnn_cpu.hpp) against a double-precision scalar reference written from the
// ensembling guide's model description: forward, loss, probabilities, masks, and the gradient of every
// tensor against central finite differences of the reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "cnn_gradient_check.hpp"
#include "spmd/models/cnn_cpu.hpp"
#include "spmd/models/cnn_init.hpp"
#include "spmd/runtime/error.hpp"

// Its own namespace: the unity build compiles this file with others whose helpers share names.
namespace cnn_model_test {

namespace {

using spmd::models::CnnConfig;
using spmd::models::CnnLayout;
using spmd::models::CnnParams;
using spmd::models::CnnWorkspace;
using spmd::models::cnn_cpu::Isa;

const CnnConfig kDefault = CnnConfig::seed_default();
const CnnLayout kLayout(kDefault);

// ---- the reference: plain loops in double, NHWC, Flax layouts -------------------------

struct RefTensors {
  const double *w1, *b1, *w2, *b2, *w3, *b3, *w4, *b4;
};

RefTensors ref_views(const std::vector<double>& p) {
  const auto at = [&](std::size_t t) { return p.data() + kLayout.tensors()[t].offset; };
  return {at(0), at(1), at(2), at(3), at(4), at(5), at(6), at(7)};  // conv 0, conv 1, dense 0, dense 1
}

// 3x3 SAME convolution + bias + ReLU of in [s, s, cin] with kernel [3,3,cin,cout].
std::vector<double> ref_conv_relu(const std::vector<double>& in, int s, int cin, const double* w, const double* b,
                                  int cout) {
  std::vector<double> out(static_cast<std::size_t>(s * s * cout));
  for (int y = 0; y < s; ++y)
    for (int x = 0; x < s; ++x)
      for (int co = 0; co < cout; ++co) {
        double acc = b[co];
        for (int dy = -1; dy <= 1; ++dy)
          for (int dx = -1; dx <= 1; ++dx) {
            const int yy = y + dy, xx = x + dx;
            if (yy < 0 || yy >= s || xx < 0 || xx >= s) continue;  // SAME: zero padding
            for (int ci = 0; ci < cin; ++ci)
              acc += in[static_cast<std::size_t>((yy * s + xx) * cin + ci)] *
                     w[((dy + 1) * 3 + (dx + 1)) * cin * cout + ci * cout + co];
          }
        out[static_cast<std::size_t>((y * s + x) * cout + co)] = std::max(acc, 0.0);
      }
  return out;
}

std::vector<double> ref_pool(const std::vector<double>& in, int s, int c) {
  std::vector<double> out(static_cast<std::size_t>(s / 2 * s / 2 * c));
  for (int y = 0; y < s / 2; ++y)
    for (int x = 0; x < s / 2; ++x)
      for (int ch = 0; ch < c; ++ch) {
        double acc = 0;
        for (int dy = 0; dy < 2; ++dy)
          for (int dx = 0; dx < 2; ++dx) acc += in[static_cast<std::size_t>(((2 * y + dy) * s + 2 * x + dx) * c + ch)];
        out[static_cast<std::size_t>((y * (s / 2) + x) * c + ch)] = acc / 4;
      }
  return out;
}

std::vector<double> ref_logits(const std::vector<double>& p, const float* image) {
  const RefTensors t = ref_views(p);
  std::vector<double> x(image, image + 784);
  const auto a1 = ref_pool(ref_conv_relu(x, 28, 1, t.w1, t.b1, 32), 28, 32);
  const auto flat = ref_pool(ref_conv_relu(a1, 14, 32, t.w2, t.b2, 64), 14, 64);  // NHWC flatten order
  std::vector<double> h(256);
  for (int j = 0; j < 256; ++j) {
    double acc = t.b3[j];
    for (int k = 0; k < 3136; ++k) acc += flat[static_cast<std::size_t>(k)] * t.w3[k * 256 + j];
    h[static_cast<std::size_t>(j)] = std::max(acc, 0.0);
  }
  std::vector<double> logits(10);
  for (int j = 0; j < 10; ++j) {
    double acc = t.b4[j];
    for (int k = 0; k < 256; ++k) acc += h[static_cast<std::size_t>(k)] * t.w4[k * 10 + j];
    logits[static_cast<std::size_t>(j)] = acc;
  }
  return logits;
}

// Mean cross-entropy over rows with mask != 0 (all without a mask); probs of every row.
double ref_loss(const std::vector<double>& p, const std::vector<float>& images, const std::vector<std::int32_t>& labels,
                const std::vector<std::uint8_t>* mask, std::vector<double>* probs = nullptr) {
  const int batch = static_cast<int>(labels.size());
  double sum = 0;
  int count = 0;
  for (int b = 0; b < batch; ++b) {
    const auto z = ref_logits(p, images.data() + b * 784);
    const double m = *std::max_element(z.begin(), z.end());
    double s = 0;
    for (double v : z) s += std::exp(v - m);
    if (probs)
      for (int j = 0; j < 10; ++j) (*probs)[static_cast<std::size_t>(b * 10 + j)] = std::exp(z[static_cast<std::size_t>(j)] - m) / s;
    if (mask && !(*mask)[static_cast<std::size_t>(b)]) continue;
    sum += std::log(s) + m - z[static_cast<std::size_t>(labels[static_cast<std::size_t>(b)])];
    ++count;
  }
  return count ? sum / count : 0.0;
}

// ---- fixtures -----------------------------------------------------------------------

struct Batch {
  std::vector<float> images;
  std::vector<std::int32_t> labels;
};

Batch random_batch(int batch, std::mt19937& rng) {
  std::uniform_real_distribution<float> pixel(0.0f, 1.0f);
  std::uniform_int_distribution<int> label(0, 9);
  Batch b;
  b.images.resize(static_cast<std::size_t>(batch) * 784);
  for (auto& v : b.images) v = pixel(rng);
  for (int i = 0; i < batch; ++i) b.labels.push_back(label(rng));
  return b;
}

// Flax-initialised parameters with non-zero biases, so that every bias path is exercised.
CnnParams test_params(std::uint64_t seed) {
  CnnParams p(kDefault);
  spmd::models::cnn_init(p, spmd::models::ensemble_member_key(seed, 0, 1));
  std::mt19937 rng(static_cast<unsigned>(seed));
  std::uniform_real_distribution<float> small(-0.05f, 0.05f);
  for (std::size_t t : {kLayout.convs()[0].bias, kLayout.convs()[1].bias, kLayout.denses()[0].bias, kLayout.denses()[1].bias})
    for (float& v : p.tensor(t)) v = small(rng);
  return p;
}

std::vector<double> to_double(const CnnParams& p) { return {p.flat().begin(), p.flat().end()}; }

std::vector<Isa> testable_isas() {
  std::vector<Isa> isas;
  for (Isa isa : {Isa::Avx2, Isa::Avx512, Isa::Blas})
    if (spmd::models::cnn_cpu::isa_supported(isa)) isas.push_back(isa);
  return isas;
}

class CnnModel : public ::testing::TestWithParam<Isa> {};

TEST_P(CnnModel, ForwardMatchesDoubleReferenceForOddBatches) {
  std::mt19937 rng(21);
  const CnnParams p = test_params(3);
  const auto pd = to_double(p);
  CnnWorkspace ws(kDefault, 9, 0, GetParam());
  for (int batch : {1, 2, 5, 9}) {
    const Batch b = random_batch(batch, rng);
    std::vector<float> probs(static_cast<std::size_t>(batch) * 10);
    const auto sum = spmd::models::cnn_evaluate(p, b.images.data(), b.labels.data(), nullptr, batch, probs.data(), ws);
    std::vector<double> ref_probs(probs.size());
    const double ref = ref_loss(pd, b.images, b.labels, nullptr, &ref_probs);
    EXPECT_EQ(sum.count, batch);
    EXPECT_NEAR(sum.loss_sum / batch, ref, 1e-5 * (1 + ref));
    for (int r = 0; r < batch; ++r) {
      const auto z = ref_logits(pd, b.images.data() + r * 784);
      for (int j = 0; j < 10; ++j) {
        EXPECT_NEAR(ws.logits(batch)[static_cast<std::size_t>(r * 10 + j)], z[static_cast<std::size_t>(j)], 2e-5 * (1 + std::abs(z[static_cast<std::size_t>(j)])));
        EXPECT_NEAR(probs[static_cast<std::size_t>(r * 10 + j)], ref_probs[static_cast<std::size_t>(r * 10 + j)], 2e-6);
      }
    }
  }
}

TEST_P(CnnModel, GradientOfEveryTensorMatchesFiniteDifferencesOfTheReference) {
  std::mt19937 rng(22);
  const int batch = 3;
  const CnnParams p = test_params(4);
  const Batch b = random_batch(batch, rng);
  CnnWorkspace ws(kDefault, batch, batch, GetParam());
  CnnParams grad(kDefault);
  const float loss = spmd::models::cnn_loss_and_grad(p, b.images.data(), b.labels.data(), nullptr, batch, grad, nullptr, ws);
  std::vector<double> pd = to_double(p);
  EXPECT_NEAR(loss, ref_loss(pd, b.images, b.labels, nullptr), 1e-5);

  spmd::test::expect_gradient_matches_finite_differences(
      grad, pd, [&](const std::vector<double>& q) { return ref_loss(q, b.images, b.labels, nullptr); }, rng, 3);
}

TEST_P(CnnModel, MaskedRowsChangeNeitherLossNorGradientAndBatchZeroIsEmpty) {
  std::mt19937 rng(23);
  const CnnParams p = test_params(5);
  // Real rows 0, 2, 3 of a batch of 5; rows 1 and 4 hold other (finite) images and labels.
  const Batch full = random_batch(5, rng);
  const std::vector<std::uint8_t> mask = {1, 0, 1, 1, 0};
  Batch real;
  for (int r : {0, 2, 3}) {
    real.images.insert(real.images.end(), full.images.begin() + r * 784, full.images.begin() + (r + 1) * 784);
    real.labels.push_back(full.labels[static_cast<std::size_t>(r)]);
  }
  CnnWorkspace ws(kDefault, 5, 5, GetParam());
  CnnParams g_masked(kDefault), g_real(kDefault);
  std::vector<float> probs(50);
  const float l_masked = spmd::models::cnn_loss_and_grad(p, full.images.data(), full.labels.data(), mask.data(), 5,
                                                          g_masked, probs.data(), ws);
  const float l_real = spmd::models::cnn_loss_and_grad(p, real.images.data(), real.labels.data(), nullptr, 3, g_real,
                                                        nullptr, ws);
  EXPECT_NEAR(l_masked, l_real, 1e-6 * std::abs(l_real));
  double max_abs = 0;
  for (float v : g_real.flat()) max_abs = std::max(max_abs, static_cast<double>(std::abs(v)));
  for (std::size_t i = 0; i < g_real.size(); ++i)
    ASSERT_NEAR(g_masked.flat()[i], g_real.flat()[i], 1e-6 * max_abs) << "parameter " << i;
  for (int r = 0; r < 5; ++r) {
    double total = 0;
    for (int j = 0; j < 10; ++j) total += probs[static_cast<std::size_t>(r * 10 + j)];
    EXPECT_NEAR(total, 1.0, 1e-6) << "row " << r;
  }
  // Evaluation: the loss sum and count cover only the real rows.
  const auto sum = spmd::models::cnn_evaluate(p, full.images.data(), full.labels.data(), mask.data(), 5, nullptr, ws);
  EXPECT_EQ(sum.count, 3);
  EXPECT_NEAR(sum.loss_sum / 3, l_real, 1e-6 * std::abs(l_real));
  // Nothing counted: loss 0, gradient 0.
  const std::vector<std::uint8_t> none(5, 0);
  CnnParams g_none(kDefault);
  g_none.flat()[7] = 3.0f;
  EXPECT_EQ(spmd::models::cnn_loss_and_grad(p, full.images.data(), full.labels.data(), none.data(), 5, g_none, nullptr, ws), 0.0f);
  EXPECT_TRUE(std::all_of(g_none.flat().begin(), g_none.flat().end(), [](float v) { return v == 0.0f; }));
  EXPECT_EQ(spmd::models::cnn_loss_and_grad(p, nullptr, nullptr, nullptr, 0, g_none, nullptr, ws), 0.0f);
  EXPECT_TRUE(std::all_of(g_none.flat().begin(), g_none.flat().end(), [](float v) { return v == 0.0f; }));
}

TEST_P(CnnModel, TrainStepEqualsLossAndGradThenSgdStep) {
  // The train step fuses dense1's update into its gradient GEMM; it must be the same step.
  std::mt19937 rng(25);
  const spmd::optim::SgdMomentum opt{0.1f, 0.9f};
  for (int batch : {5, 170}) {  // 170 > the GEMM's k block: the fused update spans k blocks
    CnnParams p_fused = test_params(6), p_ref = p_fused, t_fused(kDefault), t_ref(kDefault), grad(kDefault);
    CnnWorkspace ws(kDefault, batch, batch, GetParam());
    for (int step = 0; step < 2; ++step) {
      const Batch b = random_batch(batch, rng);
      std::vector<float> probs_fused(static_cast<std::size_t>(batch) * 10), probs_ref(probs_fused.size());
      const float l_fused = spmd::models::cnn_train_step(p_fused, t_fused, opt, b.images.data(), b.labels.data(),
                                                         batch, probs_fused.data(), ws);
      const float l_ref = spmd::models::cnn_loss_and_grad(p_ref, b.images.data(), b.labels.data(), nullptr, batch,
                                                          grad, probs_ref.data(), ws);
      spmd::optim::sgd_momentum_step(p_ref.flat(), t_ref.flat(), grad.flat(), opt);
      EXPECT_NEAR(l_fused, l_ref, 1e-6 * l_ref) << "batch " << batch << " step " << step;
      for (std::size_t i = 0; i < probs_ref.size(); ++i) ASSERT_NEAR(probs_fused[i], probs_ref[i], 1e-6);
      for (std::size_t i = 0; i < p_ref.size(); ++i) {
        ASSERT_NEAR(p_fused.flat()[i], p_ref.flat()[i], 1e-6f * (1 + std::abs(p_ref.flat()[i])))
            << "batch " << batch << " step " << step << " parameter " << i;
        ASSERT_NEAR(t_fused.flat()[i], t_ref.flat()[i], 1e-6f * (1 + std::abs(t_ref.flat()[i])))
            << "batch " << batch << " step " << step << " trace " << i;
      }
    }
  }
}

TEST_P(CnnModel, LossAtInitIsNearLn10) {
  std::mt19937 rng(24);
  const int batch = 64;
  const Batch b = random_batch(batch, rng);
  CnnWorkspace ws(kDefault, batch, 0, GetParam());
  // Initialised once for all kernel sets (initialisation is the slow part here).
  static const std::vector<CnnParams> members = [] {
    std::vector<CnnParams> m(3, CnnParams(kDefault));
    for (int g = 0; g < 3; ++g) spmd::models::cnn_init(m[static_cast<std::size_t>(g)], spmd::models::ensemble_member_key(0, g, 3));
    return m;
  }();
  for (int member = 0; member < 3; ++member) {
    const CnnParams& p = members[static_cast<std::size_t>(member)];
    const auto sum = spmd::models::cnn_evaluate(p, b.images.data(), b.labels.data(), nullptr, batch, nullptr, ws);
    EXPECT_NEAR(sum.loss_sum / batch, std::log(10.0), 0.3) << "member " << member;
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, CnnModel, ::testing::ValuesIn(testable_isas()),
                         [](const auto& info) { return std::string(spmd::models::cnn_cpu::to_string(info.param)); });

TEST(CnnModelChecks, BatchLimitsAndWorkspaceKindAreEnforced) {
  CnnWorkspace eval_only(kDefault, 4, 0, Isa::Auto);
  CnnParams p(kDefault), g(kDefault);
  std::vector<float> images(5 * 784, 0.0f);
  std::vector<std::int32_t> labels(5, 0);
  EXPECT_THROW(spmd::models::cnn_forward(p, images.data(), 5, nullptr, eval_only), spmd::Error);
  EXPECT_THROW(spmd::models::cnn_loss_and_grad(p, images.data(), labels.data(), nullptr, 1, g, nullptr, eval_only),
               spmd::Error);
  EXPECT_THROW(CnnWorkspace(kDefault, 2, 3, Isa::Auto), spmd::Error);
  CnnWorkspace train(kDefault, 4, 2, Isa::Auto);
  EXPECT_THROW(spmd::models::cnn_loss_and_grad(p, images.data(), labels.data(), nullptr, 3, g, nullptr, train),
               spmd::Error);
  labels[1] = 11;
  EXPECT_THROW(spmd::models::cnn_loss_and_grad(p, images.data(), labels.data(), nullptr, 2, g, nullptr, train),
               spmd::Error);
  EXPECT_GT(train.bytes(), eval_only.bytes());
}

}  // namespace

}  // namespace cnn_model_test
