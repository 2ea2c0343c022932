// Pooling graph ops (MaxPool with or without Indices, AveragePool, the global pools) over NCHW
// tensors with two spatial dimensions (1-D ones run as height 1; more: graph_pool_nd.cpp).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "graph_nd.hpp"
#include "graph_window.hpp"
#include "spmd/ops/graph_op.hpp"
#include "vector_math.hpp"

namespace spmd::ops {
namespace {

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
  FloatBuffer& frame = scratch(Scratch::PoolFrame, framed ? fh * fw : 0);
  std::fill(frame.begin(), frame.end(), kMax ? -std::numeric_limits<float>::infinity() : 0.0f);
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
  call.check_window_ints("kernel_shape", kernel);
  const std::int64_t kh = kernel.size() == 2 ? kernel[0] : 1, kw = kernel.back();
  const Window g = window_of(call, x, kh, kw, call.node.attrs.i("ceil_mode", 0) != 0);
  check_pool_pads(call, {g.top, g.left, g.bottom, g.right}, {kh, kw});
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

// MaxPool over integers (a quantized model's uint8 / int8 values, opset 12): the float kernel
// on their float values, exact for every integer of 24 bits or fewer, back to int64.
void max_pool(const OpCall& call) {
  const Tensor& x = call.input(0);
  if (x.type == ElemType::Float32) return pool<true>(call);
  thread_local Tensor values;
  values.reset(ElemType::Float32, x.shape);
  std::uint64_t beyond = 0;  // one pass the compiler vectorises: any value outside [-2^24, 2^24]
  for (std::size_t k = 0; k < x.i.size(); ++k) {
    beyond |= static_cast<std::uint64_t>(x.i[k] + (1 << 24)) > (std::uint64_t{2} << 24);
    values.f[k] = static_cast<float>(static_cast<std::int32_t>(x.i[k]));
  }
  if (beyond) call.fail("integer input beyond 2^24 (MaxPool takes float and 8- or 16-bit values)");
  const Tensor* in[] = {&values};
  pool<true>(OpCall{call.node, in, call.out});
  Tensor& y = *call.out[0];
  y.reset(ElemType::Int64, y.shape);  // keeps the floats the pool wrote
  for (std::size_t k = 0; k < y.i.size(); ++k) y.i[k] = static_cast<std::int32_t>(y.f[k]);
}

}  // namespace

SPMD_REGISTER_GRAPH_OP("MaxPool", max_pool);
SPMD_REGISTER_GRAPH_OP("AveragePool", pool<false>);
SPMD_REGISTER_GRAPH_OP("GlobalMaxPool", global_pool<true>);
SPMD_REGISTER_GRAPH_OP("GlobalAveragePool", global_pool<false>);

}  // namespace spmd::ops
