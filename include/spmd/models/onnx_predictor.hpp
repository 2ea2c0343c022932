#pragma once
// What a device predictor of an ONNX classifier needs (onnx_classifier.hpp decides it once
// per run, on every rank alike), and the device kinds through which a backend other than the
// CPU provides one (device_models.hpp): the CUDA module runs the graph on its GPU.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "spmd/models/classifier.hpp"
#include "spmd/models/onnx_classifier.hpp"
#include "spmd/models/onnx_graph.hpp"
#include "spmd/runtime/devices.hpp"

namespace spmd::models {

// How stored samples [rows, sample_size] become the model's input rows [rows, row...]: the
// same values, or NHWC images transposed to NCHW; then x' = (x - mean[e]) * inv_std[e] per
// element e of a row when mean is not empty.
struct OnnxInputPlan {
  std::vector<std::int64_t> row;  // the model's input without its batch dimension
  bool nhwc_to_nchw = false;
  std::int64_t h = 0, w = 0, c = 0;
  std::vector<std::int64_t> stored;  // the data's sample shape, once check_sample_shape has seen it
  std::vector<float> mean, inv_std;  // per element of a row, or both empty
  bool integer = false;  // an integer input (uint8 images): the stored values, rounded to int64
  // "float16" / "bfloat16" for such an input: the features rounded to it (then computed in float32).
  std::string rounded_to;
};

struct OnnxPredictorSpec {
  std::shared_ptr<const OnnxGraph> graph;
  OnnxInputPlan input;
  OnnxOutput output = OnnxOutput::Logits;  // never Auto here: what the output holds
  int classes = 0;
  // Values per output row: `classes`, or 1 for a binary classifier's one score (class 1's
  // logit or probability; classes is 2 then).
  int width = 0;
  // 0, or the batch size the graph holds (a file exported with a fixed batch whose graph breaks
  // at another): every run has exactly this many rows (onnx_classifier.cpp pads the last).
  std::int64_t fixed_batch = 0;
};

// The predictor's last step on every backend, on the host: output rows y [rows, width] as
// `output` says they are -> classes_out [rows] and, when probs_out, probabilities [rows,
// classes]. A one-score row s gives P(class 1) = sigmoid(s) (a logit), s (a probability) or
// e^s, and P(class 0) its complement. The same bits for the same y wherever the graph ran.
// Returns how many rows had a NaN or an infinity among the probabilities their class is chosen from.
std::int64_t onnx_outputs_to_predictions(OnnxOutput output, const float* y, std::int64_t rows, int width, int classes,
                                         std::int32_t* classes_out, float* probs_out);

struct OnnxPredictorKind {
  static constexpr const char* name = "ONNX graph predictor (eval --model onnx)";
  using Make = std::unique_ptr<DevicePredictor> (*)(const runtime::DeviceInfo& device, const OnnxPredictorSpec& spec,
                                                    std::int64_t max_rows);
};
// Whether a backend runs a graph: "" when it does, else why not, naming the first node it
// cannot run and its op ("node 'conv3' (Gather on float data)"). Needs no device.
struct OnnxSupportKind {
  static constexpr const char* name = "ONNX graph support check";
  using Make = std::string (*)(const OnnxGraph& graph);
};

}  // namespace spmd::models
