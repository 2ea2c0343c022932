// Graph ops whose summation order is chosen by shape, where the batch is not axis 0 (a
// sequence-first layout, a transposed [features, batch]): a batch row's result must be the
// same bits alone as beside other rows. A path chosen because the dimensions after the
// reduced ones multiply to 1 (a batch of one there) would change the order, and so the bits,
// with the batch size: eval's trial runs would refuse such a model as mixing its rows, and
// its predictions would depend on the layout.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "spmd/ops/graph_op.hpp"

namespace {

using spmd::ops::ElemType;
using spmd::ops::GraphNode;
using spmd::ops::Tensor;

// x [C, B, H] with row b = 0 the same whatever B is.
Tensor batch_second(std::int64_t c, std::int64_t b, std::int64_t h) {
  Tensor t;
  t.reset(ElemType::Float32, {c, b, h});
  for (std::int64_t i = 0; i < c; ++i)
    for (std::int64_t j = 0; j < b; ++j)
      for (std::int64_t k = 0; k < h; ++k) {
        std::mt19937 rng(static_cast<std::uint32_t>(1000 * i + 10 * k + (j == 0 ? 0 : 7 * j + 1)));
        t.f[static_cast<std::size_t>((i * b + j) * h + k)] = std::uniform_real_distribution<float>(-3.0f, 3.0f)(rng);
      }
  return t;
}

Tensor run(const GraphNode& node, const Tensor& x) {
  Tensor y;
  std::vector<const Tensor*> in{&x};
  std::vector<Tensor*> out{&y};
  spmd::ops::find_graph_op(node.op)(spmd::ops::OpCall{node, in, out});
  return y;
}

// Row 0 of y, whose batch axis is `axis`, as a flat list.
std::vector<float> row0(const Tensor& y, std::size_t axis) {
  std::int64_t outer = 1, inner = 1;
  for (std::size_t k = 0; k < y.shape.size(); ++k)
    if (k < axis) outer *= y.shape[k];
    else if (k > axis) inner *= y.shape[k];
  std::vector<float> r;
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i = 0; i < inner; ++i) r.push_back(y.f[static_cast<std::size_t>((o * y.shape[axis]) * inner + i)]);
  return r;
}

void expect_row_alone_equals_row_in_batch(const GraphNode& node, std::int64_t h, std::size_t out_batch_axis) {
  const auto alone = row0(run(node, batch_second(37, 1, h)), out_batch_axis);
  for (const std::int64_t b : {2, 3, 8}) {
    const auto in_batch = row0(run(node, batch_second(37, b, h)), out_batch_axis);
    ASSERT_EQ(alone.size(), in_batch.size());
    EXPECT_EQ(std::memcmp(alone.data(), in_batch.data(), alone.size() * sizeof(float)), 0)
        << node.op << " (batch at axis 1): row 0 alone differs from row 0 in a batch of " << b;
  }
}

TEST(GraphBatchAxis, SoftmaxOverAnAxisBeforeTheBatch) {
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    GraphNode node{op, op, 13, {}, {}, {}};
    node.attrs.ints["axis"] = 0;  // over C, for each batch row and h: [C, B, 1] when h = 1
    expect_row_alone_equals_row_in_batch(node, 1, 1);
    expect_row_alone_equals_row_in_batch(node, 5, 1);
  }
}

TEST(GraphBatchAxis, ReductionsOverAxesAroundTheBatch) {
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceSumSquare", "ReduceL2"}) {
    GraphNode node{op, op, 13, {}, {}, {}};
    node.attrs.int_lists["axes"] = {0};  // over C: [C, B, 1] when h = 1
    node.attrs.ints["keepdims"] = 1;
    expect_row_alone_equals_row_in_batch(node, 1, 1);
    node.attrs.int_lists["axes"] = {0, 2};  // C and H, the batch between them
    expect_row_alone_equals_row_in_batch(node, 6, 1);
  }
}

}  // namespace
