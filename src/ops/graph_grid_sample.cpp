// GridSample (opset 16; 20's mode names too): PyTorch's F.grid_sample on [N, C, H, W] images,
// as its grid_sampler_2d computes it (which ONNX's definition follows): bilinear, nearest
// (half to even) and bicubic (A = -0.75) sampling, zeros / border / reflection padding,
// align_corners. Row independent: each row samples its own image at its own grid.
#include <cmath>
#include <string>

#include "spmd/ops/graph_op.hpp"

namespace spmd::ops {
namespace {

enum class Sampling { Linear, Nearest, Cubic };
enum class Padding { Zeros, Border, Reflection };

struct Sampler {
  Sampling mode;
  Padding padding;
  bool align_corners;

  // A grid value in [-1, 1] as a pixel coordinate of a side of `size` pixels.
  float unnormalise(float g, std::int64_t size) const {
    const auto n = static_cast<float>(size);
    return align_corners ? (g + 1.0f) / 2.0f * (n - 1.0f) : ((g + 1.0f) * n - 1.0f) / 2.0f;
  }

  // Reflects x into [low / 2, high / 2] (the doubled bounds keep them integers).
  static float reflect(float x, std::int64_t twice_low, std::int64_t twice_high) {
    if (twice_low == twice_high) return 0.0f;
    const float min = static_cast<float>(twice_low) / 2.0f, span = static_cast<float>(twice_high - twice_low) / 2.0f;
    x = std::fabs(x - min);
    const float extra = std::fmod(x, span);
    const auto flips = static_cast<std::int64_t>(std::floor(x / span));
    return flips % 2 == 0 ? extra + min : span - extra + min;
  }

  // A coordinate moved inside the image by the padding rule (zeros: left as it is).
  float pad(float x, std::int64_t size) const {
    const auto last = static_cast<float>(size - 1);
    if (padding == Padding::Border) return std::fmin(std::fmax(x, 0.0f), last);
    if (padding == Padding::Reflection) {
      x = align_corners ? reflect(x, 0, 2 * (size - 1)) : reflect(x, -1, 2 * size - 1);
      return std::fmin(std::fmax(x, 0.0f), last);
    }
    return x;
  }

  static float at(const float* plane, std::int64_t h, std::int64_t w, std::int64_t y, std::int64_t x) {
    return y >= 0 && y < h && x >= 0 && x < w ? plane[y * w + x] : 0.0f;
  }

  static float cubic(float v0, float v1, float v2, float v3, float t) {
    constexpr float a = -0.75f;
    const auto near = [](float d) { return ((a + 2.0f) * d - (a + 3.0f)) * d * d + 1.0f; };
    const auto far = [](float d) { return ((a * d - 5.0f * a) * d + 8.0f * a) * d - 4.0f * a; };
    return v0 * far(t + 1.0f) + v1 * near(t) + v2 * near(1.0f - t) + v3 * far(2.0f - t);
  }

  // Where a grid point reads, the same for every channel: its taps' rows and columns (padded
  // as the mode says; read as 0 outside the image) and the fractions between them.
  struct Taps {
    std::int64_t ys[4], xs[4];
    float tx, ty;
  };
  Taps taps(std::int64_t h, std::int64_t w, float gx, float gy) const {
    Taps t{};
    float x = unnormalise(gx, w), y = unnormalise(gy, h);
    if (mode == Sampling::Cubic) {  // each tap's coordinate padded on its own
      const float x0 = std::floor(x), y0 = std::floor(y);
      const auto ix = static_cast<std::int64_t>(x0), iy = static_cast<std::int64_t>(y0);
      for (std::int64_t k = 0; k < 4; ++k) {
        t.ys[k] = static_cast<std::int64_t>(pad(static_cast<float>(iy - 1 + k), h));
        t.xs[k] = static_cast<std::int64_t>(pad(static_cast<float>(ix - 1 + k), w));
      }
      t.tx = x - x0;
      t.ty = y - y0;
      return t;
    }
    x = pad(x, w);
    y = pad(y, h);
    if (mode == Sampling::Nearest) {
      t.ys[0] = static_cast<std::int64_t>(std::nearbyint(y));
      t.xs[0] = static_cast<std::int64_t>(std::nearbyint(x));
      return t;
    }
    const float x0 = std::floor(x), y0 = std::floor(y);
    t.xs[0] = static_cast<std::int64_t>(x0);
    t.ys[0] = static_cast<std::int64_t>(y0);
    t.xs[1] = t.xs[0] + 1;
    t.ys[1] = t.ys[0] + 1;
    t.tx = x - x0;
    t.ty = y - y0;
    return t;
  }

  float sample(const float* plane, std::int64_t h, std::int64_t w, const Taps& t) const {
    const auto v = [&](int r, int k) { return at(plane, h, w, t.ys[r], t.xs[k]); };
    if (mode == Sampling::Nearest) return v(0, 0);
    if (mode == Sampling::Cubic) {
      float rows[4];
      for (int r = 0; r < 4; ++r) rows[r] = cubic(v(r, 0), v(r, 1), v(r, 2), v(r, 3), t.tx);
      return cubic(rows[0], rows[1], rows[2], rows[3], t.ty);
    }
    return v(0, 0) * (1.0f - t.tx) * (1.0f - t.ty) + v(0, 1) * t.tx * (1.0f - t.ty) + v(1, 0) * (1.0f - t.tx) * t.ty +
           v(1, 1) * t.tx * t.ty;
  }
};

Sampler sampler_of(const OpCall& c) {
  const std::string mode = c.node.attrs.s("mode", c.node.opset >= 20 ? "linear" : "bilinear");
  const std::string padding = c.node.attrs.s("padding_mode", "zeros");
  Sampler s{Sampling::Linear, Padding::Zeros, c.node.attrs.i("align_corners", 0) != 0};
  if (mode == "nearest") s.mode = Sampling::Nearest;
  else if (mode == "bicubic" || mode == "cubic") s.mode = Sampling::Cubic;
  else if (mode != "bilinear" && mode != "linear") c.fail("mode '" + mode + "' is none of bilinear, nearest, bicubic");
  if (padding == "border") s.padding = Padding::Border;
  else if (padding == "reflection") s.padding = Padding::Reflection;
  else if (padding != "zeros") c.fail("padding_mode '" + padding + "' is none of zeros, border, reflection");
  return s;
}

void grid_sample(const OpCall& c) {
  const Tensor& x = c.float_input(0);
  const Tensor& grid = c.float_input(1);
  if (x.shape.size() != 4) c.fail("runs on images [N, C, H, W], not " + to_string(x.shape) + " (no volumes)");
  const std::int64_t n = x.shape[0], channels = x.shape[1], h = x.shape[2], w = x.shape[3];
  if (grid.shape.size() != 4 || grid.shape[0] != n || grid.shape[3] != 2)
    c.fail("grid " + to_string(grid.shape) + " is not [" + std::to_string(n) + ", H_out, W_out, 2]");
  const Sampler s = sampler_of(c);
  const std::int64_t points = grid.shape[1] * grid.shape[2];
  Tensor& y = *c.out[0];
  y.reset(ElemType::Float32, {n, channels, grid.shape[1], grid.shape[2]});
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t p = 0; p < points; ++p) {
      const float* g = grid.f.data() + (b * points + p) * 2;
      const Sampler::Taps t = s.taps(h, w, g[0], g[1]);
      for (std::int64_t ch = 0; ch < channels; ++ch)
        y.f[static_cast<std::size_t>((b * channels + ch) * points + p)] = s.sample(x.f.data() + (b * channels + ch) * h * w, h, w, t);
    }
}

}  // namespace

SPMD_REGISTER_GRAPH_OP("GridSample", grid_sample);

}  // namespace spmd::ops
