// Resize (opsets 10-19) and Upsample (7-9): nearest, linear and cubic interpolation over any
// axes, one axis at a time (each is separable: the same values as interpolating all at once, up
// to the order of rounding). Every coordinate transformation of ONNX's, its nearest modes,
// cubic_coeff_a, exclude_outside, tf_crop_and_resize's region and extrapolation value, opset
// 18's axes and keep_aspect_ratio_policy. Antialiased downsampling (opset 18) is refused.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "spmd/ops/graph_op.hpp"

namespace spmd::ops {
namespace {

struct Geometry {
  std::vector<std::int64_t> out;
  std::vector<float> scale;              // per axis: out / in, or as given
  std::vector<float> roi_start, roi_end;  // tf_crop_and_resize's region, in [0, 1]
};

// Output sizes and scales per axis, from scales or sizes (opset 18: on `axes` only, the
// others kept; keep_aspect_ratio_policy for sizes).
Geometry geometry(const OpCall& c, const Tensor& x) {
  const std::size_t rank = x.shape.size();
  const bool upsample = c.node.op == "Upsample", old = upsample || c.node.opset < 11;
  std::vector<std::int64_t> axes(rank);
  for (std::size_t k = 0; k < rank; ++k) axes[k] = static_cast<std::int64_t>(k);
  if (c.node.opset >= 18 && c.node.attrs.int_lists.count("axes")) {
    axes.clear();
    for (const auto a : c.node.attrs.ints_or("axes", {})) axes.push_back(static_cast<std::int64_t>(c.axis(a, rank)));
  }
  Geometry g{x.shape, std::vector<float>(rank, 1.0f), std::vector<float>(rank, 0.0f), std::vector<float>(rank, 1.0f)};
  const std::size_t scales_at = old ? 1 : 2;
  const Tensor* scales = upsample && c.node.opset < 9 ? nullptr : c.has_input(scales_at) ? &c.float_input(scales_at) : nullptr;
  const Tensor* sizes = !old && c.has_input(3) && c.input(3).size() > 0 ? &c.input(3) : nullptr;
  std::vector<float> given;
  if (upsample && c.node.opset < 9) {
    const auto it = c.node.attrs.tensors.find("scales");
    if (it == c.node.attrs.tensors.end()) c.fail("the scales attribute is missing");
    given.assign(it->second.f.begin(), it->second.f.end());
  } else if (scales != nullptr && scales->size() > 0) {
    given.assign(scales->f.begin(), scales->f.begin() + scales->size());
  }
  if (sizes != nullptr) {
    const auto want = sizes->as_ints();
    if (want.size() != axes.size()) c.fail("sizes has " + std::to_string(want.size()) + " values for " + std::to_string(axes.size()) + " axes");
    const std::string policy = c.node.attrs.s("keep_aspect_ratio_policy", "stretch");
    float keep = policy == "not_larger" ? 1e30f : 0.0f;
    for (std::size_t k = 0; k < axes.size(); ++k) {
      const float r = static_cast<float>(want[k]) / static_cast<float>(x.shape[static_cast<std::size_t>(axes[k])]);
      keep = policy == "not_larger" ? std::min(keep, r) : std::max(keep, r);
    }
    if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller")
      c.fail("keep_aspect_ratio_policy '" + policy + "' is not stretch, not_larger or not_smaller");
    for (std::size_t k = 0; k < axes.size(); ++k) {
      const auto a = static_cast<std::size_t>(axes[k]);
      const float r = policy == "stretch" ? static_cast<float>(want[k]) / static_cast<float>(x.shape[a]) : keep;
      g.out[a] = policy == "stretch" ? want[k] : static_cast<std::int64_t>(std::round(r * static_cast<float>(x.shape[a])));
      g.scale[a] = r;
    }
  } else {
    if (given.size() != axes.size()) c.fail("needs scales (one per axis: " + std::to_string(axes.size()) + ") or sizes");
    for (std::size_t k = 0; k < axes.size(); ++k) {
      const auto a = static_cast<std::size_t>(axes[k]);
      if (!(given[k] > 0.0f)) c.fail("scales must be positive");
      g.scale[a] = given[k];
      const float size = std::floor(static_cast<float>(x.shape[a]) * given[k]);
      // Past 2^40 (or infinite) no tensor is that large; the cast to int64 would be undefined.
      if (!(size <= 0x1p40f)) c.fail("scale " + std::to_string(given[k]) + " on axis " + std::to_string(a) + " gives a size past 2^40");
      g.out[a] = static_cast<std::int64_t>(size);
    }
  }
  if (!old && c.has_input(1) && c.input(1).size() > 0) {  // roi: starts then ends, of the axes
    const Tensor& roi = c.float_input(1);
    if (roi.size() != static_cast<std::int64_t>(2 * axes.size())) c.fail("roi has " + std::to_string(roi.size()) + " values");
    for (std::size_t k = 0; k < axes.size(); ++k) {
      g.roi_start[static_cast<std::size_t>(axes[k])] = roi.f[k];
      g.roi_end[static_cast<std::size_t>(axes[k])] = roi.f[k + axes.size()];
    }
  }
  return g;
}

// The source coordinate of output index j along an axis of `in` values resized to `out` =
// floor(in * scale) (ONNX's rules use the unrounded in * scale where they divide by the length).
float source_coordinate(const std::string& mode, std::int64_t j, std::int64_t in, std::int64_t out, float scale, float start,
                        float end) {
  const float x = static_cast<float>(j), resized = static_cast<float>(in) * scale;
  if (mode == "half_pixel") return (x + 0.5f) / scale - 0.5f;
  if (mode == "pytorch_half_pixel") return resized > 1.0f ? (x + 0.5f) / scale - 0.5f : 0.0f;
  if (mode == "align_corners") return resized == 1.0f ? 0.0f : x * static_cast<float>(in - 1) / (resized - 1.0f);
  if (mode == "asymmetric") return x / scale;
  if (mode == "tf_half_pixel_for_nn") return (x + 0.5f) / scale;
  if (mode == "half_pixel_symmetric") {
    const float adjustment = static_cast<float>(out) / (scale * static_cast<float>(in));
    const float center = static_cast<float>(in) / 2.0f;
    return center * (1.0f - adjustment) + (x + 0.5f) / scale - 0.5f;
  }
  // tf_crop_and_resize
  const float span = static_cast<float>(in - 1);
  return resized > 1.0f ? start * span + x * (end - start) * span / (resized - 1.0f) : 0.5f * (start + end) * span;
}

struct Tap {
  std::int64_t at;
  float weight;
};

// Per output index, the source taps and their weights; `outside` where tf_crop_and_resize's
// coordinate leaves the input (the extrapolation value there).
void plan_axis(const OpCall& c, std::int64_t in, std::int64_t out, float scale, float start, float end,
               std::vector<std::vector<Tap>>& taps, std::vector<char>& outside) {
  const Attrs& a = c.node.attrs;
  const bool old = c.node.op == "Upsample" || c.node.opset < 11;
  const std::string mode = a.s("mode", "nearest");
  const std::string transform = old ? "asymmetric" : a.s("coordinate_transformation_mode", "half_pixel");
  const std::string nearest = old ? "floor" : a.s("nearest_mode", "round_prefer_floor");
  const float cubic_a = a.f("cubic_coeff_a", -0.75f);
  const bool exclude_outside = a.i("exclude_outside", 0) != 0;
  static const std::vector<std::string> transforms = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                                                      "tf_half_pixel_for_nn", "half_pixel_symmetric", "tf_crop_and_resize"};
  if (std::find(transforms.begin(), transforms.end(), transform) == transforms.end())
    c.fail("coordinate_transformation_mode '" + transform + "' is not supported");
  if (mode != "nearest" && mode != "linear" && mode != "cubic" && mode != "bilinear")
    c.fail("mode '" + mode + "' is not nearest, linear or cubic");
  const auto clamp = [in](std::int64_t i) { return std::clamp<std::int64_t>(i, 0, in - 1); };
  taps.assign(static_cast<std::size_t>(out), {});
  outside.assign(static_cast<std::size_t>(out), 0);
  for (std::int64_t j = 0; j < out; ++j) {
    auto& t = taps[static_cast<std::size_t>(j)];
    const float x = source_coordinate(transform, j, in, out, scale, start, end);
    if (transform == "tf_crop_and_resize" && (x < 0.0f || x > static_cast<float>(in - 1))) {
      outside[static_cast<std::size_t>(j)] = 1;
      continue;
    }
    if (mode == "nearest") {
      const float f = std::floor(x), frac = x - f;
      std::int64_t i = static_cast<std::int64_t>(f);
      if (nearest == "ceil") i = static_cast<std::int64_t>(std::ceil(x));
      else if (nearest == "round_prefer_floor") i += frac > 0.5f;
      else if (nearest == "round_prefer_ceil") i += frac >= 0.5f;
      else if (nearest != "floor") c.fail("nearest_mode '" + nearest + "' is not supported");
      t.push_back({clamp(i), 1.0f});
      continue;
    }
    const float f = std::floor(x), r = x - f;
    const auto i = static_cast<std::int64_t>(f);
    if (mode != "cubic") {
      t.push_back({clamp(i), 1.0f - r});
      t.push_back({clamp(i + 1), r});
      continue;
    }
    const float A = cubic_a, s = r + 1.0f, u = 1.0f - r, v = 2.0f - r;
    const float w[4] = {((A * s - 5 * A) * s + 8 * A) * s - 4 * A, ((A + 2) * r - (A + 3)) * r * r + 1,
                        ((A + 2) * u - (A + 3)) * u * u + 1, ((A * v - 5 * A) * v + 8 * A) * v - 4 * A};
    float sum = 0.0f;
    for (int k = 0; k < 4; ++k) {
      const std::int64_t at = i - 1 + k;
      if (exclude_outside && (at < 0 || at >= in)) continue;
      t.push_back({clamp(at), w[k]});
      sum += w[k];
    }
    if (exclude_outside)
      for (auto& tap : t) tap.weight /= sum;
  }
}

void resize(const OpCall& c) {
  const Tensor& x = c.float_input(0);
  if (c.node.opset >= 18 && c.node.attrs.i("antialias", 0) != 0)
    c.fail("antialias = 1 (antialiased downsampling) is not supported");
  const Geometry g = geometry(c, x);
  const float extrapolation = c.node.attrs.f("extrapolation_value", 0.0f);
  std::vector<std::size_t> resized;  // the axes that change, each one pass
  for (std::size_t a = 0; a < x.shape.size(); ++a)
    if (g.out[a] != x.shape[a] || g.scale[a] != 1.0f) resized.push_back(a);
  Tensor& y = *c.out[0];
  if (resized.empty()) {
    y = x;
    return;
  }
  // Passes between two per-thread tensors (no allocation once seen), the last one into y.
  thread_local Tensor between[2];
  const Tensor* current = &x;
  std::vector<std::vector<Tap>> taps;
  std::vector<char> outside;
  for (std::size_t p = 0; p < resized.size(); ++p) {
    const std::size_t a = resized[p];
    const std::int64_t in = current->shape[a], out = g.out[a];
    plan_axis(c, in, out, g.scale[a], g.roi_start[a], g.roi_end[a], taps, outside);
    std::int64_t outer = 1, inner = 1;
    for (std::size_t k = 0; k < a; ++k) outer *= current->shape[k];
    for (std::size_t k = a + 1; k < current->shape.size(); ++k) inner *= current->shape[k];
    auto shape = current->shape;
    shape[a] = out;
    Tensor& next = p + 1 == resized.size() ? y : between[p % 2];
    next.reset(ElemType::Float32, shape);
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t j = 0; j < out; ++j) {
        float* dst = next.f.data() + (o * out + j) * inner;
        if (outside[static_cast<std::size_t>(j)]) {
          std::fill_n(dst, inner, extrapolation);
          continue;
        }
        std::fill_n(dst, inner, 0.0f);
        for (const Tap& t : taps[static_cast<std::size_t>(j)]) {
          const float* src = current->f.data() + (o * in + t.at) * inner;
          for (std::int64_t e = 0; e < inner; ++e) dst[e] += t.weight * src[e];
        }
      }
    current = &next;
  }
}

}  // namespace

SPMD_REGISTER_GRAPH_OP("Resize", resize);
SPMD_REGISTER_GRAPH_OP("Upsample", resize);

}  // namespace spmd::ops
