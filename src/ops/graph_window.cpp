#include "graph_window.hpp"

#include <algorithm>
#include <string>

namespace spmd::ops {

void check_pool_pads(const OpCall& call, const std::vector<std::int64_t>& pads, const std::vector<std::int64_t>& kernel) {
  const std::size_t half = pads.size() / 2;
  for (std::size_t k = 0; k < pads.size(); ++k)
    if (pads[k] >= kernel[k % half])
      call.fail("pads " + to_string(call.node.attrs.ints_or("pads", pads)) + ": each must be smaller than the kernel along its axis (kernel_shape " +
                to_string(call.node.attrs.ints_or("kernel_shape", {})) + "); a window wholly in the padding has no value");
}

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
    call.check_window_ints(name, v);
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
  call.check_window_ints("pads", pads);
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

}  // namespace spmd::ops
