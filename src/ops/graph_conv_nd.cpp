#include <algorithm>
#include <vector>

#include "graph_nd.hpp"
#include "spmd/models/cnn_kernels.hpp"

namespace spmd::ops {
namespace {

// im2col of one image's group of channels (`planes`: cg input planes): row (channel, tap),
// column (output position); 0 where the tap falls in the padding.
void im2col_nd(const ConvShape& s, const float* planes, float* col) {
  std::vector<std::int64_t> tap(s.dims), o(s.dims);
  for (std::int64_t ci = 0; ci < s.cg; ++ci) {
    const float* src = planes + ci * s.plane;
    for (std::int64_t t = 0; t < s.taps; ++t) {
      for (std::int64_t r = t, d = static_cast<std::int64_t>(s.dims) - 1; d >= 0; --d) tap[d] = r % s.k[d], r /= s.k[d];
      float* dst = col + (ci * s.taps + t) * s.pixels;
      std::fill(o.begin(), o.end(), 0);
      for (std::int64_t p = 0; p < s.pixels; ++p) {
        std::int64_t offset = 0;
        bool inside = true;
        for (std::size_t d = 0; d < s.dims; ++d) {
          const std::int64_t i = o[d] * s.strides[d] - s.pads[d] + tap[d] * s.dilations[d];
          inside = inside && i >= 0 && i < s.in[d];
          offset = offset * s.in[d] + i;
        }
        dst[p] = inside ? src[offset] : 0.0f;
        for (std::int64_t d = static_cast<std::int64_t>(s.dims) - 1; d >= 0 && ++o[d] == s.out[d]; --d) o[d] = 0;
      }
    }
  }
}

}  // namespace

std::vector<std::int64_t> ConvShape::output_shape() const {
  std::vector<std::int64_t> shape{n, m};
  shape.insert(shape.end(), out.begin(), out.end());
  return shape;
}

ConvShape conv_shape(const OpCall& call, const std::vector<std::int64_t>& x, const std::vector<std::int64_t>& w) {
  if (x.size() < 3) call.fail("input " + to_string(x) + " is not [N, C, spatial...]");
  ConvShape s;
  s.dims = x.size() - 2;
  if (w.size() != x.size()) call.fail("weights " + to_string(w) + " do not match input " + to_string(x));
  s.n = x[0], s.c = x[1], s.m = w[0], s.group = call.node.attrs.i("group", 1);
  if (s.group < 1 || s.c % s.group != 0 || s.m % s.group != 0 || w[1] * s.group != s.c)
    call.fail("group " + std::to_string(s.group) + " does not divide input channels " + std::to_string(s.c) + " and weights " +
              to_string(w));
  s.strides = call.ints_per_dim("strides", s.dims, 1), s.dilations = call.ints_per_dim("dilations", s.dims, 1);
  s.pads = call.ints_per_dim("pads", 2 * s.dims, 0);
  s.in.resize(s.dims), s.k.resize(s.dims), s.out.resize(s.dims);
  for (std::size_t d = 0; d < s.dims; ++d) {
    s.in[d] = x[d + 2];
    s.k[d] = w[d + 2];
    const std::int64_t span = (s.k[d] - 1) * s.dilations[d] + 1;
    auto_pads(call, s.in[d], s.strides[d], span, s.pads[d], s.pads[d + s.dims]);
    const std::int64_t room = s.in[d] + s.pads[d] + s.pads[d + s.dims] - span;
    s.out[d] = room < 0 ? 0 : room / s.strides[d] + 1;
    if (s.out[d] < 1) call.fail("the kernel does not fit the input " + to_string(x));
    s.taps *= s.k[d], s.pixels *= s.out[d], s.plane *= s.in[d];
  }
  s.cg = s.c / s.group, s.mg = s.m / s.group;
  return s;
}

void conv_nd(const OpCall& call) {
  const Tensor& x = call.float_input(0);
  const Tensor& w = call.float_input(1);
  const ConvShape s = conv_shape(call, x.shape, w.shape);
  call.check_kernel_shape(w);
  const std::int64_t rows = s.col_rows();
  if (call.has_input(2) && call.float_input(2).size() != s.m) call.fail("bias has " + std::to_string(call.input(2).size()) + " values");
  const float* bias = call.has_input(2) ? call.float_input(2).f.data() : nullptr;
  const bool relu = call.node.attrs.i("spmd_relu", 0) != 0;
  Tensor& y = *call.out[0];
  y.reset(ElemType::Float32, s.output_shape());
  FloatBuffer& col = scratch(Scratch::Im2col, rows * s.pixels);
  const auto& kernels = models::cnn_cpu::kernels_for(models::cnn_cpu::resolve_isa(models::cnn_cpu::Isa::Auto));
  for (std::int64_t img = 0; img < s.n; ++img)
    for (std::int64_t g = 0; g < s.group; ++g) {
      im2col_nd(s, x.f.data() + (img * s.c + g * s.cg) * s.plane, col.data());
      kernels.gemm(false, static_cast<int>(s.mg), static_cast<int>(s.pixels), static_cast<int>(rows), w.f.data() + g * s.mg * rows,
                   rows, col.data(), s.pixels, y.f.data() + (img * s.m + g * s.mg) * s.pixels, s.pixels, false,
                   {nullptr, relu, bias ? bias + g * s.mg : nullptr});
    }
}

}  // namespace spmd::ops
