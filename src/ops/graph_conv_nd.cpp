#include <algorithm>
#include <vector>

#include "graph_nd.hpp"
#include "spmd/models/cnn_kernels.hpp"

namespace spmd::ops {

void conv_nd(const OpCall& call) {
  const Tensor& x = call.float_input(0);
  const Tensor& w = call.float_input(1);
  const std::size_t dims = x.shape.size() - 2;
  if (w.shape.size() != x.shape.size()) call.fail("weights " + to_string(w.shape) + " do not match input " + to_string(x.shape));
  call.check_kernel_shape(w);
  const std::int64_t n = x.shape[0], c = x.shape[1], m = w.shape[0], group = call.node.attrs.i("group", 1);
  if (group < 1 || c % group != 0 || m % group != 0 || w.shape[1] * group != c)
    call.fail("group " + std::to_string(group) + " does not divide input channels " + std::to_string(c) + " and weights " +
              to_string(w.shape));
  const auto strides = call.ints_per_dim("strides", dims, 1), dilations = call.ints_per_dim("dilations", dims, 1);
  auto pads = call.ints_per_dim("pads", 2 * dims, 0);
  std::vector<std::int64_t> in(dims), k(dims), out(dims);
  std::int64_t taps = 1, pixels = 1, plane = 1;
  for (std::size_t d = 0; d < dims; ++d) {
    in[d] = x.shape[d + 2];
    k[d] = w.shape[d + 2];
    const std::int64_t span = (k[d] - 1) * dilations[d] + 1;
    auto_pads(call, in[d], strides[d], span, pads[d], pads[d + dims]);
    const std::int64_t room = in[d] + pads[d] + pads[d + dims] - span;
    out[d] = room < 0 ? 0 : room / strides[d] + 1;
    if (out[d] < 1) call.fail("the kernel does not fit the input " + to_string(x.shape));
    taps *= k[d], pixels *= out[d], plane *= in[d];
  }
  const std::int64_t cg = c / group, mg = m / group, rows = cg * taps;
  if (call.has_input(2) && call.float_input(2).size() != m) call.fail("bias has " + std::to_string(call.input(2).size()) + " values");
  const float* bias = call.has_input(2) ? call.float_input(2).f.data() : nullptr;
  const bool relu = call.node.attrs.i("spmd_relu", 0) != 0;
  std::vector<std::int64_t> shape{n, m};
  shape.insert(shape.end(), out.begin(), out.end());
  Tensor& y = *call.out[0];
  y.reset(ElemType::Float32, shape);
  FloatBuffer& col = scratch(Scratch::Im2col, rows * pixels);
  const auto& kernels = models::cnn_cpu::kernels_for(models::cnn_cpu::resolve_isa(models::cnn_cpu::Isa::Auto));
  std::vector<std::int64_t> tap(dims), o(dims);
  for (std::int64_t img = 0; img < n; ++img)
    for (std::int64_t g = 0; g < group; ++g) {
      // im2col: row (channel, tap), column (output position); zero where the tap is in the padding.
      for (std::int64_t ci = 0; ci < cg; ++ci) {
        const float* src = x.f.data() + (img * c + g * cg + ci) * plane;
        for (std::int64_t t = 0; t < taps; ++t) {
          for (std::int64_t r = t, d = static_cast<std::int64_t>(dims) - 1; d >= 0; --d) tap[d] = r % k[d], r /= k[d];
          float* dst = col.data() + (ci * taps + t) * pixels;
          std::fill(o.begin(), o.end(), 0);
          for (std::int64_t p = 0; p < pixels; ++p) {
            std::int64_t offset = 0;
            bool inside = true;
            for (std::size_t d = 0; d < dims; ++d) {
              const std::int64_t i = o[d] * strides[d] - pads[d] + tap[d] * dilations[d];
              inside = inside && i >= 0 && i < in[d];
              offset = offset * in[d] + i;
            }
            dst[p] = inside ? src[offset] : 0.0f;
            for (std::int64_t d = static_cast<std::int64_t>(dims) - 1; d >= 0 && ++o[d] == out[d]; --d) o[d] = 0;
          }
        }
      }
      kernels.gemm(false, static_cast<int>(mg), static_cast<int>(pixels), static_cast<int>(rows), w.f.data() + g * mg * rows, rows,
                   col.data(), pixels, y.f.data() + (img * m + g * mg) * pixels, pixels, false,
                   {nullptr, relu, bias ? bias + g * mg : nullptr});
    }
}

}  // namespace spmd::ops
