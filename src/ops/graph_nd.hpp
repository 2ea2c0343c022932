#pragma once
// Conv, MaxPool and AveragePool over three or more spatial dimensions (PyTorch's Conv3d and 3-D
// pools, and the 3-D average pool its LocalResponseNorm exports as): every ONNX attribute, the
// convolution as im2col + the tuned GEMM per image and group. The 1-D and 2-D ops of
// graph_conv.cpp are the fast ones and call these for more dimensions.
#include <cstdint>
#include <vector>

#include "spmd/ops/graph_op.hpp"

namespace spmd::ops {

void pool_nd(const OpCall& call, bool max);
void conv_nd(const OpCall& call);

// An N-d convolution's sizes as its input, weights and attributes give them; conv_shape fails
// naming weights that do not match the input, a group that does not divide, a kernel that does
// not fit. The quantized convolutions (graph_quantize.cpp) share it with conv_nd.
struct ConvShape {
  std::size_t dims = 0;  // spatial
  std::int64_t n = 0, c = 0, m = 0, group = 1, cg = 0, mg = 0;  // images, channels in / out (per group)
  std::int64_t taps = 1, pixels = 1, plane = 1;                 // kernel, output and input positions
  std::vector<std::int64_t> in, k, out, strides, dilations, pads;
  std::int64_t col_rows() const { return cg * taps; }
  std::vector<std::int64_t> output_shape() const;  // [n, m, out...]
};
ConvShape conv_shape(const OpCall& call, const std::vector<std::int64_t>& x, const std::vector<std::int64_t>& w);

// The padding of one spatial dimension as auto_pad says (SAME_UPPER / SAME_LOWER: the output
// ceil(in / stride), the odd pad at the end / start; VALID: none; NOTSET: pads as given), for a
// window spanning `span` input elements; fails naming an unknown auto_pad.
void auto_pads(const OpCall& call, std::int64_t in, std::int64_t stride, std::int64_t span, std::int64_t& begin,
               std::int64_t& end);

}  // namespace spmd::ops
