#include "spmd/models/onnx_classifier.hpp"

#include <algorithm>
#include <cmath>

#include "spmd/models/argmax.hpp"
#include "spmd/models/onnx_graph.hpp"
#include "spmd/runtime/error.hpp"

namespace spmd::models {

OnnxOutput parse_onnx_output(const std::string& text) {
  for (const auto o : {OnnxOutput::Auto, OnnxOutput::Logits, OnnxOutput::Probabilities, OnnxOutput::LogProbabilities})
    if (text == to_string(o)) return o;
  throw Error("--model-output must be auto, logits, probabilities or log-probabilities (got '" + text + "')");
}

const char* to_string(OnnxOutput output) {
  switch (output) {
    case OnnxOutput::Auto: return "auto";
    case OnnxOutput::Logits: return "logits";
    case OnnxOutput::Probabilities: return "probabilities";
    case OnnxOutput::LogProbabilities: return "log-probabilities";
  }
  return "?";
}

namespace {

using Dims = std::vector<std::int64_t>;

std::int64_t product(const Dims& d) {
  std::int64_t n = 1;
  for (const auto v : d) n *= v;
  return n;
}

// How stored samples become the model's input rows.
struct InputMapping {
  bool nhwc_to_nchw = false;
  std::int64_t h = 0, w = 0, c = 0;
};

// The normalisation as one (shift, 1 / std) pair per element of a model row: empty for none.
struct Normalisation {
  std::vector<float> mean, inv_std;
};

Normalisation plan_normalisation(const OnnxInputNorm& norm, const Dims& row, const std::string& path) {
  Normalisation n;
  if (norm.mean.empty() && norm.std.empty()) return n;
  const std::int64_t size = product(row);
  const auto count = static_cast<std::int64_t>(std::max(norm.mean.size(), norm.std.size()));
  if (!norm.mean.empty() && !norm.std.empty() && norm.mean.size() != norm.std.size() && norm.mean.size() != 1 &&
      norm.std.size() != 1)
    throw Error("--input-mean has " + std::to_string(norm.mean.size()) + " values and --input-std " +
                std::to_string(norm.std.size()) + "; give one value or one per channel for each");
  for (const float s : norm.std)
    if (!(s > 0.0f)) throw Error("--input-std must be positive (got " + std::to_string(s) + ")");
  // Which axis of the row holds the channels: per element index -> channel.
  const bool first = !row.empty() && row.front() == count, last = row.size() >= 2 && row.back() == count;
  if (count > 1 && first == last)
    throw Error("ONNX model '" + path + "': " + std::to_string(count) + " values of --input-mean / --input-std " +
                (first ? "match both the first and the last dimension" : "match no channel dimension") + " of its input [batch, " +
                ops::to_string(row).substr(1) + "; give one value, or one per channel");
  const std::int64_t inner = first ? size / count : 1;
  n.mean.resize(static_cast<std::size_t>(size));
  n.inv_std.resize(static_cast<std::size_t>(size));
  for (std::int64_t e = 0; e < size; ++e) {
    const std::int64_t c = count == 1 ? 0 : first ? e / inner : e % count;
    const auto pick = [c](const std::vector<float>& v, float fallback) {
      return v.empty() ? fallback : v[v.size() == 1 ? 0 : static_cast<std::size_t>(c)];
    };
    n.mean[static_cast<std::size_t>(e)] = pick(norm.mean, 0.0f);
    n.inv_std[static_cast<std::size_t>(e)] = 1.0f / pick(norm.std, 1.0f);
  }
  return n;
}

class OnnxPredictor final : public DevicePredictor {
 public:
  OnnxPredictor(std::shared_ptr<const OnnxGraph> graph, Dims row, InputMapping mapping, const Normalisation& norm,
                OnnxOutput output, int classes)
      : runner_(std::move(graph)), row_(std::move(row)), mapping_(mapping), norm_(norm), output_(output), classes_(classes) {}

  void predict(const float* samples, std::int64_t rows, std::int32_t* classes_out, float* probs_out) override {
    ops::Tensor& x = runner_.input(0);
    Dims shape{rows};
    shape.insert(shape.end(), row_.begin(), row_.end());
    x.reset(ops::ElemType::Float32, shape);
    const std::int64_t size = product(row_);
    if (!mapping_.nhwc_to_nchw) {
      std::copy_n(samples, rows * size, x.f.begin());
    } else {
      const auto [h, w, c] = std::tuple{mapping_.h, mapping_.w, mapping_.c};
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t p = 0; p < h * w; ++p)
          for (std::int64_t ch = 0; ch < c; ++ch)
            x.f[static_cast<std::size_t>(r * size + ch * h * w + p)] = samples[r * size + p * c + ch];
    }
    if (!norm_.mean.empty())
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t e = 0; e < size; ++e) {
          float& v = x.f[static_cast<std::size_t>(r * size + e)];
          v = (v - norm_.mean[static_cast<std::size_t>(e)]) * norm_.inv_std[static_cast<std::size_t>(e)];
        }
    runner_.run();
    const ops::Tensor& y = runner_.output(0);
    for (std::int64_t r = 0; r < rows; ++r) {
      const float* v = y.f.data() + r * classes_;
      probs_.resize(static_cast<std::size_t>(classes_));
      to_probabilities(v);
      classes_out[r] = argmax(probs_.data(), classes_);
      if (probs_out) std::copy(probs_.begin(), probs_.end(), probs_out + r * classes_);
    }
  }

 private:
  void to_probabilities(const float* v) {
    if (output_ == OnnxOutput::Probabilities) {
      std::copy_n(v, classes_, probs_.begin());
      return;
    }
    if (output_ == OnnxOutput::LogProbabilities) {
      for (int k = 0; k < classes_; ++k) probs_[static_cast<std::size_t>(k)] = std::exp(v[k]);
      return;
    }
    const float top = *std::max_element(v, v + classes_);
    float sum = 0.0f;
    for (int k = 0; k < classes_; ++k) sum += probs_[static_cast<std::size_t>(k)] = std::exp(v[k] - top);
    for (auto& p : probs_) p /= sum;
  }

  OnnxRunner runner_;
  Dims row_;
  InputMapping mapping_;
  const Normalisation& norm_;  // the classifier's, which outlives its predictors
  OnnxOutput output_;
  int classes_;
  std::vector<float> probs_;
};

class OnnxClassifier final : public Classifier {
 public:
  OnnxClassifier(std::shared_ptr<const OnnxGraph> graph, Dims row, int classes, OnnxOutput output, std::string said,
                 Normalisation norm, std::int64_t fixed_bytes, std::int64_t row_bytes)
      : graph_(std::move(graph)), row_(std::move(row)), classes_(classes), output_(output), said_(std::move(said)),
        norm_(std::move(norm)), fixed_bytes_(fixed_bytes), row_bytes_(row_bytes) {}

  std::string describe() const override {
    const auto& in = graph_->inputs().front();
    std::string text = "onnx " + graph_->path() + " (opset " + std::to_string(graph_->opset()) + ", " +
                       std::to_string(graph_->node_count()) + " nodes): input '" + in.name + "' [batch, " +
                       ops::to_string(row_).substr(1);
    if (mapping_.nhwc_to_nchw) text += " from stored NHWC [" + std::to_string(mapping_.h) + ", " + std::to_string(mapping_.w) +
                                       ", " + std::to_string(mapping_.c) + "] transposed to NCHW";
    if (!norm_.mean.empty()) text += ", normalised by --input-mean / --input-std";
    return text + ", output '" + graph_->outputs().front().name + "' " + to_string(output_) + " (" + said_ + ")";
  }
  int classes() const override { return classes_; }

  // Decides the input mapping (kept for the predictors made after it, on every rank alike).
  void check_sample_shape(const Dims& stored, const std::string& data_path) const override {
    mapping_ = {};
    if (stored == row_) return;
    if (stored.size() == 3 && row_.size() == 3 && stored[2] == row_[0] && stored[0] == row_[1] && stored[1] == row_[2]) {
      mapping_ = {true, stored[0], stored[1], stored[2]};
      return;
    }
    // [H, W] stored for a [1, H, W] input (shapes that differ by 1-sized dimensions), or any
    // sample flattened for a vector input (an MLP's [784] for [28, 28, 1] images): row-major as stored.
    Dims a, b;
    for (const auto d : stored) if (d != 1) a.push_back(d);
    for (const auto d : row_) if (d != 1) b.push_back(d);
    if (a == b || (row_.size() == 1 && product(stored) == row_[0])) return;
    throw CollectiveError("'" + data_path + "' holds samples of shape " + ops::to_string(stored) + "; the ONNX model '" +
                          graph_->path() + "' takes input '" + graph_->inputs().front().name + "' [batch, " +
                          ops::to_string(row_).substr(1) + " (as stored, flattened for a vector input, or NHWC images for an NCHW input)");
  }

  std::unique_ptr<DevicePredictor> make_predictor(const runtime::DeviceInfo& device, std::int64_t) const override {
    if (!device.is_host())
      throw CollectiveError("the " + std::string(device.backend()) + " backend does not run ONNX models yet: run " +
                            "spmd eval --model onnx with --backend cpu");
    return std::make_unique<OnnxPredictor>(graph_, row_, mapping_, norm_, output_, classes_);
  }
  std::int64_t parameter_bytes() const override { return graph_->parameter_floats() * 4; }
  // The run's tensors (storage reused by liveness) and the ops' scratch, from trial runs at load.
  std::int64_t workspace_bytes(std::int64_t rows) const override { return fixed_bytes_ + rows * row_bytes_; }

 private:
  std::shared_ptr<const OnnxGraph> graph_;
  Dims row_;
  int classes_;
  OnnxOutput output_;
  std::string said_;
  Normalisation norm_;
  std::int64_t fixed_bytes_, row_bytes_;
  mutable InputMapping mapping_;
};

// What trial runs with 1 and 2 rows show: the classes ([rows, C] or [rows, C, 1, 1]) and the
// bytes of the run's tensors, fixed and per row (for --dry-run's memory).
struct Trial {
  int classes = 0;
  std::int64_t fixed_bytes = 0, row_bytes = 0;
};

Trial trial_runs(const std::shared_ptr<const OnnxGraph>& graph, const Dims& row) {
  OnnxRunner runner(graph);
  std::int64_t classes = 0, bytes[2] = {0, 0};
  for (const std::int64_t rows : {1, 2}) {
    Dims shape{rows};
    shape.insert(shape.end(), row.begin(), row.end());
    runner.input(0).reset(ops::ElemType::Float32, shape);
    std::fill(runner.input(0).f.begin(), runner.input(0).f.end(), 0.0f);
    runner.run();
    const ops::Tensor& y = runner.output(0);
    const bool ok = y.type == ops::ElemType::Float32 && y.shape.size() >= 2 && y.shape[0] == rows &&
                    std::all_of(y.shape.begin() + 2, y.shape.end(), [](std::int64_t d) { return d == 1; });
    if (!ok || y.shape[1] < 2)
      throw Error("ONNX model '" + graph->path() + "': output '" + graph->outputs().front().name + "' is " +
                  ops::to_string(y.shape) + " for a batch of " + std::to_string(rows) +
                  "; a classifier gives [batch, classes >= 2] (or [batch, classes, 1, 1])");
    if (classes && y.shape[1] != classes)
      throw Error("ONNX model '" + graph->path() + "': its classes change with the batch size");
    classes = y.shape[1];
    bytes[rows - 1] = runner.tensor_bytes() + ops::scratch_bytes();  // the ops' scratch is per image: fixed
  }
  const std::int64_t per_row = std::max<std::int64_t>(0, bytes[1] - bytes[0]);
  return {static_cast<int>(classes), std::max<std::int64_t>(0, bytes[0] - per_row), per_row};
}

}  // namespace

std::unique_ptr<Classifier> make_onnx_classifier(const std::string& path, OnnxOutput output, const OnnxInputNorm& norm) {
  auto graph = OnnxGraph::load(path);
  if (graph->inputs().size() != 1)
    throw Error("ONNX model '" + path + "' has " + std::to_string(graph->inputs().size()) +
                " inputs; spmd eval feeds one (the features)");
  const auto& in = graph->inputs().front();
  if (in.type != ops::ElemType::Float32)
    throw Error("ONNX model '" + path + "': input '" + in.name + "' is not float; spmd eval feeds float32 features");
  if (in.dims.empty()) throw Error("ONNX model '" + path + "': input '" + in.name + "' has no batch dimension");
  const Dims row(in.dims.begin() + 1, in.dims.end());
  for (std::size_t k = 0; k < row.size(); ++k)
    if (row[k] < 1)
      throw Error("ONNX model '" + path + "': dimension " + std::to_string(k + 1) + " of input '" + in.name +
                  "' is not a fixed size; only the batch dimension (0) may be dynamic");
  const Trial trial = trial_runs(graph, row);
  const int classes = trial.classes;
  std::string said = "as the file says: ";
  const std::string last = graph->output_kind(0);
  if (output == OnnxOutput::Auto) {
    output = last == "Softmax" ? OnnxOutput::Probabilities : last == "LogSoftmax" ? OnnxOutput::LogProbabilities : OnnxOutput::Logits;
    said += last == "Softmax" || last == "LogSoftmax" ? "the graph ends in " + last
                                                      : "the graph ends in " + (last.empty() ? std::string("a constant") : last) + ": logits";
  } else {
    said = "--model-output";
  }
  Normalisation plan = plan_normalisation(norm, row, path);
  return std::make_unique<OnnxClassifier>(std::move(graph), row, classes, output, said, std::move(plan), trial.fixed_bytes,
                                          trial.row_bytes);
}

}  // namespace spmd::models
