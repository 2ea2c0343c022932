#pragma once
// Conv, MaxPool and AveragePool over three or more spatial dimensions (PyTorch's Conv3d and 3-D
// pools, and the 3-D average pool its LocalResponseNorm exports as): every ONNX attribute, the
// convolution as im2col + the tuned GEMM per image and group. The 1-D and 2-D ops of
// graph_conv.cpp are the fast ones and call these for more dimensions.
#include "spmd/ops/graph_op.hpp"

namespace spmd::ops {

void pool_nd(const OpCall& call, bool max);
void conv_nd(const OpCall& call);

// The padding of one spatial dimension as auto_pad says (SAME_UPPER / SAME_LOWER: the output
// ceil(in / stride), the odd pad at the end / start; VALID: none; NOTSET: pads as given), for a
// window spanning `span` input elements; fails naming an unknown auto_pad.
void auto_pads(const OpCall& call, std::int64_t in, std::int64_t stride, std::int64_t span, std::int64_t& begin,
               std::int64_t& end);

}  // namespace spmd::ops
