#pragma once
// Where each node of an ONNX graph runs on the CUDA backend, and every tensor's shape for any
// batch size, decided once per graph.
//
// Shapes come from the CPU runner (models/onnx_graph.hpp) run on 1, 2 and 3 rows of zeros:
// every dimension must be a + b * rows (the batch flows through the graph as a factor), which
// the third run checks; a graph whose shapes change otherwise is not run on the GPU. The same
// runs give each tensor's element type: int64 tensors (shape arithmetic) stay on the host,
// where the CPU ops compute them every call; float tensors live on the GPU. A node runs on the
// host when none of its inputs is a float tensor of the run (or it only reads a shape:
// Shape, Size); every other node needs a CUDA graph op (graph_op.hpp) whose limits, if it has
// any, accept the node and its planned input shapes (else the GPU refuses the graph at load).
#include <cstdint>
#include <string>
#include <vector>

#include "spmd/models/onnx_graph.hpp"

namespace spmd::backends::cuda {

struct TensorPlan {
  bool device = false;  // a float tensor with a GPU copy (constants: uploaded once)
  bool constant = false;
  std::vector<std::int64_t> base, slope;  // its shape for `rows` rows: base + slope * rows
  std::vector<std::int64_t> shape(std::int64_t rows) const;
  std::int64_t size(std::int64_t rows) const;
};

struct GraphPlan {
  std::vector<TensorPlan> tensors;  // by the graph's table index
  std::vector<char> host_node;      // per node: runs on the host (its CPU op)
  // "" when the GPU runs the graph, else why not (the first node it cannot run, and its op).
  std::string unsupported;
};

// Needs no GPU. Every field is filled even when unsupported is set, as far as the trial runs went.
// fixed_inputs (one per graph input, float or int64): a graph of fixed shapes run on those
// inputs (ONNX's node tests), every shape the trial's (slope 0); else one float input whose
// batch dimension is the only dynamic one.
GraphPlan plan_graph(const models::OnnxGraph& graph, const std::vector<ops::Tensor>* fixed_inputs = nullptr);

}  // namespace spmd::backends::cuda
