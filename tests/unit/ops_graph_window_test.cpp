// The graph ops over windows (Conv, MaxPool, AveragePool) against naive double-precision
// references over random geometries: every path the ops choose by shape (a 1x1 kernel on the
// image itself, the phase planes of any stride, im2col, pooling with and without bounds
// checks) meets the same definition, and an image's result does not depend on the images
// beside it in the batch (the same bits alone and in a batch: eval's layout promise).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "spmd/ops/graph_op.hpp"

// Its own namespace: the unity build compiles this file with others whose helpers share names.
namespace ops_graph_window_test {

namespace {

using spmd::ops::ElemType;
using spmd::ops::GraphNode;
using spmd::ops::Tensor;

struct Geometry {
  int n, c, h, w, m, group, kh, kw, sh, sw, dh, dw, top, left, bottom, right;
  // Output sizes; 0 where the dilated kernel is larger than the padded input.
  int oh() const { return out(h + top + bottom - ((kh - 1) * dh + 1), sh); }
  int ow() const { return out(w + left + right - ((kw - 1) * dw + 1), sw); }
  static int out(int span, int stride) { return span < 0 ? 0 : span / stride + 1; }
  std::string text() const {
    return "N" + std::to_string(n) + " C" + std::to_string(c) + " " + std::to_string(h) + "x" + std::to_string(w) +
           " M" + std::to_string(m) + " g" + std::to_string(group) + " k" + std::to_string(kh) + "x" + std::to_string(kw) +
           " s" + std::to_string(sh) + "," + std::to_string(sw) + " d" + std::to_string(dh) + "," + std::to_string(dw) +
           " pads " + std::to_string(top) + "," + std::to_string(left) + "," + std::to_string(bottom) + "," +
           std::to_string(right);
  }
};

Tensor random_tensor(std::vector<std::int64_t> shape, std::mt19937& rng) {
  Tensor t;
  t.reset(ElemType::Float32, std::move(shape));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (auto& v : t.f) v = u(rng);
  return t;
}

Tensor run(const GraphNode& node, const std::vector<const Tensor*>& inputs) {
  Tensor y;
  std::vector<Tensor*> out{&y};
  spmd::ops::find_graph_op(node.op)(spmd::ops::OpCall{node, inputs, out});
  return y;
}

GraphNode window_node(const std::string& op, const Geometry& g) {
  GraphNode node{op, op, 13, {}, {}, {}};
  node.attrs.int_lists["strides"] = {g.sh, g.sw};
  node.attrs.int_lists["dilations"] = {g.dh, g.dw};
  node.attrs.int_lists["pads"] = {g.top, g.left, g.bottom, g.right};
  node.attrs.int_lists["kernel_shape"] = {g.kh, g.kw};
  return node;
}

// out[n, o, y, x] = bias[o] + sum over the group's channels and taps, zeros outside the image.
std::vector<double> conv_reference(const Geometry& g, const Tensor& x, const Tensor& w, const Tensor* b, bool relu) {
  const int cg = g.c / g.group, mg = g.m / g.group;
  std::vector<double> out(static_cast<std::size_t>(g.n * g.m * g.oh() * g.ow()));
  for (int n = 0; n < g.n; ++n)
    for (int o = 0; o < g.m; ++o)
      for (int oy = 0; oy < g.oh(); ++oy)
        for (int ox = 0; ox < g.ow(); ++ox) {
          double s = b ? b->f[static_cast<std::size_t>(o)] : 0.0;
          const int gi = o / mg;
          for (int ci = 0; ci < cg; ++ci)
            for (int ky = 0; ky < g.kh; ++ky)
              for (int kx = 0; kx < g.kw; ++kx) {
                const int iy = oy * g.sh - g.top + ky * g.dh, ix = ox * g.sw - g.left + kx * g.dw;
                if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
                const float xv = x.f[static_cast<std::size_t>(((n * g.c + gi * cg + ci) * g.h + iy) * g.w + ix)];
                const float wv = w.f[static_cast<std::size_t>(((o * cg + ci) * g.kh + ky) * g.kw + kx)];
                s += static_cast<double>(xv) * wv;
              }
          out[static_cast<std::size_t>(((n * g.m + o) * g.oh() + oy) * g.ow() + ox)] = relu ? std::max(s, 0.0) : s;
        }
  return out;
}

Geometry random_geometry(std::mt19937& rng) {
  const auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (;;) {
    Geometry g{};
    g.n = pick(1, 3);
    g.group = pick(0, 3) == 0 ? pick(2, 4) : 1;
    g.c = g.group * pick(1, 3);
    g.m = g.group * (pick(0, 2) == 0 ? 8 : pick(1, 5));
    if (g.group == 1 && pick(0, 3) == 0) g.m = 16 * pick(1, 3);  // whole vectors of channels: the pixel-rows path
    g.h = pick(1, 13);
    g.w = pick(1, 13);
    g.kh = pick(1, 5);
    g.kw = pick(1, 5);
    g.sh = pick(1, 3);
    g.sw = pick(1, 3);
    g.dh = pick(0, 3) == 0 ? 2 : 1;
    g.dw = pick(0, 3) == 0 ? 2 : 1;
    g.top = pick(0, 2);
    g.left = pick(0, 2);
    g.bottom = pick(0, 2);
    g.right = pick(0, 2);
    if (g.oh() >= 1 && g.ow() >= 1) return g;
  }
}

TEST(GraphConv, MatchesTheDefinitionOnRandomGeometriesAndEachImageAlone) {
  std::mt19937 rng(2026);
  int paths[4] = {0, 0, 0, 0};  // the op's right-hand sides: the image itself, phase planes, im2col; pixel rows
  for (int trial = 0; trial < 1500; ++trial) {
    Geometry g = random_geometry(rng);
    if (trial % 10 == 0) {  // a pointwise convolution: the image itself is the GEMM's operand
      g.kh = g.kw = g.sh = g.sw = 1;
      g.top = g.left = g.bottom = g.right = 0;
    }
    const bool in_place = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.top + g.left + g.bottom + g.right == 0;
    const bool pixel_rows = g.group == 1 && g.m % 16 == 0 && g.oh() * g.ow() <= 64;
    ++paths[pixel_rows ? 3 : in_place ? 0 : 2 * g.ow() * g.sw >= g.w + g.left + g.right ? 1 : 2];
    const Tensor x = random_tensor({g.n, g.c, g.h, g.w}, rng);
    const Tensor w = random_tensor({g.m, g.c / g.group, g.kh, g.kw}, rng);
    const Tensor b = random_tensor({g.m}, rng);
    const bool with_bias = trial % 3 != 0, relu = trial % 2 == 0;
    GraphNode node = window_node("Conv", g);
    node.attrs.int_lists.erase("kernel_shape");
    node.attrs.ints["group"] = g.group;
    if (relu) node.attrs.ints["spmd_relu"] = 1;
    std::vector<const Tensor*> in{&x, &w};
    if (with_bias) in.push_back(&b);
    const Tensor y = run(node, in);
    ASSERT_EQ(y.shape, (std::vector<std::int64_t>{g.n, g.m, g.oh(), g.ow()})) << g.text();
    const auto ref = conv_reference(g, x, w, with_bias ? &b : nullptr, relu);
    for (std::size_t k = 0; k < ref.size(); ++k)
      ASSERT_NEAR(y.f[k], ref[k], 1e-5 * (1.0 + std::abs(ref[k]))) << g.text() << " at " << k;
    // The last image alone gives the same bits as in the batch.
    const std::int64_t per_image = g.c * g.h * g.w, per_output = g.m * g.oh() * g.ow();
    Tensor last;
    last.reset(ElemType::Float32, {1, g.c, g.h, g.w});
    std::copy(x.f.end() - per_image, x.f.end(), last.f.begin());
    in[0] = &last;
    const Tensor alone = run(node, in);
    ASSERT_TRUE(std::equal(alone.f.begin(), alone.f.end(), y.f.end() - per_output)) << g.text();
  }
  for (const int p : paths) EXPECT_GT(p, 50) << "a path ran too rarely to be tested";
}

// Few output pixels and whole vectors of output channels take the GEMM transposed (vectors over
// channels): the same products in the same order as the phase planes or im2col, so the same
// bits. Each output pixel of a small input (<= 64 output pixels: pixel rows) is compared with
// the same pixel of that input grown at the bottom and right (more outputs: the other paths),
// which reads the same input values.
TEST(GraphConv, PixelRowsGiveTheBitsOfTheOtherPaths) {
  std::mt19937 rng(7);
  int compared = 0;
  for (const int m : {16, 32, 48})
    for (const int c : {1, 3, 8})
      for (const int k : {1, 3})
        for (const int s : {1, 2})
          for (const int pad : {0, 1}) {
            // 5 x 6 outputs (30 pixels) and 13 x 12 (156): grown by 8 and 6 output rows and columns.
            const int h = (5 - 1) * s + k - pad, w = (6 - 1) * s + k - pad;
            const Geometry small{1, c, h, w, m, 1, k, k, s, s, 1, 1, pad, pad, 0, 0};
            Geometry big = small;
            big.h += 8 * s;
            big.w += 6 * s;
            ASSERT_LE(small.oh() * small.ow(), 64) << small.text();
            ASSERT_GT(big.oh() * big.ow(), 64) << big.text();
            const Tensor xb = random_tensor({1, c, big.h, big.w}, rng), wt = random_tensor({m, c, k, k}, rng),
                         b = random_tensor({m}, rng);
            Tensor xs;
            xs.reset(ElemType::Float32, {1, c, h, w});
            for (int ci = 0; ci < c; ++ci)
              for (int y = 0; y < h; ++y)
                for (int x = 0; x < w; ++x)
                  xs.f[static_cast<std::size_t>((ci * h + y) * w + x)] = xb.f[static_cast<std::size_t>((ci * big.h + y) * big.w + x)];
            GraphNode node = window_node("Conv", small);
            node.attrs.ints["spmd_relu"] = (m + c) % 2;
            const Tensor ys = run(node, {&xs, &wt, &b}), yb = run(node, {&xb, &wt, &b});
            for (int o = 0; o < m; ++o)
              for (int y = 0; y < small.oh(); ++y)
                for (int x = 0; x < small.ow(); ++x) {
                  const float a = ys.f[static_cast<std::size_t>((o * small.oh() + y) * small.ow() + x)];
                  const float e = yb.f[static_cast<std::size_t>((o * big.oh() + y) * big.ow() + x)];
                  ASSERT_EQ(std::bit_cast<std::uint32_t>(a), std::bit_cast<std::uint32_t>(e))
                      << small.text() << " channel " << o << " at " << y << "," << x;
                }
            ++compared;
          }
  EXPECT_EQ(compared, 72);
}

// What a Conv prepares from constant weights (the phase planes' offsets, the weights in the
// GEMM's order) is kept by the runner per node: reused while the input's shape stays, made
// again for another shape, and never kept for weights that are not constants (they may change
// from call to call). Every result the bits of a call that keeps nothing.
TEST(GraphConv, PreparedStateFollowsTheShapeAndOnlyConstantWeights) {
  std::mt19937 rng(11);
  Geometry g{2, 3, 9, 11, 4, 1, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1};  // stride 2, padded: the phase planes
  GraphNode node = window_node("Conv", g);
  node.attrs.int_lists.erase("kernel_shape");
  const Tensor w = random_tensor({g.m, g.c, g.kh, g.kw}, rng), w2 = random_tensor({g.m, g.c, g.kh, g.kw}, rng);
  const Tensor x = random_tensor({2, 3, 9, 11}, rng), wider = random_tensor({1, 3, 9, 15}, rng);
  std::unique_ptr<spmd::ops::Prepared> prepared;
  const auto call = [&](const Tensor& input, const Tensor& weights, bool constant) {
    Tensor y;
    std::vector<const Tensor*> in{&input, &weights};
    std::vector<Tensor*> out{&y};
    spmd::ops::OpCall c{node, in, out};
    c.prepared = &prepared;
    c.constant_inputs = constant ? 2 : 0;
    spmd::ops::find_graph_op(node.op)(c);
    return y;
  };
  const auto same = [](const Tensor& a, const Tensor& b) { return a.shape == b.shape && a.f == b.f; };
  EXPECT_TRUE(same(call(x, w, true), run(node, {&x, &w})));
  const spmd::ops::Prepared* first = prepared.get();
  ASSERT_NE(first, nullptr) << "constant weights: the plan is kept";
  EXPECT_GT(first->bytes(), 0);
  EXPECT_TRUE(same(call(x, w, true), run(node, {&x, &w})));
  EXPECT_EQ(prepared.get(), first) << "the same shape: the plan reused";
  EXPECT_TRUE(same(call(wider, w, true), run(node, {&wider, &w}))) << "another width: a plan of its own";
  EXPECT_TRUE(same(call(x, w, true), run(node, {&x, &w})));
  EXPECT_TRUE(same(call(x, w2, false), run(node, {&x, &w2}))) << "weights that are not constants: nothing kept is used";
}

// A kernel larger than the padded input has no output position: refused, naming the node,
// instead of one row computed from taps outside the image.
TEST(GraphConv, KernelLargerThanThePaddedInputIsRefused) {
  std::mt19937 rng(3);
  const Geometry g{1, 1, 2, 12, 3, 1, 3, 5, 2, 3, 2, 1, 0, 2, 2, 2};  // 2 + 0 + 2 rows < 5 (3 taps, dilation 2)
  const Tensor x = random_tensor({1, 1, 2, 12}, rng), w = random_tensor({3, 1, 3, 5}, rng);
  GraphNode node = window_node("Conv", g);
  node.attrs.int_lists.erase("kernel_shape");
  try {
    run(node, {&x, &w});
    FAIL() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("does not fit the input"), std::string::npos) << e.what();
  }
}

// MaxPool / AveragePool (count_include_pad either way, ceil_mode either way) by definition.
TEST(GraphPool, MatchesTheDefinitionOnRandomGeometries) {
  std::mt19937 rng(7);
  int inside_cases = 0;
  for (int trial = 0; trial < 400; ++trial) {
    Geometry g = random_geometry(rng);
    g.group = 1;
    g.m = g.c;
    const bool ceil_mode = trial % 4 == 0, include_pad = trial % 3 == 0, is_max = trial % 2 == 0;
    if (!is_max) g.dh = g.dw = 1;  // AveragePool has no dilations
    if (trial % 3 == 1) {  // the unrolled kernels: 2x2, 3x3, 1-D 2 and 3, column strides 1 and 2
      g.kw = 2 + trial / 3 % 2;
      g.kh = trial % 7 == 0 ? 1 : g.kw;
      g.sw = 1 + trial / 6 % 2;
    }
    if (trial % 5 == 0) g.top = g.left = g.bottom = g.right = 0;  // planes pooled in place (no frame), or just past it
    if (trial % 8 == 0) {  // 2x2 / 2, here under ceil_mode (odd sizes: a last window past the edge, framed)
      g.kh = g.kw = g.sh = g.sw = 2;
      g.top = g.left = g.bottom = g.right = 0;
    }
    g.top = std::min(g.top, g.kh - 1);  // ONNX: pads smaller than the kernel
    g.bottom = std::min(g.bottom, g.kh - 1);
    g.left = std::min(g.left, g.kw - 1);
    g.right = std::min(g.right, g.kw - 1);
    const auto out_size = [&](int in, int lo, int hi, int k, int s) {
      const int span = in + lo + hi - k;
      return span < 0 ? 0 : (ceil_mode ? (span + s - 1) / s : span / s) + 1;
    };
    const int oh = out_size(g.h, g.top, g.bottom, (g.kh - 1) * g.dh + 1, g.sh),
              ow = out_size(g.w, g.left, g.right, (g.kw - 1) * g.dw + 1, g.sw);
    if (oh < 1 || ow < 1) continue;
    const Tensor x = random_tensor({g.n, g.c, g.h, g.w}, rng);
    GraphNode node = window_node(is_max ? "MaxPool" : "AveragePool", g);
    if (!is_max) node.attrs.int_lists.erase("dilations");
    node.attrs.ints["ceil_mode"] = ceil_mode;
    node.attrs.ints["count_include_pad"] = include_pad;
    const Tensor y = run(node, {&x});
    ASSERT_EQ(y.shape, (std::vector<std::int64_t>{g.n, g.c, oh, ow})) << g.text();
    const bool unpadded = g.top + g.left + g.bottom + g.right == 0;
    inside_cases += unpadded;
    for (int plane = 0; plane < g.n * g.c; ++plane)
      for (int oy = 0; oy < oh; ++oy)
        for (int ox = 0; ox < ow; ++ox) {
          double acc = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
          int count = 0, padded = 0;
          for (int ky = 0; ky < g.kh; ++ky)
            for (int kx = 0; kx < g.kw; ++kx) {
              const int iy = oy * g.sh - g.top + ky * g.dh, ix = ox * g.sw - g.left + kx * g.dw;
              if (iy < g.h + g.bottom && ix < g.w + g.right) ++padded;  // windows past the padding (ceil_mode) count less
              if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
              const double v = x.f[static_cast<std::size_t>((plane * g.h + iy) * g.w + ix)];
              acc = is_max ? std::max(acc, v) : acc + v;
              ++count;
            }
          if (count == 0) continue;  // a ceil_mode window wholly past the image: no value defined
          const double want = is_max ? acc : acc / (include_pad ? padded : count);
          ASSERT_NEAR(y.f[static_cast<std::size_t>((plane * oh + oy) * ow + ox)], want, 1e-6)
              << (is_max ? "MaxPool " : "AveragePool ") << g.text() << " ceil " << ceil_mode << " include_pad "
              << include_pad << " at " << plane << "," << oy << "," << ox;
        }
  }
  EXPECT_GT(inside_cases, 80);  // the bounds-check-free path ran
}

}  // namespace

}  // namespace ops_graph_window_test
