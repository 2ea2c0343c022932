// ConvTranspose over one or two spatial dimensions (PyTorch's ConvTranspose1d / 2d): per image
// and group, the columns W^T x by the tuned GEMM, then scattered into the output (col2im) with
// strides, pads, dilations, output_padding, output_shape and auto_pad as ONNX defines them.
// Every image is computed on its own, in the same order whatever the batch.
#include <algorithm>
#include <vector>

#include "spmd/models/cnn_kernels.hpp"
#include "spmd/ops/graph_op.hpp"

namespace spmd::ops {
namespace {

struct Axis {  // one spatial dimension: input, kernel, stride, dilation, pads, output
  std::int64_t in = 1, k = 1, stride = 1, dilation = 1, begin = 0, end = 0, out = 1;
};

std::vector<Axis> axes_of(const OpCall& c, const Tensor& x, const Tensor& w) {
  const Attrs& a = c.node.attrs;
  const std::size_t dims = x.shape.size() - 2;

  const auto strides = c.ints_per_dim("strides", dims, 1), dilations = c.ints_per_dim("dilations", dims, 1);
  const auto output_padding = c.ints_per_dim("output_padding", dims, 0);
  c.check_kernel_shape(w);
  const std::vector<std::int64_t> kernel(w.shape.begin() + 2, w.shape.end());
  auto pads = c.ints_per_dim("pads", 2 * dims, 0);
  const auto output_shape = a.ints_or("output_shape", {});
  const std::string auto_pad = a.s("auto_pad", "NOTSET");
  if (kernel.size() != dims) c.fail("kernel_shape must have " + std::to_string(dims) + " values");
  std::vector<Axis> axes(dims);
  for (std::size_t d = 0; d < dims; ++d) {
    Axis& ax = axes[d];
    ax = {x.shape[d + 2], kernel[d], strides[d], dilations[d], pads[d], pads[d + dims], 0};
    const std::int64_t full = ax.stride * (ax.in - 1) + output_padding[d] + (ax.k - 1) * ax.dilation + 1;
    const bool from_shape = !output_shape.empty();
    if (from_shape || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const std::int64_t want = from_shape ? output_shape[output_shape.size() - dims + d] : ax.in * ax.stride;
      const std::int64_t total = std::max<std::int64_t>(0, full - want);
      // ONNX's rule: SAME_UPPER puts the smaller half first; SAME_LOWER and output_shape alone the larger.
      ax.begin = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      ax.end = total - ax.begin;
      ax.out = want;  // past the last window (want > full): the bias alone, as ONNX Runtime
      continue;
    } else if (auto_pad == "VALID") {
      ax.begin = ax.end = 0;
    } else if (auto_pad != "NOTSET") {
      c.fail("auto_pad '" + auto_pad + "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
    }
    ax.out = full - ax.begin - ax.end;
    if (ax.out < 1) c.fail("the output would be empty along spatial dimension " + std::to_string(d));
  }
  return axes;
}

void conv_transpose(const OpCall& c) {
  const Tensor& x = c.float_input(0);
  const Tensor& w = c.float_input(1);
  if (x.shape.size() != 3 && x.shape.size() != 4) c.fail("input " + to_string(x.shape) + " is not [N, C, L] or [N, C, H, W]");
  if (w.shape.size() != x.shape.size()) c.fail("weights " + to_string(w.shape) + " do not match input " + to_string(x.shape));
  const std::int64_t group = c.node.attrs.i("group", 1);
  const std::int64_t n = x.shape[0], cin = x.shape[1];
  if (group < 1 || cin % group != 0 || w.shape[0] != cin)
    c.fail("weights " + to_string(w.shape) + " do not fit " + std::to_string(cin) + " input channels in " + std::to_string(group) + " groups");
  std::vector<Axis> axes = axes_of(c, x, w);
  if (axes.size() == 1) axes.insert(axes.begin(), Axis{});  // [N, C, L] as height 1
  const Axis &ah = axes[0], &aw = axes[1];
  const std::int64_t cin_g = cin / group, cout_g = w.shape[1], cout = cout_g * group;
  const std::int64_t taps = ah.k * aw.k, m = cout_g * taps, pixels = ah.in * aw.in, plane = ah.out * aw.out;
  const float* bias = c.has_input(2) ? c.float_input(2).f.data() : nullptr;
  if (bias && c.input(2).size() != cout) c.fail("bias has " + std::to_string(c.input(2).size()) + " values for " + std::to_string(cout) + " channels");
  std::vector<std::int64_t> shape{n, cout};
  if (x.shape.size() == 4) shape.push_back(ah.out);
  shape.push_back(aw.out);
  Tensor& y = *c.out[0];
  y.reset(ElemType::Float32, shape);
  FloatBuffer& col = scratch(Scratch::Im2col, m * pixels);
  const auto& kernels = models::cnn_cpu::kernels_for(models::cnn_cpu::resolve_isa(models::cnn_cpu::Isa::Auto));
  for (std::int64_t img = 0; img < n; ++img)
    for (std::int64_t g = 0; g < group; ++g) {
      // col[(co, ky, kx), pixel] = sum_ci W[ci, co, ky, kx] x[ci, pixel]: W_g is [cin_g, m] = A^T.
      kernels.gemm(true, static_cast<int>(m), static_cast<int>(pixels), static_cast<int>(cin_g), w.f.data() + g * cin_g * m, m,
                   x.f.data() + (img * cin + g * cin_g) * pixels, pixels, col.data(), pixels, false, {});
      for (std::int64_t co = 0; co < cout_g; ++co) {
        float* out = y.f.data() + (img * cout + g * cout_g + co) * plane;
        std::fill_n(out, plane, bias ? bias[g * cout_g + co] : 0.0f);
        for (std::int64_t ky = 0; ky < ah.k; ++ky)
          for (std::int64_t kx = 0; kx < aw.k; ++kx) {
            const float* row = col.data() + ((co * ah.k + ky) * aw.k + kx) * pixels;
            for (std::int64_t iy = 0; iy < ah.in; ++iy) {
              const std::int64_t oy = iy * ah.stride + ky * ah.dilation - ah.begin;
              if (oy < 0 || oy >= ah.out) continue;
              for (std::int64_t ix = 0; ix < aw.in; ++ix) {
                const std::int64_t ox = ix * aw.stride + kx * aw.dilation - aw.begin;
                if (ox >= 0 && ox < aw.out) out[oy * aw.out + ox] += row[iy * aw.in + ix];
              }
            }
          }
      }
    }
}

}  // namespace

SPMD_REGISTER_GRAPH_OP("ConvTranspose", conv_transpose);

}  // namespace spmd::ops
