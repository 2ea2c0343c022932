// The quantized graph ops (src/ops/graph_quantize.cpp) where ONNX Runtime's comparisons
// (tests/cli/onnx_quantized.sh, the node tests) cannot see: a QuantizeLinear -> DequantizeLinear
// pair fused at load gives the bits of the two ops run apart, saturation and NaN included; an
// integer convolution whose sums pass 2^24 is exact (float32 accumulation would round them).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "spmd/models/onnx_graph.hpp"
#include "onnx_test_graphs.hpp"
#include "test_folder.hpp"

namespace {

using spmd::test::OnnxTestGraph;

spmd::ops::Tensor run(const std::shared_ptr<const spmd::models::OnnxGraph>& graph, const std::vector<std::int64_t>& shape,
                      const std::vector<float>& x) {
  spmd::models::OnnxRunner runner(graph);
  auto& in = runner.input(0);
  in.reset(spmd::ops::ElemType::Float32, shape);
  std::copy(x.begin(), x.end(), in.f.begin());
  runner.run();
  return runner.output(0);
}

// x -> QuantizeLinear -> DequantizeLinear -> y, per tensor (uint8) or per channel (int8, axis 1),
// with a Cast to the quantized type between them as PyTorch's exports write one; with `keep_q`
// the quantized tensor is also an output, which keeps the ops apart.
void qdq_graph(OnnxTestGraph& g, bool per_channel, bool keep_q, bool cast) {
  g.weights("s", per_channel ? std::vector<std::int64_t>{3} : std::vector<std::int64_t>{}, 0, 0,
            per_channel ? std::vector<float>{0.01f, 0.037f, 0.2f} : std::vector<float>{0.013f});
  if (per_channel) g.narrow_ints("z", onnx::TensorProto::INT8, {3}, {-5, 0, 17});
  else g.narrow_ints("z", onnx::TensorProto::UINT8, {}, {131});
  auto& q = g.node("QuantizeLinear", {"x", "s", "z"}, {"q"});
  if (cast) OnnxTestGraph::attr(g.node("Cast", {"q"}, {"qc"}), "to", std::int64_t{per_channel ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8});
  auto& dq = g.node("DequantizeLinear", {cast ? "qc" : "q", "s", "z"}, {"d"});
  if (per_channel) OnnxTestGraph::attr(q, "axis", std::int64_t{1}), OnnxTestGraph::attr(dq, "axis", std::int64_t{1});
  g.node("Flatten", {"d"}, {"y"});
  if (keep_q) g.output("q", per_channel ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8);
}

TEST(QuantizedOps, AFusedQuantizeDequantizePairGivesTheBitsOfTheTwoOps) {
  spmd::test::TestFolder folder("spmd-quantize");
  const std::vector<std::int64_t> row{3, 4, 5}, shape{7, 3, 4, 5};
  std::vector<float> x(7 * 60);
  std::mt19937 rng(3);
  for (auto& v : x) v = std::normal_distribution<float>(0.0f, 2.0f)(rng);  // past both ends of the range too
  x[5] = std::numeric_limits<float>::quiet_NaN();
  x[6] = std::numeric_limits<float>::infinity();
  x[7] = -std::numeric_limits<float>::infinity();
  x[8] = 0.013f * 2.5f;  // a tie, rounded to even
  for (const bool per_channel : {false, true})
  for (const bool cast : {false, true}) {
    std::shared_ptr<const spmd::models::OnnxGraph> graphs[2];
    for (const bool keep_q : {false, true}) {
      OnnxTestGraph g(row);
      qdq_graph(g, per_channel, keep_q, cast);
      const std::string path = folder.file(std::string(per_channel ? "axis" : "tensor") + (cast ? "_cast" : "") +
                                           (keep_q ? "_apart" : "_fused") + ".onnx");
      g.save(path);
      graphs[keep_q] = spmd::models::OnnxGraph::load(path);
    }
    EXPECT_EQ(graphs[0]->node_count() + (cast ? 2 : 1), graphs[1]->node_count()) << "the pair is one node when nothing else reads q";
    const auto fused = run(graphs[0], shape, x).f, apart = run(graphs[1], shape, x).f;
    ASSERT_EQ(fused.size(), apart.size());
    EXPECT_EQ(std::memcmp(fused.data(), apart.data(), fused.size() * sizeof(float)), 0) << "per channel " << per_channel << " cast " << cast;
    if (!per_channel) {
      EXPECT_EQ(fused[5], (0.0f - 131.0f) * 0.013f) << "NaN saturates to the range's low end";
      EXPECT_EQ(fused[6], (255.0f - 131.0f) * 0.013f);
      EXPECT_EQ(fused[7], (0.0f - 131.0f) * 0.013f);
      EXPECT_EQ(fused[8], 2.0f * 0.013f) << "2.5 rounds to 2";
    }
  }
}

TEST(QuantizedOps, IntegerConvolutionSumsPast2To24Exactly) {
  spmd::test::TestFolder folder("spmd-quantize");
  const std::int64_t c = 96, h = 5, w = 5, m = 3;  // 864 products per output, up to 255 * 127 each
  OnnxTestGraph g({c, h, w});
  std::vector<std::int32_t> weights(static_cast<std::size_t>(m * c * 9));
  std::mt19937 rng(11);
  for (auto& v : weights) v = std::uniform_int_distribution<int>(100, 127)(rng);
  weights[0] = -128;
  g.narrow_ints("w", onnx::TensorProto::INT8, {m, c, 3, 3}, weights);
  g.narrow_ints("xz", onnx::TensorProto::UINT8, {}, {3});
  g.narrow_ints("wz", onnx::TensorProto::INT8, {}, {-1});
  auto& cast = g.node("Cast", {"x"}, {"xq"});
  OnnxTestGraph::attr(cast, "to", std::int64_t{onnx::TensorProto::UINT8});
  auto& conv = g.node("ConvInteger", {"xq", "w", "xz", "wz"}, {"acc"});
  OnnxTestGraph::attr(conv, "pads", std::vector<std::int64_t>{1, 1, 1, 1});
  g.node("Flatten", {"acc"}, {"y"});
  const std::string path = folder.file("conv_integer.onnx");
  g.save(path);
  std::vector<float> x(static_cast<std::size_t>(c * h * w));
  for (auto& v : x) v = static_cast<float>(std::uniform_int_distribution<int>(200, 255)(rng));
  const auto y = run(spmd::models::OnnxGraph::load(path), {1, c, h, w}, x).i;  // int32 values, held as int64
  ASSERT_EQ(y.size(), static_cast<std::size_t>(m * h * w));
  std::int64_t beyond = 0;
  for (std::int64_t o = 0; o < m; ++o)
    for (std::int64_t i = 0; i < h; ++i)
      for (std::int64_t j = 0; j < w; ++j) {
        std::int64_t want = 0;
        for (std::int64_t ci = 0; ci < c; ++ci)
          for (std::int64_t di = 0; di < 3; ++di)
            for (std::int64_t dj = 0; dj < 3; ++dj) {
              const std::int64_t yi = i + di - 1, xj = j + dj - 1;
              if (yi < 0 || yi >= h || xj < 0 || xj >= w) continue;  // the padding holds the zero point
              want += (static_cast<std::int64_t>(x[static_cast<std::size_t>((ci * h + yi) * w + xj)]) - 3) *
                      (weights[static_cast<std::size_t>(((o * c + ci) * 3 + di) * 3 + dj)] + 1);
            }
        beyond += std::llabs(want) > (1 << 24);
        EXPECT_EQ(y[static_cast<std::size_t>((o * h + i) * w + j)], want) << o << " " << i << " " << j;
      }
  EXPECT_GT(beyond, 0) << "the test's sums must pass 2^24 to mean anything";
}

// Where one product passes 2^24 (16-bit values, as opset 21 allows), no float sum is exact:
// the int32 sums ONNX defines, from int64 arithmetic.
TEST(QuantizedOps, IntegerMatmulOfSixteenBitValuesIsExact) {
  spmd::test::TestFolder folder("spmd-quantize");
  const std::int64_t k = 40, n = 3;
  OnnxTestGraph g({k});
  std::vector<std::int32_t> w(static_cast<std::size_t>(k * n));
  std::mt19937 rng(5);
  for (auto& v : w) v = std::uniform_int_distribution<int>(-3000, 3000)(rng);
  g.narrow_ints("w", onnx::TensorProto::INT16, {k, n}, w);
  OnnxTestGraph::attr(g.node("Cast", {"x"}, {"xq"}), "to", std::int64_t{onnx::TensorProto::INT16});
  g.node("MatMulInteger", {"xq", "w"}, {"y"});
  const std::string path = folder.file("matmul_int16.onnx");
  g.save(path);
  std::vector<float> x(static_cast<std::size_t>(2 * k));
  for (auto& v : x) v = static_cast<float>(std::uniform_int_distribution<int>(-30000, 30000)(rng));
  const auto y = run(spmd::models::OnnxGraph::load(path), {2, k}, x).i;
  ASSERT_EQ(y.size(), static_cast<std::size_t>(2 * n));
  for (std::int64_t r = 0; r < 2; ++r)
    for (std::int64_t j = 0; j < n; ++j) {
      std::int64_t want = 0;
      for (std::int64_t p = 0; p < k; ++p)
        want += static_cast<std::int64_t>(x[static_cast<std::size_t>(r * k + p)]) * w[static_cast<std::size_t>(p * n + j)];
      EXPECT_EQ(y[static_cast<std::size_t>(r * n + j)], static_cast<std::int32_t>(want)) << r << " " << j;
    }
}

}  // namespace
