// Convolution and batch normalisation graph ops over NCHW tensors with two spatial
// dimensions (1-D ones run as height 1). Every image is computed on its own, in the same order
// whatever the batch.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "spmd/models/cnn_kernels.hpp"
#include "graph_nd.hpp"
#include "graph_window.hpp"
#include "spmd/ops/graph_op.hpp"
#include "vector_math.hpp"

namespace spmd::ops {
namespace {

// An image row (10 to 100 floats) copied inline: a library memmove call per row costs more
// than the copy, and GCC turns a plain copy loop into such a call. The last vector overlaps
// the one before it instead of a masked store (vmaskmovps stores are slow on AMD's cores).
inline void copy_row(const float* src, std::int64_t n, float* dst) {
#ifdef __AVX2__
  if (n >= 8) {
    for (std::int64_t i = 0; i + 8 < n; i += 8) _mm256_storeu_ps(dst + i, _mm256_loadu_ps(src + i));
    _mm256_storeu_ps(dst + n - 8, _mm256_loadu_ps(src + n - 8));
    return;
  }
#endif
  for (std::int64_t i = 0; i < n; ++i) dst[i] = src[i];
}

// The im2col matrix of one image and group: [C/group * kH * kW, oH * oW], one row per
// (channel, tap), zeros where the tap falls in the padding.
void im2col(const float* in, const Window& g, std::int64_t channels, std::int64_t kh, std::int64_t kw, float* col) {
  const std::int64_t pixels = g.oh * g.ow;
  for (std::int64_t ci = 0; ci < channels; ++ci)
    for (std::int64_t ky = 0; ky < kh; ++ky)
      for (std::int64_t kx = 0; kx < kw; ++kx) {
        float* row = col + ((ci * kh + ky) * kw + kx) * pixels;
        // The output columns whose input column lies inside the image: [lo, hi).
        const std::int64_t shift = kx * g.dw - g.left;
        const std::int64_t lo = std::clamp<std::int64_t>((-shift + g.sw - 1) / g.sw, 0, g.ow);
        const std::int64_t hi = std::clamp<std::int64_t>((g.w - shift + g.sw - 1) / g.sw, lo, g.ow);
        for (std::int64_t oy = 0; oy < g.oh; ++oy) {
          const std::int64_t iy = oy * g.sh - g.top + ky * g.dh;
          float* out = row + oy * g.ow;
          if (iy < 0 || iy >= g.h) {
            std::fill(out, out + g.ow, 0.0f);
            continue;
          }
          const float* src = in + (ci * g.h + iy) * g.w + shift;
          std::fill(out, out + lo, 0.0f);
          if (g.sw == 1)
            copy_row(src + lo, hi - lo, out + lo);
          else
            for (std::int64_t ox = lo; ox < hi; ++ox) out[ox] = src[ox * g.sw];
          std::fill(out + hi, out + g.ow, 0.0f);
        }
      }
}

// Weights [M, k] (k = C * kH * kW per output channel) as [k, M]: a GEMM's right-hand side with
// the output channels along its rows, or a transposed left-hand side read a tap at a time.
FloatBuffer transposed_weights(const float* weights, std::int64_t m, std::int64_t k) {
  FloatBuffer t(static_cast<std::size_t>(k * m));
  for (std::int64_t o = 0; o < m; ++o)
    for (std::int64_t tap = 0; tap < k; ++tap) t[static_cast<std::size_t>(tap * m + o)] = weights[o * k + tap];
  return t;
}

// A convolution of one image and group without im2col. The image goes into a zero-bordered
// plane per channel (W + pads wide), split by stride into phase planes (row r, column c of
// the padded image -> phase (r % sH, c % sW), position (r / sH, c / sW)); then every tap
// (channel, ky, kx) reads one phase plane at one offset, so the GEMM takes its row of the
// virtual im2col matrix straight from there. It computes oH rows of wq = ceil((W + pads) / sW)
// columns, of which the first oW are the output (the rest wrap into the next row). Only the
// phases some tap reads are kept (a 1x1 kernel of stride 2 reads one of four). What depends
// only on the geometry and the weights (offsets, weights in the GEMM's order, row copies) is
// made once per node and shape and kept by the runner.
class DirectConv {
 public:
  DirectConv(const Window& g, std::int64_t channels, std::int64_t kh, std::int64_t kw, const float* weights,
             std::int64_t out_channels)
      : g_(g), c_(channels), m_(out_channels) {
    hq_ = (g.h + g.top + g.bottom + g.sh - 1) / g.sh;
    wq_ = (g.w + g.left + g.right + g.sw - 1) / g.sw;
    std::vector<std::int64_t> slot(static_cast<std::size_t>(g.sh * g.sw), -1);  // phase -> its plane, or -1
    for (std::int64_t ky = 0; ky < kh; ++ky)
      for (std::int64_t kx = 0; kx < kw; ++kx) {
        auto& s = slot[static_cast<std::size_t>((ky * g.dh % g.sh) * g.sw + kx * g.dw % g.sw)];
        if (s < 0) s = phases_++;
      }
    const std::int64_t k = channels * kh * kw, plane = hq_ * wq_, n = g.oh * wq_;
    offsets_.resize(static_cast<std::size_t>(k));
    weights_t_ = transposed_weights(weights, out_channels, k);
    floats_ = channels * phases_ * plane;
    for (std::int64_t ci = 0; ci < channels; ++ci)
      for (std::int64_t ky = 0; ky < kh; ++ky)
        for (std::int64_t kx = 0; kx < kw; ++kx) {
          const std::int64_t tap = (ci * kh + ky) * kw + kx, y = ky * g.dh, x = kx * g.dw;
          const std::int64_t s = slot[static_cast<std::size_t>((y % g.sh) * g.sw + x % g.sw)];
          const std::int64_t at = (ci * phases_ + s) * plane + y / g.sh * wq_ + x / g.sw;
          offsets_[static_cast<std::size_t>(tap)] = at;
          floats_ = std::max(floats_, at + n);  // the last row's wrapped columns run past the planes
        }
    // Input row y, columns x with (x + left) % sW == b: phase plane (r % sH, b) of r = y + top,
    // row r / sH, from column (x + left) / sW of the first such x.
    for (std::int64_t y = 0; y < g.h; ++y)
      for (std::int64_t b = 0; b < g.sw; ++b) {
        const std::int64_t r = y + g.top, s = slot[static_cast<std::size_t>((r % g.sh) * g.sw + b)];
        if (s < 0) continue;
        const std::int64_t first = ((b - g.left) % g.sw + g.sw) % g.sw;
        row_copies_.push_back({y, first, s * plane + r / g.sh * wq_ + (first + g.left) / g.sw});
      }
  }

  // The phase planes' floats (zeroed once per call: each image writes their interior only) and
  // the wide output's (0 where the output is written in place).
  std::int64_t plane_floats() const { return floats_; }
  std::int64_t wide_floats() const { return wq_ == g_.ow ? 0 : m_ * g_.oh * wq_; }
  std::int64_t bytes() const {
    return static_cast<std::int64_t>((offsets_.size() * sizeof(long)) + weights_t_.size() * sizeof(float) +
                                     row_copies_.size() * sizeof(RowCopy));
  }

  // in [C, H, W] of this group -> out [M, oH, oW], through planes (plane_floats(), borders zero)
  // and wide (wide_floats()).
  void run(const models::cnn_cpu::Kernels& kernels, const float* in, const float* bias, bool relu, float* planes,
           float* wide, float* out) const {
    const std::int64_t h = g_.h, w = g_.w, sw = g_.sw, channel_floats = phases_ * hq_ * wq_;
    for (std::int64_t ci = 0; ci < c_; ++ci) {
      const float* image = in + ci * h * w;
      float* channel = planes + ci * channel_floats;
      for (const RowCopy& rc : row_copies_) {
        const float* src = image + rc.row * w;
        float* dst = channel + rc.to;
        if (sw == 1) {
          copy_row(src, w, dst);
          continue;
        }
        for (std::int64_t x = rc.first, j = 0; x < w; x += sw, ++j) dst[j] = src[x];
      }
    }
    const std::int64_t n = g_.oh * wq_, ow = g_.ow, rows = m_ * g_.oh;
    float* c = wq_ == ow ? out : wide;
    kernels.gemm_offset_rows(static_cast<int>(m_), static_cast<int>(n), static_cast<int>(offsets_.size()),
                             weights_t_.data(), planes, offsets_.data(), c, n, {nullptr, relu, bias});
    if (c == out) return;
    for (std::int64_t row = 0; row < rows; ++row) copy_row(c + row * wq_, ow, out + row * ow);
  }

 private:
  Window g_;
  std::int64_t c_, m_, hq_ = 0, wq_ = 0, phases_ = 0, floats_ = 0;
  struct RowCopy {
    std::int64_t row, first, to;  // input row, its first column copied, where it goes in a channel's planes
  };
  std::vector<RowCopy> row_copies_;
  std::vector<long> offsets_;
  FloatBuffer weights_t_;
};

// A Conv node's DirectConv per group for one input shape (batch aside), kept by the runner
// where the weights are the graph's constants.
struct DirectConvs final : Prepared {
  std::vector<std::int64_t> sample_shape;
  std::vector<DirectConv> groups;
  std::int64_t bytes() const override {
    std::int64_t b = 0;
    for (const auto& d : groups) b += d.bytes();
    return b;
  }
};

// A Conv node's weights as [k, M] (tap-major), for the pixel-rows GEMM, kept by the runner where
// they are the graph's constants.
struct TransposedWeights final : Prepared {
  std::vector<std::int64_t> weight_shape;
  FloatBuffer values;
  TransposedWeights(const Tensor& w, std::int64_t m, std::int64_t k)
      : weight_shape(w.shape), values(transposed_weights(w.f.data(), m, k)) {}
  std::int64_t bytes() const override { return static_cast<std::int64_t>(values.size() * sizeof(float)); }
};

// Up to this many output pixels, with whole vectors of output channels and no groups, the GEMM
// runs transposed (the pixel-rows path): C^T [pixels, M] = col^T W^T, its vectors over the
// output channels. Over pixels, a 7 x 7 output fills 49 of 64 lanes (63 of them computed on
// the phase planes); over 512 channels every lane counts. The same products in the same order:
// the same bits. A ResNet-18's 7 x 7-output convolutions, relative to its 56 x 56 ones in the
// same run (build/bench_graph_conv): 0.52-0.63 -> 0.76-0.78 of their GFLOP/s; its 14 x 14 ones
// lost (0.93 -> 0.85): not taken there.
constexpr std::int64_t kPixelRowsMax = 64;

// Conv: X [N, C, H, W], W [M, C/group, kH, kW], optional B [M]. Per image and group one GEMM
// (the CPU backend's tuned kernel: each output row's reduction in one fixed order) whose
// epilogue adds the bias and, for a Relu fused at load (attribute spmd_relu), clamps. Its
// right-hand side: the image itself for a 1x1 kernel with stride 1 and no padding, the padded
// image's phase planes at each tap's offset (DirectConv) for others, except where most of
// those planes' columns would be wasted: then the im2col matrix. Few pixels and many channels:
// the pixel-rows path above.
void pixel_rows_conv(const OpCall& call, const Tensor& x, const Tensor& wt, const Window& g, std::int64_t kh,
                     std::int64_t kw, bool in_place, const float* bias, bool relu, Tensor& y) {
  const std::int64_t m = wt.shape[0], k = g.c * kh * kw, pixels = g.oh * g.ow;
  const bool keep = call.prepared != nullptr && call.constant_input(1);
  auto* kept = keep ? dynamic_cast<TransposedWeights*>(call.prepared->get()) : nullptr;
  std::unique_ptr<TransposedWeights> local;
  if (kept == nullptr || kept->weight_shape != wt.shape) {
    local = std::make_unique<TransposedWeights>(wt, m, k);
    kept = local.get();
    if (keep) *call.prepared = std::move(local);
  }
  const auto& kernels = models::cnn_cpu::kernels_for(models::cnn_cpu::resolve_isa(models::cnn_cpu::Isa::Auto));
  float* col = in_place ? nullptr : scratch(Scratch::Im2col, k * pixels).data();
  float* ct = scratch(Scratch::ConvWide, pixels * m).data();
  for (std::int64_t n = 0; n < g.n; ++n) {
    const float* in = x.f.data() + n * g.c * g.h * g.w;
    if (!in_place) im2col(in, g, g.c, kh, kw, col);
    kernels.gemm(true, static_cast<int>(pixels), static_cast<int>(m), static_cast<int>(k), in_place ? in : col, pixels,
                 kept->values.data(), m, ct, m, false, {bias, relu, nullptr});
    float* out = y.f.data() + n * m * pixels;
    for (std::int64_t p = 0; p < pixels; ++p)
      for (std::int64_t o = 0; o < m; ++o) out[o * pixels + p] = ct[p * m + o];
  }
}

void conv(const OpCall& call) {
  const Tensor& x = call.float_input(0);
  const Tensor& wt = call.float_input(1);
  if (x.shape.size() > 4) return conv_nd(call);
  if (wt.shape.size() != x.shape.size()) call.fail("weights " + to_string(wt.shape) + " do not match input " + to_string(x.shape));
  call.check_kernel_shape(wt);
  const std::int64_t kh = x.shape.size() == 3 ? 1 : wt.shape[2], kw = wt.shape.back();
  const Window g = window_of(call, x, kh, kw, false);
  const std::int64_t group = call.node.attrs.i("group", 1), m = wt.shape[0];
  if (group < 1 || g.c % group != 0 || m % group != 0 || wt.shape[1] * group != g.c)
    call.fail("group " + std::to_string(group) + " does not divide input channels " + std::to_string(g.c) +
              " and weights " + to_string(wt.shape));
  const std::int64_t cg = g.c / group, mg = m / group, k = cg * kh * kw, pixels = g.oh * g.ow;
  if (call.has_input(2) && call.float_input(2).size() != m) call.fail("bias has " + std::to_string(call.input(2).size()) + " values for " + std::to_string(m) + " output channels");
  const float* bias = call.has_input(2) ? call.float_input(2).f.data() : nullptr;
  const bool relu = call.node.attrs.i("spmd_relu", 0) != 0;
  const bool unpadded = g.top == 0 && g.left == 0 && g.bottom == 0 && g.right == 0;
  const bool in_place = kh == 1 && kw == 1 && g.sh == 1 && g.sw == 1 && unpadded;
  const bool pixel_rows = group == 1 && m % 16 == 0 && pixels <= kPixelRowsMax;
  // The phase planes (one per stride phase), unless their wrapped columns would be most of the
  // work or a stride passes the padded input (one window along it; stride^2 planes of nothing).
  const bool direct = !in_place && 2 * g.ow * g.sw >= g.w + g.left + g.right && g.sh <= g.h + g.top + g.bottom &&
                      g.sw <= g.w + g.left + g.right;
  Tensor& y = *call.out[0];
  y.reset(ElemType::Float32, output_shape(x, m, g));
  if (pixel_rows) return pixel_rows_conv(call, x, wt, g, kh, kw, in_place, bias, relu, y);
  const auto& kernels = models::cnn_cpu::kernels_for(models::cnn_cpu::resolve_isa(models::cnn_cpu::Isa::Auto));
  const std::vector<std::int64_t> sample_shape(x.shape.begin() + 1, x.shape.end());
  // Each group's DirectConv, kept by the runner where the weights are the graph's constants.
  std::unique_ptr<DirectConvs> local;
  DirectConvs* convs = nullptr;
  if (direct) {
    const bool keep = call.prepared != nullptr && call.constant_input(1);
    if (keep) convs = dynamic_cast<DirectConvs*>(call.prepared->get());
    if (convs == nullptr || convs->sample_shape != sample_shape) {
      auto made = std::make_unique<DirectConvs>();
      made->sample_shape = sample_shape;
      for (std::int64_t gi = 0; gi < group; ++gi)
        made->groups.emplace_back(g, cg, kh, kw, wt.f.data() + gi * mg * k, mg);
      convs = made.get();
      if (keep) *call.prepared = std::move(made);
      else local = std::move(made);
    }
  }
  float* phase_planes = direct ? scratch(Scratch::ConvPlanes, convs->groups.front().plane_floats()).data() : nullptr;
  float* wide = direct ? scratch(Scratch::ConvWide, convs->groups.front().wide_floats()).data() : nullptr;
  float* col = !direct && !in_place ? scratch(Scratch::Im2col, k * pixels).data() : nullptr;
  if (direct) std::fill_n(phase_planes, convs->groups.front().plane_floats(), 0.0f);
  for (std::int64_t n = 0; n < g.n; ++n) {
    for (std::int64_t gi = 0; gi < group; ++gi) {
      const float* in = x.f.data() + (n * g.c + gi * cg) * g.h * g.w;
      float* out = y.f.data() + (n * m + gi * mg) * pixels;
      const float* group_bias = bias ? bias + gi * mg : nullptr;
      if (direct) {
        convs->groups[static_cast<std::size_t>(gi)].run(kernels, in, group_bias, relu, phase_planes, wide, out);
        continue;
      }
      if (!in_place) im2col(in, g, cg, kh, kw, col);
      kernels.gemm(false, static_cast<int>(mg), static_cast<int>(pixels), static_cast<int>(k),
                   wt.f.data() + gi * mg * k, k, in_place ? in : col, pixels, out, pixels, false,
                   {nullptr, relu, group_bias});
    }
  }
}
// BatchNormalization (inference): y = (x - mean) / sqrt(var + epsilon) * scale + bias per channel.
void batch_norm(const OpCall& call) {
  const Tensor& x = call.float_input(0);
  if (call.node.attrs.i("training_mode", 0) != 0 || call.out.size() > 1) call.fail(kTrainingModeRefusal);
  if (call.node.attrs.i("spatial", 1) == 0) call.fail("spatial = 0 (statistics per activation, opsets before 9) is not supported");
  const float eps = call.node.attrs.f("epsilon", 1e-5f);
  const auto& scale = call.float_input(1).f;
  const auto& bias = call.float_input(2).f;
  const auto& mean = call.float_input(3).f;
  const auto& var = call.float_input(4).f;
  if (x.shape.size() < 2) call.fail("input " + to_string(x.shape) + " has no channel dimension");
  std::int64_t spatial = 1;
  for (std::size_t k = 2; k < x.shape.size(); ++k) spatial *= x.shape[k];
  const std::int64_t channels = x.shape[1];
  for (std::size_t k = 1; k <= 4; ++k)
    if (call.input(k).size() != channels) call.fail("input " + std::to_string(k) + " has " + std::to_string(call.input(k).size()) + " values for " + std::to_string(channels) + " channels");
  Tensor& y = *call.out[0];
  y.reset(ElemType::Float32, x.shape);
  for (std::int64_t plane = 0; plane < x.shape[0] * channels; ++plane) {
    const auto c = static_cast<std::size_t>(plane % channels);
    const float a = scale[c] / std::sqrt(var[c] + eps), b = bias[c] - mean[c] * a;
    const float* in = x.f.data() + plane * spatial;
    float* out = y.f.data() + plane * spatial;
    for (std::int64_t p = 0; p < spatial; ++p) out[p] = in[p] * a + b;
  }
}

}  // namespace

SPMD_REGISTER_GRAPH_OP("Conv", conv);
SPMD_REGISTER_GRAPH_OP("BatchNormalization", batch_norm);

}  // namespace spmd::ops
