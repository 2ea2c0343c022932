#pragma once
// What an ONNX file holds and how spmd eval would take it: spmd model info. Unlike loading
// (onnx_graph.hpp), describing does not stop at the first thing spmd cannot run: ops it lacks
// are listed, and why eval would refuse the model is said instead of thrown.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace spmd::models {

struct OnnxModelInfo {
  struct Value {  // a graph input or output
    std::string name;
    std::string type;               // "float32", "int64", ...
    std::vector<std::string> dims;  // sizes, or the symbolic names ("batch"), "?" where unknown
    std::string layout;             // "NCHW", "NHWC" or "" where the shape says nothing
    std::string shape() const;      // "[batch, 1, 28, 28]"
  };
  std::string path, producer, producer_version;
  std::int64_t ir_version = 0;
  int opset = 0;
  std::map<std::string, int> opsets;  // every imported domain ("" is ai.onnx)
  std::vector<Value> inputs, outputs;
  std::map<std::string, int> op_counts;           // op_type (domain.op_type outside ai.onnx) -> nodes
  std::map<std::string, int> unsupported;         // those spmd does not run
  std::int64_t parameters = 0, parameter_bytes = 0;  // the initializers' values and bytes
  // Where spmd eval takes the model: the classes, how the first output is read, the features
  // it expects, and the FLOPs of one example (2 per multiply-add of Conv, Gemm and MatMul;
  // after BatchNormalization is folded).
  bool evaluable = false;
  std::string refusal;  // why eval would refuse it, when it would
  // The input's symbolic dimensions beyond the batch ("h, w"), which spmd eval takes from the
  // data's samples: its load checks (classes, FLOPs) wait for them; empty when there are none.
  std::string data_sized;
  int classes = 0;
  // "logits", "probabilities", "log-probabilities"; "logit of class 1" or "probability of
  // class 1" for a binary classifier's one score
  std::string output_reading;
  std::string expects;         // "features [N, 1, 28, 28] as stored, or images [N, 28, 28, 1] (NHWC) ..."
  std::optional<std::int64_t> flops_per_example;
};

// Throws spmd::Error naming the file when it cannot be read, is not an ONNX model, or the ONNX
// checker refuses it; anything else is described.
OnnxModelInfo describe_onnx_model(const std::string& path);

}  // namespace spmd::models
