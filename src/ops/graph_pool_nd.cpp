#include "graph_nd.hpp"
#include "graph_window.hpp"

#include <algorithm>
#include <limits>
#include <vector>

namespace spmd::ops {

void auto_pads(const OpCall& call, std::int64_t in, std::int64_t stride, std::int64_t span, std::int64_t& begin,
               std::int64_t& end) {
  const std::string auto_pad = call.node.attrs.s("auto_pad", "NOTSET");
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    const std::int64_t want = (in + stride - 1) / stride;
    const std::int64_t total = std::max<std::int64_t>(0, (want - 1) * stride + span - in);
    begin = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    end = total - begin;
  } else if (auto_pad == "VALID") {
    begin = end = 0;
  } else if (auto_pad != "NOTSET") {
    call.fail("auto_pad '" + auto_pad + "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
  }
}

void pool_nd(const OpCall& call, bool max) {
  const Tensor& x = call.float_input(0);
  const Attrs& a = call.node.attrs;
  const auto kernel = a.ints_or("kernel_shape", {});
  call.check_window_ints("kernel_shape", kernel);
  const std::size_t dims = kernel.size();
  if (x.shape.size() != dims + 2) call.fail("input " + to_string(x.shape) + " has no " + std::to_string(dims) + " spatial dimensions");

  const auto strides = call.ints_per_dim("strides", dims, 1), dilations = call.ints_per_dim("dilations", dims, 1);
  auto pads = call.ints_per_dim("pads", 2 * dims, 0);
  const std::string auto_pad = a.s("auto_pad", "NOTSET");
  const bool ceil_mode = a.i("ceil_mode", 0) != 0, include_pad = a.i("count_include_pad", 0) != 0;
  std::vector<std::int64_t> in(dims), out(dims), span(dims);
  for (std::size_t d = 0; d < dims; ++d) {
    in[d] = x.shape[d + 2];
    span[d] = (kernel[d] - 1) * dilations[d] + 1;
    auto_pads(call, in[d], strides[d], span[d], pads[d], pads[d + dims]);
    check_pool_pads(call, {pads[d], pads[d + dims]}, {kernel[d], kernel[d]});
    const std::int64_t room = in[d] + pads[d] + pads[d + dims] - span[d];
    out[d] = room < 0 ? 0 : (ceil_mode ? (room + strides[d] - 1) / strides[d] : room / strides[d]) + 1;
    if (out[d] < 1) call.fail("the window does not fit the input " + to_string(x.shape));
  }
  std::vector<std::int64_t> shape{x.shape[0], x.shape[1]};
  shape.insert(shape.end(), out.begin(), out.end());
  Tensor& y = *call.out[0];
  y.reset(ElemType::Float32, shape);
  std::int64_t in_plane = 1, out_plane = 1, taps = 1;
  for (std::size_t d = 0; d < dims; ++d) in_plane *= in[d], out_plane *= out[d], taps *= kernel[d];
  // Per tap, its offset along each dimension and in the flattened input: a window inside the
  // input sums at base + offset, one over the border checks each dimension.
  std::vector<std::int64_t> tap_at(static_cast<std::size_t>(taps * static_cast<std::int64_t>(dims))), tap_offset(static_cast<std::size_t>(taps));
  for (std::int64_t t = 0; t < taps; ++t) {
    std::int64_t offset = 0;
    for (std::int64_t r = t, d = static_cast<std::int64_t>(dims) - 1; d >= 0; --d) {
      tap_at[static_cast<std::size_t>(t * static_cast<std::int64_t>(dims) + d)] = (r % kernel[d]) * dilations[d];
      r /= kernel[d];
    }
    for (std::size_t d = 0; d < dims; ++d) offset = offset * in[d] + tap_at[static_cast<std::size_t>(t) * dims + d];
    tap_offset[static_cast<std::size_t>(t)] = offset;
  }
  std::vector<std::int64_t> o(dims), start(dims);
  for (std::int64_t plane = 0; plane < x.shape[0] * x.shape[1]; ++plane) {
    const float* src = x.f.data() + plane * in_plane;
    float* dst = y.f.data() + plane * out_plane;
    std::fill(o.begin(), o.end(), 0);
    for (std::int64_t p = 0; p < out_plane; ++p) {
      bool inside = true;
      std::int64_t base = 0;
      for (std::size_t d = 0; d < dims; ++d) {
        start[d] = o[d] * strides[d] - pads[d];
        inside = inside && start[d] >= 0 && start[d] + span[d] <= in[d];
        base = base * in[d] + start[d];
      }
      float acc = max ? -std::numeric_limits<float>::infinity() : 0.0f;
      std::int64_t count = 0, padded = 0;
      if (inside) {
        for (const std::int64_t t : tap_offset) acc = max ? std::max(acc, src[base + t]) : acc + src[base + t];
        count = padded = taps;
      } else {
        for (std::int64_t t = 0; t < taps; ++t) {
          bool tap_inside = true, in_padding = true;
          std::int64_t offset = 0;
          for (std::size_t d = 0; d < dims; ++d) {
            const std::int64_t i = start[d] + tap_at[static_cast<std::size_t>(t) * dims + d];
            tap_inside = tap_inside && i >= 0 && i < in[d];
            in_padding = in_padding && i >= -pads[d] && i < in[d] + pads[d + dims];  // not past it (ceil_mode)
            offset = offset * in[d] + i;
          }
          padded += in_padding;
          if (!tap_inside) continue;
          acc = max ? std::max(acc, src[offset]) : acc + src[offset];
          ++count;
        }
      }
      dst[p] = max ? acc : acc / static_cast<float>(include_pad ? padded : count);
      for (std::int64_t d = static_cast<std::int64_t>(dims) - 1; d >= 0 && ++o[d] == out[d]; --d) o[d] = 0;
    }
  }
}

}  // namespace spmd::ops
