// The CNN's memory-bound layer steps (cnn_layers.hpp) against scalar references, and
// their backward passes against finite differences of double-precision references.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <numeric>
#include <random>
#include <vector>

#include "spmd/models/cnn_layers.hpp"
#include "spmd/runtime/error.hpp"

// Its own namespace: the unity build compiles this file with others whose helpers share names.
namespace cnn_layers_test {

namespace {

namespace cc = spmd::models::cnn_cpu;

std::vector<float> random_vector(std::size_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Central difference of a double function at x[i].
double finite_difference(const std::function<double(const std::vector<double>&)>& f, std::vector<double> x,
                         std::size_t i, double eps = 1e-6) {
  const double x0 = x[i];
  x[i] = x0 + eps;
  const double up = f(x);
  x[i] = x0 - eps;
  const double down = f(x);
  return (up - down) / (2 * eps);
}

TEST(CnnLayers, PadImagePlacesTheImageInsideAZeroBorder) {
  std::mt19937 rng(1);
  const auto img = random_vector(784, rng);
  std::vector<float> xp(900, 0.0f);
  cc::pad_image(img.data(), 28, 28, 1, xp.data());
  for (int y = 0; y < 30; ++y)
    for (int x = 0; x < 30; ++x) {
      const bool border = y == 0 || x == 0 || y == 29 || x == 29;
      EXPECT_EQ(xp[static_cast<std::size_t>(y * 30 + x)], border ? 0.0f : img[static_cast<std::size_t>((y - 1) * 28 + x - 1)]);
    }
}

TEST(CnnLayers, AvgPoolMatchesReferenceForOddChannelCountsAndStridedOutput) {
  std::mt19937 rng(2);
  for (auto [h, w, c] : {std::array{2, 2, 1}, std::array{4, 6, 3}, std::array{28, 28, 32}, std::array{14, 10, 17}}) {
    const auto in = random_vector(static_cast<std::size_t>(h * w * c), rng);
    const long stride = (w / 2 + 3) * c;  // extra columns must stay untouched
    std::vector<float> out(static_cast<std::size_t>(h / 2 * stride), 42.0f);
    cc::avg_pool2x2(in.data(), h, w, c, out.data(), stride);
    for (int py = 0; py < h / 2; ++py)
      for (long q = 0; q < stride; ++q) {
        const float got = out[static_cast<std::size_t>(py * stride + q)];
        if (q >= (w / 2) * c) {
          EXPECT_EQ(got, 42.0f);
          continue;
        }
        const int px = static_cast<int>(q / c), ch = static_cast<int>(q % c);
        double s = 0;
        for (int dy = 0; dy < 2; ++dy)
          for (int dx = 0; dx < 2; ++dx) s += in[static_cast<std::size_t>(((2 * py + dy) * w + 2 * px + dx) * c + ch)];
        EXPECT_NEAR(got, s / 4, 1e-6);
      }
  }
}

TEST(CnnLayers, PoolReluBackwardMatchesFiniteDifferences) {
  // f(pre) = sum_j g_j * pool(relu(pre))_j; its gradient is what the backward computes.
  std::mt19937 rng(3);
  const int h = 6, w = 4, c = 3;
  const auto pre = random_vector(static_cast<std::size_t>(h * w * c), rng);
  const auto g = random_vector(static_cast<std::size_t>(h / 2 * w / 2 * c), rng);
  std::vector<float> act(pre.size());
  for (std::size_t i = 0; i < pre.size(); ++i) act[i] = std::max(pre[i], 0.0f);
  std::vector<float> dpre(pre.size());
  cc::avg_pool2x2_relu_backward(act.data(), g.data(), (w / 2) * c, h, w, c, dpre.data());
  const auto f = [&](const std::vector<double>& x) {
    double s = 0;
    for (int y = 0; y < h; ++y)
      for (int xx = 0; xx < w; ++xx)
        for (int ch = 0; ch < c; ++ch)
          s += g[static_cast<std::size_t>(((y / 2) * (w / 2) + xx / 2) * c + ch)] * 0.25 *
               std::max(x[static_cast<std::size_t>((y * w + xx) * c + ch)], 0.0);
    return s;
  };
  const std::vector<double> x(pre.begin(), pre.end());
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(dpre[i], finite_difference(f, x, i), 1e-6) << i;
}

TEST(CnnLayers, PoolOfOddSizesFloorsAndItsBackwardZeroesTheDroppedRowAndColumn) {
  // As Flax's avg_pool with VALID padding: 5x7 pools to 2x3; the last row and column feed
  // nothing, so their gradient is zero.
  std::mt19937 rng(7);
  const int h = 5, w = 7, c = 3;
  const auto pre = random_vector(static_cast<std::size_t>(h * w * c), rng);
  std::vector<float> act(pre.size());
  for (std::size_t i = 0; i < pre.size(); ++i) act[i] = std::max(pre[i], 0.0f);
  const int ph = h / 2, pw = w / 2;
  std::vector<float> pooled(static_cast<std::size_t>(ph * pw * c), 9.0f);
  cc::avg_pool2x2(act.data(), h, w, c, pooled.data(), pw * c);
  for (int y = 0; y < ph; ++y)
    for (int x = 0; x < pw; ++x)
      for (int ch = 0; ch < c; ++ch) {
        double s = 0;
        for (int d = 0; d < 4; ++d) s += act[static_cast<std::size_t>(((2 * y + d / 2) * w + 2 * x + d % 2) * c + ch)];
        EXPECT_NEAR(pooled[static_cast<std::size_t>((y * pw + x) * c + ch)], s / 4, 1e-6);
      }
  const auto g = random_vector(pooled.size(), rng);
  std::vector<float> dpre(pre.size(), 5.0f);  // every entry must be written
  cc::avg_pool2x2_relu_backward(act.data(), g.data(), pw * c, h, w, c, dpre.data());
  const auto f = [&](const std::vector<double>& x) {
    double s = 0;
    for (int y = 0; y < 2 * ph; ++y)
      for (int xx = 0; xx < 2 * pw; ++xx)
        for (int ch = 0; ch < c; ++ch)
          s += g[static_cast<std::size_t>(((y / 2) * pw + xx / 2) * c + ch)] * 0.25 *
               std::max(x[static_cast<std::size_t>((y * w + xx) * c + ch)], 0.0);
    return s;
  };
  const std::vector<double> x(pre.begin(), pre.end());
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(dpre[i], finite_difference(f, x, i), 1e-6) << i;
  for (int ch = 0; ch < c; ++ch) EXPECT_EQ(dpre[static_cast<std::size_t>(((h - 1) * w + 2) * c + ch)], 0.0f);
}

TEST(CnnLayers, SoftmaxCrossEntropyHandlesManyClasses) {
  // More classes than the kernel keeps on its stack.
  std::mt19937 rng(8);
  const int rows = 2, classes = 150;
  const auto logits = random_vector(rows * classes, rng, -3.0f, 3.0f);
  const std::vector<std::int32_t> labels = {149, 3};
  std::vector<float> probs(rows * classes), dlogits(rows * classes);
  const auto sum = cc::softmax_cross_entropy(logits.data(), labels.data(), nullptr, rows, classes, probs.data(),
                                             dlogits.data(), 0.5f);
  EXPECT_EQ(sum.count, 2);
  double loss = 0;
  for (int r = 0; r < rows; ++r) {
    double m = -1e300, s = 0, total = 0;
    const float* z = logits.data() + r * classes;
    for (int j = 0; j < classes; ++j) m = std::max(m, static_cast<double>(z[j]));
    for (int j = 0; j < classes; ++j) s += std::exp(z[j] - m);
    loss += std::log(s) + m - z[labels[static_cast<std::size_t>(r)]];
    for (int j = 0; j < classes; ++j) {
      const std::size_t i = static_cast<std::size_t>(r * classes + j);
      const double p = std::exp(logits[i] - m) / s;
      total += probs[i];
      EXPECT_NEAR(probs[i], p, 1e-6);
      EXPECT_NEAR(dlogits[i], 0.5 * (p - (j == labels[static_cast<std::size_t>(r)])), 1e-6);
    }
    EXPECT_NEAR(total, 1.0, 1e-5);
  }
  EXPECT_NEAR(sum.loss_sum, loss, 1e-4);
}

TEST(CnnLayers, Im2colMatchesReferenceAndCol2imIsItsAdjoint) {
  std::mt19937 rng(4);
  for (auto [h, w, c] : {std::array{1, 1, 1}, std::array{3, 5, 2}, std::array{14, 14, 32}, std::array{7, 9, 5}}) {
    const std::size_t padded = static_cast<std::size_t>((h + 2) * (w + 2) * c);
    const std::size_t cols = static_cast<std::size_t>(h * w * 9 * c);
    const auto in = random_vector(padded, rng);
    std::vector<float> col(cols);
    cc::im2col3x3(in.data(), h, w, c, col.data());
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x)
        for (int t = 0; t < 9; ++t)
          for (int ch = 0; ch < c; ++ch)
            ASSERT_EQ(col[static_cast<std::size_t>(((y * w + x) * 9 + t) * c + ch)],
                      in[static_cast<std::size_t>(((y + t / 3) * (w + 2) + x + t % 3) * c + ch)]);
    // <im2col(x), y> == <x, col2im(y)> for random x, y.
    const auto ycol = random_vector(cols, rng);
    std::vector<float> back(padded, 0.0f);
    cc::col2im3x3_add(ycol.data(), h, w, c, back.data());
    double lhs = 0, rhs = 0;
    for (std::size_t i = 0; i < cols; ++i) lhs += static_cast<double>(col[i]) * ycol[i];
    for (std::size_t i = 0; i < padded; ++i) rhs += static_cast<double>(in[i]) * back[i];
    EXPECT_NEAR(lhs, rhs, 1e-4 * (1 + std::abs(lhs)));
    // col2im accumulates.
    std::vector<float> twice = back;
    cc::col2im3x3_add(ycol.data(), h, w, c, twice.data());
    for (std::size_t i = 0; i < padded; ++i) ASSERT_NEAR(twice[i], 2 * back[i], 1e-5);
  }
}

TEST(CnnLayers, DenseForwardAndBackwardMatchReferenceAndFiniteDifferences) {
  std::mt19937 rng(5);
  const int rows = 3, n_in = 7, n_out = 5;
  const auto in = random_vector(rows * n_in, rng);
  const auto kernel = random_vector(n_in * n_out, rng);
  const auto bias = random_vector(n_out, rng);
  const auto dout = random_vector(rows * n_out, rng);
  std::vector<float> out(rows * n_out);
  cc::dense_forward(in.data(), rows, n_in, kernel.data(), bias.data(), n_out, out.data());
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < n_out; ++j) {
      double s = bias[static_cast<std::size_t>(j)];
      for (int k = 0; k < n_in; ++k) s += static_cast<double>(in[static_cast<std::size_t>(r * n_in + k)]) * kernel[static_cast<std::size_t>(k * n_out + j)];
      EXPECT_NEAR(out[static_cast<std::size_t>(r * n_out + j)], s, 1e-6);
    }
  // f(kernel, bias, x) = sum dout * dense(relu? no: x as given) ; check all three gradients.
  std::vector<float> dk(kernel.size(), 0.5f), db(bias.size(), -0.25f), din(in.size());
  cc::dense_backward(in.data(), rows, n_in, kernel.data(), n_out, dout.data(), dk.data(), db.data(), din.data(), false);
  // Packs (x, kernel, bias) into one vector for the finite differences.
  std::vector<double> all;
  all.insert(all.end(), in.begin(), in.end());
  all.insert(all.end(), kernel.begin(), kernel.end());
  all.insert(all.end(), bias.begin(), bias.end());
  const auto f = [&](const std::vector<double>& v) {
    double s = 0;
    for (int r = 0; r < rows; ++r)
      for (int j = 0; j < n_out; ++j) {
        double o = v[static_cast<std::size_t>(rows * n_in + n_in * n_out + j)];
        for (int k = 0; k < n_in; ++k) o += v[static_cast<std::size_t>(r * n_in + k)] * v[static_cast<std::size_t>(rows * n_in + k * n_out + j)];
        s += dout[static_cast<std::size_t>(r * n_out + j)] * o;
      }
    return s;
  };
  for (std::size_t i = 0; i < all.size(); ++i) {
    const double fd = finite_difference(f, all, i);
    if (i < in.size())
      EXPECT_NEAR(din[i], fd, 1e-5) << "din " << i;
    else if (i < in.size() + kernel.size())
      EXPECT_NEAR(dk[i - in.size()] - 0.5f, fd, 1e-5) << "dkernel " << i - in.size();  // accumulated onto 0.5
    else
      EXPECT_NEAR(db[i - in.size() - kernel.size()] + 0.25f, fd, 1e-5) << "dbias";
  }
  // With the ReLU mask, din is zero where the (post-ReLU) input is not positive.
  std::vector<float> din_masked(in.size());
  cc::dense_backward(in.data(), rows, n_in, kernel.data(), n_out, dout.data(), dk.data(), db.data(), din_masked.data(), true);
  for (std::size_t i = 0; i < in.size(); ++i) EXPECT_EQ(din_masked[i], in[i] > 0 ? din[i] : 0.0f);
}

TEST(CnnLayers, SoftmaxCrossEntropyProbabilitiesLossMaskAndGradient) {
  std::mt19937 rng(6);
  const int rows = 5, classes = 10;
  auto logits = random_vector(rows * classes, rng, -4.0f, 4.0f);
  logits[3] = 80.0f;  // large logits must not overflow
  const std::vector<std::int32_t> labels = {3, 0, 9, 4, 7};
  const std::vector<std::uint8_t> mask = {1, 0, 1, 1, 0};
  std::vector<float> probs(rows * classes), dlogits(rows * classes, 5.0f);
  const float scale = 1.0f / 3;
  const auto sum = cc::softmax_cross_entropy(logits.data(), labels.data(), mask.data(), rows, classes, probs.data(),
                                             dlogits.data(), scale);
  EXPECT_EQ(sum.count, 3);
  EXPECT_EQ(cc::count_rows(mask.data(), rows), 3);
  EXPECT_EQ(cc::count_rows(nullptr, rows), rows);
  const auto row_loss = [&](const std::vector<double>& z, int r) {
    double m = -1e300;
    for (int j = 0; j < classes; ++j) m = std::max(m, z[static_cast<std::size_t>(r * classes + j)]);
    double s = 0;
    for (int j = 0; j < classes; ++j) s += std::exp(z[static_cast<std::size_t>(r * classes + j)] - m);
    return std::log(s) + m - z[static_cast<std::size_t>(r * classes + labels[static_cast<std::size_t>(r)])];
  };
  const auto f = [&](const std::vector<double>& z) {
    double s = 0;
    for (int r = 0; r < rows; ++r)
      if (mask[static_cast<std::size_t>(r)]) s += row_loss(z, r);
    return s * scale;
  };
  const std::vector<double> z(logits.begin(), logits.end());
  EXPECT_NEAR(sum.loss_sum * scale, f(z), 1e-5);
  for (int r = 0; r < rows; ++r) {
    double total = 0;
    for (int j = 0; j < classes; ++j) total += probs[static_cast<std::size_t>(r * classes + j)];
    EXPECT_NEAR(total, 1.0, 1e-6) << "row " << r;  // padded rows get probabilities too
  }
  for (std::size_t i = 0; i < z.size(); ++i) EXPECT_NEAR(dlogits[i], finite_difference(f, z, i), 1e-6) << i;
  // A counted row's label must be a class; a masked row's need not.
  std::vector<std::int32_t> bad = labels;
  bad[1] = 10;
  EXPECT_NO_THROW(cc::softmax_cross_entropy(logits.data(), bad.data(), mask.data(), rows, classes, nullptr, nullptr, 1));
  bad[2] = -1;
  EXPECT_THROW(cc::softmax_cross_entropy(logits.data(), bad.data(), mask.data(), rows, classes, nullptr, nullptr, 1),
               spmd::Error);
  // Without labels only probabilities are produced.
  EXPECT_EQ(cc::softmax_cross_entropy(logits.data(), nullptr, nullptr, rows, classes, probs.data(), nullptr, 1).count, 0);
}

}  // namespace

}  // namespace cnn_layers_test
