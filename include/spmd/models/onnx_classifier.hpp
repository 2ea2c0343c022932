#pragma once
// A user's ONNX classifier as spmd eval runs it (onnx_graph.hpp): one float input [batch, ...]
// (other symbolic dimensions taken from the data), the first output (or the one named) [batch, C] (other
// dimensions 1 allowed: [batch, C, 1, 1], [batch, 1, C]). The stored features meet the input as stored when their trailing shape
// is the model's, or transposed from NHWC to NCHW (images as stored, a PyTorch model);
// anything else is refused with both shapes. A graph ending in Softmax gives probabilities,
// in LogSoftmax log-probabilities, otherwise logits (made probabilities by a softmax);
// OnnxOutput overrides what the file says.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "spmd/models/classifier.hpp"
#include "spmd/runtime/devices.hpp"

namespace spmd::models {

enum class OnnxOutput { Auto, Logits, Probabilities, LogProbabilities };
OnnxOutput parse_onnx_output(const std::string& text);  // auto|logits|probabilities|log-probabilities
const char* to_string(OnnxOutput output);

// Which of the graph's outputs holds the class scores (empty: the first; one named is kept
// alone, and the nodes only the others need do not run) and what it holds (Auto: as its last
// op says).
struct OnnxOutputChoice {
  std::string name;
  OnnxOutput holds = OnnxOutput::Auto;
};

// Normalisation a model was trained with outside its graph: x' = (x - mean) / std, after
// --input-scale, with one value for every feature or one per channel (the input's channel
// axis: dimension 1 of an NCHW input, the last of an NHWC one). Empty: none.
struct OnnxInputNorm {
  std::vector<float> mean, std;
};

// Loads and checks the model (OnnxGraph::load, then trial runs of 1 and 3 rows that must
// give [rows, C] with C >= 2). Throws spmd::Error naming the file, the input and the
// dimension that is not static, the output's shape, or a mean / std whose count matches no
// channel axis (or both: an input [3, 32, 3] is ambiguous) or a std that is not positive.
// With a device of a backend other than the CPU, also when that backend cannot run the graph
// (onnx_unsupported_on), naming the node and the op.
// Symbolic dimensions of the input beyond the batch (a fully convolutional net exported with
// dynamic height and width) take their sizes from data_sample_shape() (the stored samples'
// shape, read as check_sample_shape feeds them); without it they are refused.
std::unique_ptr<Classifier> make_onnx_classifier(const std::string& path, const OnnxOutputChoice& output = {},
                                                 const OnnxInputNorm& norm = {},
                                                 const runtime::DeviceInfo* device = nullptr,
                                                 const std::function<std::vector<std::int64_t>()>& data_sample_shape = {});

class OnnxGraph;
// "" when `device`'s backend runs every node of the graph (the CPU always does), else why not:
// the first node it cannot run and its op, or that its module runs no ONNX graph at all.
std::string onnx_unsupported_on(const OnnxGraph& graph, const runtime::DeviceInfo& device);
// The same for the graph in the file `path`; "" also when the file cannot be loaded (the run's
// own load, on every rank, then says why).
std::string onnx_file_unsupported_on(const std::string& path, const runtime::DeviceInfo& device,
                                     const std::string& output_name = "");

}  // namespace spmd::models
