// Convolution and pooling graph ops over NCHW tensors with two spatial dimensions (1-D ones
// run as height 1). Every image is computed on its own, in the same order whatever the batch.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "spmd/models/cnn_kernels.hpp"
#include "graph_nd.hpp"
#include "spmd/ops/graph_op.hpp"
#include "vector_math.hpp"

namespace spmd::ops {
namespace {

// The spatial geometry of a Conv or pooling node on input [N, C, H, W].
struct Window {
  std::int64_t n = 0, c = 0, h = 0, w = 0;  // input
  std::int64_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1;
  std::int64_t top = 0, left = 0, bottom = 0, right = 0;
  std::int64_t oh = 0, ow = 0;
};

// Reads shape, kernel_shape, strides, dilations, pads and auto_pad (ONNX's rules); 1-D
// inputs [N, C, L] are [N, C, 1, L].
Window window_of(const OpCall& call, const Tensor& x, std::int64_t kh, std::int64_t kw, bool ceil_mode) {
  const Attrs& a = call.node.attrs;
  Window g;
  const bool one_d = x.shape.size() == 3;
  if (x.shape.size() != 4 && !one_d) call.fail("input " + to_string(x.shape) + " is not [N, C, H, W] or [N, C, L]");
  g.n = x.shape[0];
  g.c = x.shape[1];
  g.h = one_d ? 1 : x.shape[2];
  g.w = x.shape.back();
  const auto two = [&](const std::string& name, std::int64_t fallback) {
    auto v = a.ints_or(name, {});
    if (v.empty()) return std::vector<std::int64_t>{fallback, fallback};
    if (one_d && v.size() == 1) return std::vector<std::int64_t>{1, v[0]};
    if (v.size() != 2) call.fail(name + " must have one value per spatial dimension");
    return v;
  };
  g.kh = kh;
  g.kw = kw;
  const auto s = two("strides", 1), d = two("dilations", 1);
  g.sh = s[0];
  g.sw = s[1];
  g.dh = d[0];
  g.dw = d[1];
  auto pads = a.ints_or("pads", {});
  if (one_d && pads.size() == 2) pads = {0, pads[0], 0, pads[1]};
  if (!pads.empty() && pads.size() != 4) call.fail("pads must have 2 values per spatial dimension");
  if (!pads.empty()) {
    g.top = pads[0];
    g.left = pads[1];
    g.bottom = pads[2];
    g.right = pads[3];
  }
  const std::string auto_pad = a.s("auto_pad", "NOTSET");
  const std::int64_t ekh = (kh - 1) * g.dh + 1, ekw = (kw - 1) * g.dw + 1;  // effective kernel
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    const auto split = [&](std::int64_t in, std::int64_t stride, std::int64_t k, std::int64_t& lo, std::int64_t& hi) {
      const std::int64_t out = (in + stride - 1) / stride;
      const std::int64_t total = std::max<std::int64_t>(0, (out - 1) * stride + k - in);
      lo = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      hi = total - lo;
    };
    split(g.h, g.sh, ekh, g.top, g.bottom);
    split(g.w, g.sw, ekw, g.left, g.right);
  } else if (auto_pad == "VALID") {
    g.top = g.left = g.bottom = g.right = 0;
  } else if (auto_pad != "NOTSET") {
    call.fail("auto_pad '" + auto_pad + "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
  }
  const auto out = [&](std::int64_t in, std::int64_t lo, std::int64_t hi, std::int64_t k, std::int64_t stride) {
    const std::int64_t span = in + lo + hi - k;
    if (span < 0) return std::int64_t{0};  // the (dilated) kernel is larger than the padded input
    return (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  };
  g.oh = out(g.h, g.top, g.bottom, ekh, g.sh);
  g.ow = out(g.w, g.left, g.right, ekw, g.sw);
  if (g.oh < 1 || g.ow < 1) call.fail("the window does not fit the input " + to_string(x.shape));
  return g;
}

std::vector<std::int64_t> output_shape(const Tensor& x, std::int64_t channels, const Window& g) {
  if (x.shape.size() == 3) return {g.n, channels, g.ow};
  return {g.n, channels, g.oh, g.ow};
}

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
    weights_t_.resize(static_cast<std::size_t>(k * out_channels));
    floats_ = channels * phases_ * plane;
    for (std::int64_t ci = 0; ci < channels; ++ci)
      for (std::int64_t ky = 0; ky < kh; ++ky)
        for (std::int64_t kx = 0; kx < kw; ++kx) {
          const std::int64_t tap = (ci * kh + ky) * kw + kx, y = ky * g.dh, x = kx * g.dw;
          const std::int64_t s = slot[static_cast<std::size_t>((y % g.sh) * g.sw + x % g.sw)];
          const std::int64_t at = (ci * phases_ + s) * plane + y / g.sh * wq_ + x / g.sw;
          offsets_[static_cast<std::size_t>(tap)] = at;
          floats_ = std::max(floats_, at + n);  // the last row's wrapped columns run past the planes
          for (std::int64_t o = 0; o < out_channels; ++o)
            weights_t_[static_cast<std::size_t>(tap * out_channels + o)] = weights[o * k + tap];
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

// Conv: X [N, C, H, W], W [M, C/group, kH, kW], optional B [M]. Per image and group one GEMM
// (the CPU backend's tuned kernel: each output row's reduction in one fixed order) whose
// epilogue adds the bias and, for a Relu fused at load (attribute spmd_relu), clamps. Its
// right-hand side: the image itself for a 1x1 kernel with stride 1 and no padding, the padded
// image's phase planes at each tap's offset (DirectConv) for others, except where most of
// those planes' columns would be wasted: then the im2col matrix.
void conv(const OpCall& call) {
  const Tensor& x = call.float_input(0);
  const Tensor& wt = call.float_input(1);
  if (x.shape.size() > 4) return conv_nd(call);
  if (wt.shape.size() != x.shape.size()) call.fail("weights " + to_string(wt.shape) + " do not match input " + to_string(x.shape));
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
  // The phase planes, unless their wrapped columns would be most of the work.
  const bool direct = !in_place && 2 * g.ow * g.sw >= g.w + g.left + g.right;
  Tensor& y = *call.out[0];
  y.reset(ElemType::Float32, output_shape(x, m, g));
  const auto& kernels = models::cnn_cpu::kernels_for(models::cnn_cpu::resolve_isa(models::cnn_cpu::Isa::Auto));
  FloatBuffer& col = scratch(Scratch::Im2col);
  FloatBuffer& phase_planes = scratch(Scratch::ConvPlanes);
  FloatBuffer& wide = scratch(Scratch::ConvWide);
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
    phase_planes.assign(static_cast<std::size_t>(convs->groups.front().plane_floats()), 0.0f);
    wide.resize(static_cast<std::size_t>(convs->groups.front().wide_floats()));
  }
  if (!direct && !in_place) col.resize(static_cast<std::size_t>(k * pixels));
  for (std::int64_t n = 0; n < g.n; ++n) {
    for (std::int64_t gi = 0; gi < group; ++gi) {
      const float* in = x.f.data() + (n * g.c + gi * cg) * g.h * g.w;
      float* out = y.f.data() + (n * m + gi * mg) * pixels;
      const float* group_bias = bias ? bias + gi * mg : nullptr;
      if (direct) {
        convs->groups[static_cast<std::size_t>(gi)].run(kernels, in, group_bias, relu, phase_planes.data(), wide.data(),
                                                         out);
        continue;
      }
      if (!in_place) im2col(in, g, cg, kh, kw, col.data());
      kernels.gemm(false, static_cast<int>(mg), static_cast<int>(pixels), static_cast<int>(k),
                   wt.f.data() + gi * mg * k, k, in_place ? in : col.data(), pixels, out, pixels, false,
                   {nullptr, relu, group_bias});
    }
  }
}

// MaxPool with its Indices output (PyTorch 2's exporter writes max_pool2d as
// max_pool2d_with_indices): each maximum's position in the input flattened row-major
// (storage_order 1: each plane column-major), the first of equal maxima in tap order.
void max_pool_with_indices(const OpCall& call, const Tensor& x, const Window& g, std::int64_t kh, std::int64_t kw) {
  const bool column_major = call.node.attrs.i("storage_order", 0) != 0;
  Tensor& y = *call.out[0];
  Tensor& at = *call.out[1];
  y.reset(ElemType::Float32, output_shape(x, g.c, g));
  at.reset(ElemType::Int64, y.shape);
  for (std::int64_t plane = 0; plane < g.n * g.c; ++plane)
    for (std::int64_t oy = 0; oy < g.oh; ++oy)
      for (std::int64_t ox = 0; ox < g.ow; ++ox) {
        float best = -std::numeric_limits<float>::infinity();
        std::int64_t where = -1;
        for (std::int64_t ky = 0; ky < kh; ++ky)
          for (std::int64_t kx = 0; kx < kw; ++kx) {
            const std::int64_t iy = oy * g.sh - g.top + ky * g.dh, ix = ox * g.sw - g.left + kx * g.dw;
            if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
            const float v = x.f[static_cast<std::size_t>((plane * g.h + iy) * g.w + ix)];
            if (where < 0 || v > best) {
              best = v;
              where = plane * g.h * g.w + (column_major ? ix * g.h + iy : iy * g.w + ix);
            }
          }
        const auto o = static_cast<std::size_t>((plane * g.oh + oy) * g.ow + ox);
        y.f[o] = best;
        at.i[o] = where;
      }
}

// Pooling windows that lie inside their plane: tap (ky, kx) of output (oy, ox) is
// in[oy * row_stride + ky * tap_row + ox * S + kx].
struct InsideWindows {
  std::int64_t row_stride, tap_row, rows, cols;
  std::int64_t kh, kw, sw, dw;  // for the loop over any kernel
};

// A KH x KW pool of column stride S and column dilation 1 over such windows, the taps unrolled
// in the definition's order, so that the loop over outputs vectorises (small planes, 13 x 13
// pooled to 6 x 6, spent most of their time in a per-output loop over the taps). AveragePool
// leaves the sums; its divisors depend on the padding.
template <bool kMax, int KH, int KW, int S>
void pool_inside(const float* __restrict in, const InsideWindows& iw, float* __restrict out) {
  for (std::int64_t oy = 0; oy < iw.rows; ++oy) {
    const float* row = in + oy * iw.row_stride;
    float* o = out + oy * iw.cols;
    for (std::int64_t ox = 0; ox < iw.cols; ++ox) {
      float acc = kMax ? -std::numeric_limits<float>::infinity() : 0.0f;
#pragma GCC unroll 9
      for (int ky = 0; ky < KH; ++ky)
#pragma GCC unroll 9
        for (int kx = 0; kx < KW; ++kx) {
          const float v = row[ky * iw.tap_row + ox * S + kx];
          acc = kMax ? std::max(acc, v) : acc + v;
        }
      o[ox] = acc;
    }
  }
}

// Any other kernel, stride and dilation.
template <bool kMax>
void pool_inside_any(const float* __restrict in, const InsideWindows& iw, float* __restrict out) {
  for (std::int64_t oy = 0; oy < iw.rows; ++oy)
    for (std::int64_t ox = 0; ox < iw.cols; ++ox) {
      const float* window = in + oy * iw.row_stride + ox * iw.sw;
      float acc = kMax ? -std::numeric_limits<float>::infinity() : 0.0f;
      for (std::int64_t ky = 0; ky < iw.kh; ++ky)
        for (std::int64_t kx = 0; kx < iw.kw; ++kx) {
          const float v = window[ky * iw.tap_row + kx * iw.dw];
          acc = kMax ? std::max(acc, v) : acc + v;
        }
      out[oy * iw.cols + ox] = acc;
    }
}

using PoolInside = void (*)(const float* __restrict, const InsideWindows&, float* __restrict);

// The unrolled pool for the common kernels (2x2, 3x3, and 1-D 2 and 3; strides 1 and 2).
template <bool kMax>
PoolInside pool_inside_for(std::int64_t kh, std::int64_t kw, std::int64_t sw, std::int64_t dw) {
  if (dw != 1 || (sw != 1 && sw != 2) || (kh != kw && kh != 1) || kw < 2 || kw > 3) return pool_inside_any<kMax>;
  if (kh == 1) {
    if (kw == 2) return sw == 1 ? pool_inside<kMax, 1, 2, 1> : pool_inside<kMax, 1, 2, 2>;
    return sw == 1 ? pool_inside<kMax, 1, 3, 1> : pool_inside<kMax, 1, 3, 2>;
  }
  if (kh == 2) return sw == 1 ? pool_inside<kMax, 2, 2, 1> : pool_inside<kMax, 2, 2, 2>;
  return sw == 1 ? pool_inside<kMax, 3, 3, 1> : pool_inside<kMax, 3, 3, 2>;
}

// MaxPool and AveragePool: a plane with padding (or ceil_mode windows past its edge) is first copied
// into a frame of values that change nothing, -inf for MaxPool (the definition skips taps
// outside the image; max(acc, -inf) is acc) and 0 for AveragePool's sums (acc + 0 is acc: a
// sum from +0 is never -0), so that every window is inside. The same bits as the generic loop.
template <bool kMax>
void pool_framed(const Tensor& x, const Window& g, std::int64_t kh, std::int64_t kw, bool include_pad, Tensor& y) {
  const PoolInside pool_planes = pool_inside_for<kMax>(kh, kw, g.sw, g.dw);
  const std::int64_t fh = std::max((g.oh - 1) * g.sh + (kh - 1) * g.dh + 1, g.top + g.h);
  const std::int64_t fw = std::max((g.ow - 1) * g.sw + (kw - 1) * g.dw + 1, g.left + g.w);
  const bool framed = g.top > 0 || g.left > 0 || fh > g.h || fw > g.w;
  FloatBuffer& frame = scratch(Scratch::PoolFrame);
  frame.assign(framed ? static_cast<std::size_t>(fh * fw) : 0, kMax ? -std::numeric_limits<float>::infinity() : 0.0f);
  const std::int64_t stride = framed ? fw : g.w;
  const InsideWindows iw{g.sh * stride, g.dh * stride, g.oh, g.ow, kh, kw, g.sw, g.dw};
  for (std::int64_t plane = 0; plane < g.n * g.c; ++plane) {
    const float* in = x.f.data() + plane * g.h * g.w;
    if (framed) {
      for (std::int64_t r = 0; r < g.h; ++r) std::copy_n(in + r * g.w, g.w, frame.data() + (g.top + r) * fw + g.left);
      in = frame.data();
    }
    pool_planes(in, iw, y.f.data() + plane * g.oh * g.ow);
  }
  if (kMax) return;
  // Per axis and output: the taps inside the image, and inside the image and its padding
  // (count_include_pad; not the part of a ceil_mode window past the padding).
  const auto taps = [](std::int64_t outputs, std::int64_t stride, std::int64_t pad, std::int64_t k, std::int64_t dil,
                       std::int64_t size, std::int64_t pad_end, bool padded) {
    std::vector<std::int64_t> n(static_cast<std::size_t>(outputs));
    for (std::int64_t o = 0; o < outputs; ++o)
      for (std::int64_t t = 0; t < k; ++t) {
        const std::int64_t i = o * stride - pad + t * dil;
        n[o] += padded ? i >= -pad && i < size + pad_end : i >= 0 && i < size;
      }
    return n;
  };
  const auto rows = taps(g.oh, g.sh, g.top, kh, g.dh, g.h, g.bottom, include_pad);
  const auto cols = taps(g.ow, g.sw, g.left, kw, g.dw, g.w, g.right, include_pad);
  float* out = y.f.data();
  for (std::int64_t plane = 0; plane < g.n * g.c; ++plane)
    for (std::int64_t oy = 0; oy < g.oh; ++oy)
      for (std::int64_t ox = 0; ox < g.ow; ++ox, ++out) *out /= static_cast<float>(rows[oy] * cols[ox]);
}

template <bool kMax>
void pool(const OpCall& call) {
  const Tensor& x = call.float_input(0);
  const auto kernel = call.node.attrs.ints_or("kernel_shape", {});
  const bool indices = call.out.size() > 1 && call.out[1] != nullptr;
  if (kernel.size() > 2) {
    if (indices) call.fail("the Indices output of a pool over three or more spatial dimensions is not supported");
    return pool_nd(call, kMax);
  }
  if (kernel.empty()) call.fail("kernel_shape is missing");
  const std::int64_t kh = kernel.size() == 2 ? kernel[0] : 1, kw = kernel.back();
  const Window g = window_of(call, x, kh, kw, call.node.attrs.i("ceil_mode", 0) != 0);
  if (kMax && indices) return max_pool_with_indices(call, x, g, kh, kw);
  Tensor& y = *call.out[0];
  y.reset(ElemType::Float32, output_shape(x, g.c, g));
  pool_framed<kMax>(x, g, kh, kw, call.node.attrs.i("count_include_pad", 0) != 0, y);
}

template <bool kMax>
void global_pool(const OpCall& call) {
  const Tensor& x = call.float_input(0);
  if (x.shape.size() < 3) call.fail("input " + to_string(x.shape) + " has no spatial dimension");
  std::int64_t spatial = 1;
  for (std::size_t k = 2; k < x.shape.size(); ++k) spatial *= x.shape[k];
  auto shape = x.shape;
  std::fill(shape.begin() + 2, shape.end(), 1);
  Tensor& y = *call.out[0];
  y.reset(ElemType::Float32, shape);
  for (std::int64_t plane = 0; plane < x.shape[0] * x.shape[1]; ++plane) {
    const float* in = x.f.data() + plane * spatial;
    y.f[static_cast<std::size_t>(plane)] = kMax ? max_of(in, spatial) : lane_sum(in, spatial) / static_cast<float>(spatial);
  }
}

// BatchNormalization (inference): y = (x - mean) / sqrt(var + epsilon) * scale + bias per channel.
void batch_norm(const OpCall& call) {
  const Tensor& x = call.float_input(0);
  if (call.node.attrs.i("training_mode", 0) != 0 || call.out.size() > 1) call.fail("training_mode: only inference is supported");
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
SPMD_REGISTER_GRAPH_OP("MaxPool", pool<true>);
SPMD_REGISTER_GRAPH_OP("AveragePool", pool<false>);
SPMD_REGISTER_GRAPH_OP("GlobalMaxPool", global_pool<true>);
SPMD_REGISTER_GRAPH_OP("GlobalAveragePool", global_pool<false>);
SPMD_REGISTER_GRAPH_OP("BatchNormalization", batch_norm);

}  // namespace spmd::ops
