#pragma once
// The CNN tests' double-precision reference, written from the network's description
// (cnn_config.hpp), not from the library's layer code: direct loops over NHWC images and
// Flax layouts. With it, the fixtures the CNN tests share (random batches, parameters with
// non-zero biases). Used by the CPU geometry and gradient tests and the CUDA member tests.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "spmd/models/cnn_config.hpp"
#include "spmd/models/cnn_init.hpp"
#include "spmd/models/cnn_params.hpp"

namespace spmd::test {

using models::CnnConfig;
using models::CnnLayout;
using models::CnnParams;

inline CnnConfig make_config(int h, int w, int c, std::vector<int> convs, std::vector<int> denses, int classes) {
  CnnConfig config;
  config.height = h;
  config.width = w;
  config.channels = c;
  config.conv_features = std::move(convs);
  config.dense_features = std::move(denses);
  config.classes = classes;
  return config;
}

// ---- the reference: direct loops in double over NHWC images and Flax layouts ----------

// Where each tensor lies in the flat buffer, in the order of the network description.
struct RefTensor {
  std::size_t offset;
  std::size_t size;
};

struct Image {
  int h, w, c;
  std::vector<double> v;  // [h, w, c]
  double at(int y, int x, int ch) const { return v[static_cast<std::size_t>((y * w + x) * c + ch)]; }
};

// Conv 3x3 SAME (zero padding, stride 1) + bias, then ReLU.
inline Image ref_conv_relu(const Image& in, const double* kernel, const double* bias, int out) {
  Image o{in.h, in.w, out, std::vector<double>(static_cast<std::size_t>(in.h * in.w * out))};
  for (int y = 0; y < in.h; ++y)
    for (int x = 0; x < in.w; ++x)
      for (int co = 0; co < out; ++co) {
        double acc = bias[co];
        for (int dy = 0; dy < 3; ++dy)
          for (int dx = 0; dx < 3; ++dx) {
            const int yy = y + dy - 1, xx = x + dx - 1;
            if (yy < 0 || yy >= in.h || xx < 0 || xx >= in.w) continue;
            for (int ci = 0; ci < in.c; ++ci)  // HWIO
              acc += in.at(yy, xx, ci) * kernel[((dy * 3 + dx) * in.c + ci) * out + co];
          }
        o.v[static_cast<std::size_t>((y * in.w + x) * out + co)] = std::max(acc, 0.0);
      }
  return o;
}

// 2x2 average pool, stride 2, VALID: floor(h / 2) x floor(w / 2).
inline Image ref_avg_pool(const Image& in) {
  Image o{in.h / 2, in.w / 2, in.c, {}};
  o.v.resize(static_cast<std::size_t>(o.h * o.w * o.c));
  for (int y = 0; y < o.h; ++y)
    for (int x = 0; x < o.w; ++x)
      for (int ch = 0; ch < in.c; ++ch)
        o.v[static_cast<std::size_t>((y * o.w + x) * o.c + ch)] =
            (in.at(2 * y, 2 * x, ch) + in.at(2 * y, 2 * x + 1, ch) + in.at(2 * y + 1, 2 * x, ch) +
             in.at(2 * y + 1, 2 * x + 1, ch)) / 4;
  return o;
}

class Reference {
 public:
  // The tensor offsets are the one thing taken from the library (they are its layout
  // contract); the shapes they must have are checked against the description here.
  Reference(const CnnConfig& config, const CnnLayout& layout) : config_(config) {
    std::vector<std::vector<int>> shapes;
    int c = config.channels;
    for (int f : config.conv_features) {
      shapes.push_back({3, 3, c, f});
      shapes.push_back({f});
      c = f;
    }
    int h = config.height, w = config.width;
    for (std::size_t l = 0; l < config.conv_features.size(); ++l) h /= 2, w /= 2;
    int in = h * w * c;
    std::vector<int> outs = config.dense_features;
    outs.push_back(config.classes);
    for (int out : outs) {
      shapes.push_back({in, out});
      shapes.push_back({out});
      in = out;
    }
    EXPECT_EQ(layout.tensors().size(), shapes.size());
    for (std::size_t t = 0; t < shapes.size() && t < layout.tensors().size(); ++t) {
      const auto& info = layout.tensors()[t];
      std::size_t size = 1;
      for (std::size_t d = 0; d < shapes[t].size(); ++d) {
        EXPECT_EQ(info.shape[d], shapes[t][d]) << info.name << " dimension " << d;
        size *= static_cast<std::size_t>(shapes[t][d]);
      }
      EXPECT_EQ(info.size, size) << info.name;
      tensors_.push_back({info.offset, size});
    }
  }

  std::vector<double> logits(const std::vector<double>& p, const float* image) const {
    Image x{config_.height, config_.width, config_.channels,
            std::vector<double>(image, image + config_.height * config_.width * config_.channels)};
    std::size_t t = 0;
    for (int f : config_.conv_features) {
      x = ref_avg_pool(ref_conv_relu(x, p.data() + tensors_[t].offset, p.data() + tensors_[t + 1].offset, f));
      t += 2;
    }
    std::vector<double> a = x.v;  // NHWC flatten
    std::vector<int> outs = config_.dense_features;
    outs.push_back(config_.classes);
    for (std::size_t j = 0; j < outs.size(); ++j, t += 2) {
      const double* kernel = p.data() + tensors_[t].offset;
      const double* bias = p.data() + tensors_[t + 1].offset;
      std::vector<double> y(static_cast<std::size_t>(outs[j]));
      for (int o = 0; o < outs[j]; ++o) {
        double acc = bias[o];
        const std::size_t width = static_cast<std::size_t>(outs[j]);
        for (std::size_t k = 0; k < a.size(); ++k) acc += a[k] * kernel[k * width + static_cast<std::size_t>(o)];
        y[static_cast<std::size_t>(o)] = j + 1 < outs.size() ? std::max(acc, 0.0) : acc;
      }
      a = std::move(y);
    }
    return a;
  }

  // Mean softmax cross-entropy over the batch; probabilities of every row when asked.
  double loss(const std::vector<double>& p, const std::vector<float>& images, const std::vector<std::int32_t>& labels,
              std::vector<double>* probs = nullptr) const {
    const std::size_t pixels = static_cast<std::size_t>(config_.input_size());
    const std::size_t classes = static_cast<std::size_t>(config_.classes);
    double sum = 0;
    for (std::size_t b = 0; b < labels.size(); ++b) {
      const auto z = logits(p, images.data() + b * pixels);
      const double m = *std::max_element(z.begin(), z.end());
      double s = 0;
      for (double v : z) s += std::exp(v - m);
      if (probs)
        for (std::size_t j = 0; j < classes; ++j) (*probs)[b * classes + j] = std::exp(z[j] - m) / s;
      sum += std::log(s) + m - z[static_cast<std::size_t>(labels[b])];
    }
    return sum / static_cast<double>(labels.size());
  }

 private:
  CnnConfig config_;
  std::vector<RefTensor> tensors_;
};

// ---- fixtures -----------------------------------------------------------------------

struct Batch {
  std::vector<float> images;
  std::vector<std::int32_t> labels;
};

inline Batch random_batch(const CnnConfig& config, int batch, std::mt19937& rng) {
  std::uniform_real_distribution<float> pixel(0.0f, 1.0f);
  std::uniform_int_distribution<int> label(0, config.classes - 1);
  Batch b;
  b.images.resize(static_cast<std::size_t>(batch * config.input_size()));
  for (auto& v : b.images) v = pixel(rng);
  for (int i = 0; i < batch; ++i) b.labels.push_back(label(rng));
  return b;
}

// Flax-initialised kernels and small non-zero biases, so that every bias path counts.
inline CnnParams test_params(const CnnConfig& config, std::uint64_t seed) {
  CnnParams p(config);
  spmd::models::cnn_init(p, spmd::models::ensemble_member_key(seed, 0, 1));
  std::mt19937 rng(static_cast<unsigned>(seed));
  std::uniform_real_distribution<float> small(-0.05f, 0.05f);
  for (std::size_t t = 0; t < p.layout().tensors().size(); ++t)
    if (p.layout().tensors()[t].fan_in == 0)
      for (float& v : p.tensor(t)) v = small(rng);
  return p;
}

inline std::vector<double> to_double(const CnnParams& p) { return {p.flat().begin(), p.flat().end()}; }

}  // namespace spmd::test
