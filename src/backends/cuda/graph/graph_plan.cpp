#include "graph_plan.hpp"

#include <algorithm>
#include <exception>

#include "graph_op.hpp"

namespace spmd::backends::cuda {

std::vector<std::int64_t> TensorPlan::shape(std::int64_t rows) const {
  std::vector<std::int64_t> s(base.size());
  for (std::size_t k = 0; k < s.size(); ++k) s[k] = base[k] + slope[k] * rows;
  return s;
}

std::int64_t TensorPlan::size(std::int64_t rows) const {
  std::int64_t n = 1;
  for (const auto d : shape(rows)) n *= d;
  return n;
}

namespace {

using Shapes = std::vector<std::vector<std::int64_t>>;

// The CPU runner on the inputs it holds: every tensor's shape, and which are int64.
Shapes trial(models::OnnxRunner& runner, std::vector<char>& ints) {
  runner.run();
  const std::size_t count = runner.graph().tensor_count();
  Shapes shapes(count);
  ints.assign(count, 0);
  for (std::size_t k = 0; k < count; ++k) {
    shapes[k] = runner.tensor(k).shape;
    ints[k] = runner.tensor(k).type == ops::ElemType::Int64;
  }
  return shapes;
}

// The trial runs' shapes: 1, 2 and 3 rows of zeros, or (fixed) the given inputs once.
std::string trial_shapes(const models::OnnxGraph& graph, const std::vector<ops::Tensor>* fixed, Shapes (&s)[3],
                         std::vector<char>& ints) {
  const auto& in = graph.inputs();
  std::vector<std::int64_t> row;
  if (!fixed) {
    if (in.size() != 1 || in[0].type != ops::ElemType::Float32 || in[0].dims.empty())
      return "the GPU runs graphs of one float input [batch, ...]";
    row.assign(in[0].dims.begin() + 1, in[0].dims.end());
    if (std::any_of(row.begin(), row.end(), [](std::int64_t d) { return d < 1; }))
      return "input '" + in[0].name + "' has a dynamic dimension besides the batch";
  }
  try {
    models::OnnxRunner runner(std::shared_ptr<const models::OnnxGraph>(&graph, [](const models::OnnxGraph*) {}));
    if (fixed) {
      for (std::size_t k = 0; k < in.size(); ++k) runner.input(k) = fixed->at(k);
      s[0] = s[1] = s[2] = trial(runner, ints);
    } else {
      for (std::int64_t r = 1; r <= 3; ++r) {
        std::vector<std::int64_t> shape{r};
        shape.insert(shape.end(), row.begin(), row.end());
        runner.input(0).reset(ops::ElemType::Float32, shape);
        std::fill(runner.input(0).f.begin(), runner.input(0).f.end(), 0.0f);
        s[r - 1] = trial(runner, ints);
      }
    }
  } catch (const std::exception& e) {
    return std::string("its trial run on the CPU failed: ") + e.what();
  }
  return "";
}

// Shapes from the trial runs, linear in the rows, or a reason why not.
std::string plan_shapes(const models::OnnxGraph& graph, const std::vector<ops::Tensor>* fixed, GraphPlan& plan,
                        std::vector<char>& ints) {
  Shapes s[3];
  if (std::string why = trial_shapes(graph, fixed, s, ints); !why.empty()) return why;
  plan.tensors.resize(s[0].size());
  for (std::size_t k = 0; k < s[0].size(); ++k) {
    TensorPlan& t = plan.tensors[k];
    t.constant = k < graph.constants().size();
    t.device = !ints[k];
    const auto& a = s[0][k];
    if (s[1][k].size() != a.size() || s[2][k].size() != a.size()) return "tensor shapes change rank with the batch size";
    for (std::size_t d = 0; d < a.size(); ++d) {
      const std::int64_t slope = s[1][k][d] - a[d];
      t.slope.push_back(slope);
      t.base.push_back(a[d] - slope);
      if (s[2][k][d] != a[d] + 2 * slope) return "a tensor's shape is not linear in the batch size";
    }
  }
  return "";
}

std::string node_text(const ops::GraphNode& n, const std::string& what) { return "node '" + n.name + "' (" + n.op + what + ")"; }

}  // namespace

GraphPlan plan_graph(const models::OnnxGraph& graph, const std::vector<ops::Tensor>* fixed_inputs) {
  GraphPlan plan;
  std::vector<char> ints;
  plan.unsupported = plan_shapes(graph, fixed_inputs, plan, ints);
  if (!plan.unsupported.empty()) return plan;
  const auto& nodes = graph.nodes();
  plan.host_node.assign(nodes.size(), 0);
  const std::size_t constants = graph.constants().size();
  for (std::size_t n = 0; n < nodes.size(); ++n) {
    const ops::GraphNode& node = nodes[n];
    bool reads_device = false;
    for (const int k : node.inputs)
      reads_device = reads_device || (k >= 0 && static_cast<std::size_t>(k) >= constants && !ints[static_cast<std::size_t>(k)]);
    plan.host_node[n] = !reads_device || node.op == "Shape" || node.op == "Size";
    // A host node runs the CPU's op; an If or Loop (sub-graphs, run by the CPU's OnnxRunner
    // alone) has none, even over host data only.
    if (plan.host_node[n] && ops::find_graph_op(node.op) == nullptr) {
      plan.unsupported = node_text(node, ", whose sub-graphs the CUDA backend does not run");
      return plan;
    }
    if (plan.host_node[n]) continue;
    if (find_cuda_graph_op(node.op) == nullptr) {
      plan.unsupported = node_text(node, ", which the CUDA backend lacks");
      return plan;
    }
    for (const int k : node.outputs)
      if (ints[static_cast<std::size_t>(k)]) {
        plan.unsupported = node_text(node, " giving int64 from float data, which the CUDA backend does not run");
        return plan;
      }
    if (const CudaGraphOpLimits limits = find_cuda_graph_op_limits(node.op)) {
      std::vector<std::vector<std::int64_t>> in_shapes;
      for (const int k : node.inputs)
        in_shapes.push_back(k < 0 ? std::vector<std::int64_t>{} : plan.tensors[static_cast<std::size_t>(k)].shape(1));
      if (const std::string why = limits(node, in_shapes); !why.empty()) {
        plan.unsupported = node_text(node, ": " + why);
        return plan;
      }
    }
  }
  const std::size_t out = static_cast<std::size_t>(graph.output_tensor(0));
  if (!fixed_inputs && (out < constants || !plan.tensors[out].device))
    plan.unsupported = "its first output is not a float tensor computed per row";
  return plan;
}

}  // namespace spmd::backends::cuda
