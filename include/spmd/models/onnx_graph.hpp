#pragma once
// An ONNX model read with Debian's ONNX library (its protobuf types and checker) and run on
// the CPU by the op library's graph ops (ops/graph_op.hpp). Loading keeps the initializers
// and Constant nodes as constant tensors and folds every node whose inputs are all constant
// (weights transposed by the graph, shape arithmetic on constants); what depends on the input
// (even only on its batch size, like Shape) runs every call, on small int64 tensors.
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "spmd/ops/graph_op.hpp"

namespace spmd::models {

// The most iterations an ONNX Loop runs (the CLI's --max-loop-iterations, one value for the
// process). A model is untrusted input: a trip count of 2^62, constant or computed, would run
// until the job is killed; past the limit the Loop is refused naming its node and the option,
// before the first iteration when the trip count says so.
inline constexpr std::int64_t kDefaultMaxLoopIterations = 1000000;
void set_max_loop_iterations(std::int64_t iterations);  // >= 1
std::int64_t max_loop_iterations();

// A serialized TensorProto file (ONNX's test data: input_0.pb) as a tensor; spmd::Error naming
// the file when it cannot be read or holds another element type.
ops::Tensor read_onnx_tensor(const std::string& path);

class OnnxGraph {
 public:
  struct Value {  // a graph input or output
    std::string name;
    std::vector<std::int64_t> dims;  // -1 where symbolic (or unknown)
    ops::ElemType type = ops::ElemType::Float32;  // integer inputs (indices, uint8 images) are int64
    std::string stored_as = "float";              // the file's element type: "uint8", "int64", ...
  };

  // Parses and checks the file. Throws spmd::Error naming the file for a file that is not an
  // ONNX model, one the checker refuses, an input neither float nor integer, or ops the library
  // lacks (all of them named, with their counts, and the ops there are). With `output` named,
  // the graph keeps that output alone (an error lists the file's outputs when none is so
  // named), and the nodes only the others needed are dropped.
  static std::shared_ptr<const OnnxGraph> load(const std::string& path, const std::string& output = "");

  const std::string& path() const { return path_; }
  const std::vector<Value>& inputs() const { return inputs_; }
  const std::vector<Value>& outputs() const { return outputs_; }
  int opset() const { return opset_; }
  // What output k holds by the ops that make it: "Softmax" when it is probabilities (a Softmax,
  // or a Mean of them, through Identity / Reshape / Flatten / Squeeze / Dropout), "LogSoftmax"
  // for log-probabilities, else the op that produces it ("" for a constant).
  std::string output_kind(std::size_t k) const;
  std::int64_t parameter_floats() const { return parameter_floats_; }
  std::size_t node_count() const { return nodes_.size(); }

  // For executors on other backends (the CUDA module's): the table as OnnxRunner reads it.
  // Tensor k < constants().size() is constants()[k]; the others are a run's.
  const std::vector<ops::GraphNode>& nodes() const { return nodes_; }
  const std::vector<ops::Tensor>& constants() const { return constants_; }
  std::size_t tensor_count() const { return tensor_count_; }
  int input_tensor(std::size_t k) const { return input_index_.at(k); }
  int output_tensor(std::size_t k) const { return output_index_.at(k); }
  // The run tensors no node after node n reads (release_after_ below).
  const std::vector<int>& released_after(std::size_t n) const { return release_after_.at(n); }

 private:
  friend class OnnxRunner;
  struct Reader;  // onnx_graph.cpp: reads a GraphProto (the model's, an If's branch) into nodes
  // Load-time fusion, then the table renumbered so that the constants (moved out of `values`)
  // come first, and the liveness planned.
  void finish(std::vector<bool>& constant, std::vector<ops::Tensor>& values);
  void place_constants_first(const std::vector<bool>& constant, std::vector<ops::Tensor>& values);

  std::string path_;
  int opset_ = 0;
  std::vector<Value> inputs_, outputs_;
  std::vector<int> input_index_, output_index_;  // into the tensor table
  std::vector<ops::GraphNode> nodes_;            // in execution order, constants folded away
  std::vector<ops::GraphOpFn> fns_;
  std::vector<ops::Tensor> constants_;           // the table's first entries; the rest are per run
  // Per node, the run tensors no later node reads (neither graph inputs nor outputs): their
  // storage goes back to the runner's pool after the node, for the nodes after it.
  std::vector<std::vector<int>> release_after_;
  // Per node: its input 0 is a run tensor no later node reads and it reads it once (the op may
  // take its storage: OpCall::dying_input0). Planned with the liveness, once.
  std::vector<char> input0_dies_;
  bool inputs_rewritten_ = false;  // the model's graph: its inputs are written before each run
  std::size_t tensor_count_ = 0;
  std::int64_t parameter_floats_ = 0;
  // The branches (then, else) of each If node whose condition is known only at run time, as
  // graphs of their own whose inputs are the values they read from this one; the If node's
  // inputs are its condition, then branch 0's inputs, then branch 1's. Its attribute
  // spmd_branches indexes this. A Loop's body is graph[0] of an entry (spmd_loop_body).
  struct Branches {
    std::shared_ptr<const OnnxGraph> graph[2];
  };
  std::vector<Branches> branches_;
};

// Runs a graph; owns the tensors of one run (reused from call to call: no allocation once the
// largest batch has been seen). Not thread safe: one per device.
class OnnxRunner {
 public:
  explicit OnnxRunner(std::shared_ptr<const OnnxGraph> graph);
  // The input tensors to fill (one per graph input), then run(); outputs() after it. Fill them
  // before every run: a run may take an input's storage (and leave other storage there).
  ops::Tensor& input(std::size_t k) { return tensors_[static_cast<std::size_t>(graph_->input_index_.at(k))]; }
  // after_each, where given, sees every node's call once it has run (its inputs and outputs):
  // what spmd model info counts FLOPs from.
  using NodeObserver = std::function<void(const ops::OpCall&)>;
  void run(const NodeObserver& after_each = {});
  const ops::Tensor& output(std::size_t k) const {
    return k_output(static_cast<std::size_t>(graph_->output_index_.at(k)));
  }
  const OnnxGraph& graph() const { return *graph_; }
  // Any tensor of the last run (constants included), by table index: its shape and type.
  const ops::Tensor& tensor(std::size_t t) const { return k_output(t); }
  // Bytes the run's tensors, its pool of released storage and what the ops prepared hold now.
  std::int64_t tensor_bytes() const;

 private:
  const ops::Tensor& k_output(std::size_t t) const {
    return t < graph_->constants_.size() ? graph_->constants_[t] : tensors_[t];
  }
  std::shared_ptr<const OnnxGraph> graph_;
  std::vector<ops::Tensor> tensors_;  // the run's tensors (constants live in the graph)
  // Storage of tensors past their last use, handed to the next outputs: a run holds about the
  // largest set of tensors alive at once instead of every node's output.
  std::vector<ops::FloatBuffer> pool_;
  std::vector<std::size_t> last_size_;  // per tensor, its float count after the last run
  std::vector<std::unique_ptr<ops::Prepared>> prepared_;  // per node, what its op prepared
  std::vector<std::uint64_t> constant_inputs_;            // per node, OpCall::constant_inputs
  void take_from_pool(ops::FloatBuffer& f, std::size_t want);
  std::vector<const ops::Tensor*> in_;
  std::vector<ops::Tensor*> out_;
  // An If node's chosen branch, run by a runner of its own (made when first chosen).
  void run_nodes(const NodeObserver& after_each);
  void run_if(const ops::OpCall& call, std::size_t index);
  void run_loop(const ops::OpCall& call, std::size_t index);  // a Loop's body, by a runner of its own
  std::vector<std::array<std::unique_ptr<OnnxRunner>, 2>> branch_runners_;
};

}  // namespace spmd::models
