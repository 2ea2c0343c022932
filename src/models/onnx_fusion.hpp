#pragma once
// Load-time rewrites of an ONNX graph for inference: a BatchNormalization folded into the
// Conv or Gemm before it, a Relu fused into the Conv, Gemm or Add before it (attribute
// spmd_relu, which their CPU and CUDA ops apply as they store), a Gemm's constant B stored
// untransposed, a QuantizeLinear -> DequantizeLinear pair of the same parameters one node;
// nodes whose results reach no graph output dropped. Each fusion applies only where the intermediate tensor has no other reader and is
// not a graph output, so what the graph computes is unchanged (BatchNormalization's fold
// rounds differently: within float32 rounding of the unfolded result).
#include <vector>

#include "spmd/ops/graph_op.hpp"

namespace spmd::models {

// The graph while it is being loaded: nodes in execution order over a table of tensor slots,
// of which the constants have their values.
struct GraphDraft {
  std::vector<ops::GraphNode>& nodes;
  std::vector<ops::GraphOpFn>& fns;
  std::vector<bool>& constant;
  std::vector<ops::Tensor>& values;
  const std::vector<int>& outputs;  // the graph's output slots
};

void fuse_for_inference(GraphDraft draft);

}  // namespace spmd::models
