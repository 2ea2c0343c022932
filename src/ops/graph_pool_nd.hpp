#pragma once
// MaxPool and AveragePool over three or more spatial dimensions (PyTorch's 3-D pools, and the
// 3-D average pool its LocalResponseNorm exports as): every ONNX attribute, one window at a
// time. The 1-D and 2-D pools of graph_conv.cpp are the fast ones.
#include "spmd/ops/graph_op.hpp"

namespace spmd::ops {

void pool_nd(const OpCall& call, bool max);

}  // namespace spmd::ops
