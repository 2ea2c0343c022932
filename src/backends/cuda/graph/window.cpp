#include "window.hpp"

#include <algorithm>
#include <string>
#include <tuple>

namespace spmd::backends::cuda {

namespace {
std::string not_spatial(const std::vector<std::int64_t>& shape) {
  return "input " + ops::to_string(shape) + " is not [N, C, H, W] or [N, C, L]";
}
}  // namespace

std::string window_limits(const ops::GraphNode&, const std::vector<std::vector<std::int64_t>>& in_shapes) {
  const std::vector<std::int64_t> x = in_shapes.empty() ? std::vector<std::int64_t>{} : in_shapes[0];
  return x.size() == 3 || x.size() == 4 ? "" : not_spatial(x);
}

Window window_of(const CudaGraphCall& call, const DeviceTensor& x, const DeviceTensor& y, std::int64_t kh, std::int64_t kw) {
  const ops::Attrs& a = call.node.attrs;
  const bool one_d = x.shape.size() == 3;
  if ((x.shape.size() != 4 && !one_d) || y.shape.size() != x.shape.size())
    call.fail(not_spatial(x.shape));
  Window g;
  g.n = x.shape[0];
  g.c = x.shape[1];
  g.h = one_d ? 1 : x.shape[2];
  g.w = x.shape.back();
  g.oh = one_d ? 1 : y.shape[2];
  g.ow = y.shape.back();
  g.kh = kh;
  g.kw = kw;
  // Per spatial dimension: (height, width), 1-D attributes giving the width.
  const auto pair = [&](const char* name, std::int64_t fallback, std::int64_t& first, std::int64_t& second) {
    const auto v = a.ints_or(name, {});
    first = v.size() == 2 ? v[0] : fallback;
    second = v.empty() ? fallback : v.back();
  };
  pair("strides", 1, g.sh, g.sw);
  pair("dilations", 1, g.dh, g.dw);
  const auto pads = a.ints_or("pads", {});
  if (pads.size() == 4) std::tie(g.top, g.left, g.bottom, g.right) = std::tuple{pads[0], pads[1], pads[2], pads[3]};
  if (pads.size() == 2) std::tie(g.left, g.right) = std::tuple{pads[0], pads[1]};
  const std::string auto_pad = a.s("auto_pad", "NOTSET");
  if (auto_pad == "VALID") g.top = g.left = g.bottom = g.right = 0;
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    // The total padding that gives ceil(in / stride) outputs, the odd one after (UPPER) or before.
    const auto split = [&](std::int64_t in, std::int64_t out, std::int64_t stride, std::int64_t k, std::int64_t dil,
                           std::int64_t& lo, std::int64_t& hi) {
      const std::int64_t total = std::max<std::int64_t>(0, (out - 1) * stride + (k - 1) * dil + 1 - in);
      lo = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      hi = total - lo;
    };
    split(g.h, g.oh, g.sh, kh, g.dh, g.top, g.bottom);
    split(g.w, g.ow, g.sw, kw, g.dw, g.left, g.right);
  }
  return g;
}

}  // namespace spmd::backends::cuda
