#include "spmd/workloads/model_export.hpp"

#include "spmd/data/h5_reader.hpp"
#include "spmd/data/output_set.hpp"
#include "spmd/models/cnn_params.hpp"
#include "spmd/models/onnx_export.hpp"
#include "spmd/runtime/agree.hpp"
#include "spmd/runtime/collectives.hpp"
#include "spmd/runtime/error.hpp"
#include "spmd/workloads/checkpoint.hpp"
#include "spmd/workloads/logreg_weights.hpp"

namespace spmd::workloads {

namespace {

using Metadata = std::vector<std::pair<std::string, std::string>>;

// The root attribute `name` as text, or "" when the file has none.
std::string attribute_or_empty(const data::H5Reader& in, const std::string& name) {
  if (!in.has_attribute("/", name)) return "";
  try {
    return in.attribute_string("/", name);
  } catch (const Error&) {
    return std::to_string(in.attribute_int("/", name));
  }
}

// The class names the training file states (our Fashion-MNIST file: "T-shirt/top,..."), or
// "" when it is gone or has none: a provenance detail, never a reason to fail the export.
std::string class_names_of(const std::string& data_path) {
  try {
    const data::H5Reader in(data_path);
    return attribute_or_empty(in, "class_names");
  } catch (const std::exception&) {
    return "";
  }
}

// A "key=value" line of the checkpoint's defining options, "" when absent; the data lines
// read "PATH (N bytes)", of which the path is returned.
std::string option_value(const std::string& options, const std::string& key) {
  const std::string tag = key + "=";
  for (std::size_t at = 0; at < options.size();) {
    const std::size_t end = std::min(options.find('\n', at), options.size());
    if (options.compare(at, tag.size(), tag) == 0) {
      std::string value = options.substr(at + tag.size(), end - at - tag.size());
      if (const auto cut = value.rfind(" ("); cut != std::string::npos && value.back() == ')') value.resize(cut);
      return value;
    }
    at = end + 1;
  }
  return "";
}

void add(Metadata& m, const std::string& key, const std::string& value) {
  if (!value.empty()) m.emplace_back(key, value);
}

// Builds the ensemble's graph on rank 0; every rank has read the members.
std::string ensemble_bytes(const runtime::Context& ctx, const ExportRequest& r, ExportResult& res) {
  CheckpointParams ck = read_checkpoint_params(ctx, r.weights);
  const int members = static_cast<int>(ck.members.size());
  if (r.member && (*r.member < 0 || *r.member >= members))
    throw CollectiveError("--member " + std::to_string(*r.member) + ": the checkpoint '" + r.weights + "' has " +
                          std::to_string(members) + " members (0 to " + std::to_string(members - 1) + ")");
  if (r.member) ck.members = {std::move(ck.members[static_cast<std::size_t>(*r.member)])};
  const models::CnnConfig& c = ck.config;
  res.description = (r.member ? "member " + std::to_string(*r.member) + " of the " : std::to_string(members) + " members of the ") +
                    c.describe() + " CNN";
  res.input = "images float32 [batch, " + std::to_string(c.height) + ", " + std::to_string(c.width) + ", " +
              std::to_string(c.channels) + "] (NHWC)";
  res.output = "probabilities float32 [batch, " + std::to_string(c.classes) + "]";
  std::string bytes;
  runtime::agree_on(ctx.comm(), [&] {
    if (!ctx.is_root()) return;
    const data::H5Reader in(r.weights, "the ensemble checkpoint (--weights)");
    const std::string options = attribute_or_empty(in, "options");
    const std::string train = option_value(options, "train");
    const std::string scale = option_value(options, "input-scale");
    Metadata& m = res.metadata;
    add(m, "model", r.member ? "cnn (one member of an ensemble)" : "cnn-ensemble (mean of the members' probabilities)");
    add(m, "cnn_config", c.to_json());
    add(m, "members", r.member ? "1 (member " + std::to_string(*r.member) + " of " + std::to_string(members) + ")"
                               : std::to_string(members));
    add(m, "input", res.input);
    add(m, "input_scale", scale.empty() ? "the training run's --input-scale (auto: uint8 images / 255, values in [0, 1])" : scale);
    add(m, "epochs_done", attribute_or_empty(in, "epochs_done"));
    add(m, "training_data", train);
    add(m, "training_data_fingerprint", attribute_or_empty(in, "train_fingerprint"));
    add(m, "class_names", class_names_of(train));
    bytes = models::cnn_ensemble_onnx(c, ck.members, {res.description + ", as trained by spmd ensemble. Input: " + res.input +
                                                          ", scaled as in training. Output: " + res.output + ".",
                                                      m});
  });
  return bytes;
}

std::string logreg_bytes(const runtime::Context& ctx, const ExportRequest& r, ExportResult& res) {
  if (r.member) throw CollectiveError("--member applies to ensemble checkpoints; '" + r.weights + "' holds logreg weights");
  const models::LogregParameters w = read_logreg_weights(ctx, r.weights);
  res.description = "logistic regression of " + std::to_string(w.features) + " features, " + std::to_string(w.classes) +
                    " classes" + (w.has_intercept() ? ", with intercept" : "");
  res.input = "features float32 [batch, " + std::to_string(w.features) + "]";
  res.output = "probabilities float32 [batch, " + std::to_string(w.classes) + "]";
  std::string bytes;
  runtime::agree_on(ctx.comm(), [&] {
    if (!ctx.is_root()) return;
    const data::H5Reader in(r.weights, "the logreg weights (--weights)");
    const std::string data = attribute_or_empty(in, "data");
    const std::string scale = attribute_or_empty(in, "input_scale");
    Metadata& m = res.metadata;
    add(m, "model", "logreg (softmax of x W + b)");
    add(m, "input", res.input + ", features flattened row-major");
    add(m, "input_scale", scale.empty() ? "the training run's --input-scale (auto: uint8 / 255, other types as stored)"
                                        : scale + " (spmd logreg --input-scale)");
    add(m, "solver_status", attribute_or_empty(in, "status"));
    add(m, "training_data", data);
    add(m, "class_names", class_names_of(data));
    bytes = models::logreg_onnx(w, {res.description + ", as trained by spmd logreg. Input: " + res.input +
                                        ", scaled as in training. Output: " + res.output + ".",
                                    m});
  });
  return bytes;
}

}  // namespace

ExportResult export_onnx(const runtime::Context& ctx, const ExportRequest& r, data::OutputSet& outputs) {
  ExportResult res;
  runtime::agree_on(ctx.comm(), [&] {
    if (!ctx.is_root()) return;
    const data::H5Reader in(r.weights, "the model to export (--weights)");
    res.kind = attribute_or_empty(in, "model");
    if (res.kind.empty() && in.has_dataset("/W")) res.kind = "logreg";  // W (and b) as any tool writes them
    if (res.kind != "cnn-ensemble" && res.kind != "logreg")
      throw Error("--weights '" + r.weights + "' is neither an spmd ensemble checkpoint nor logreg weights (model = '" +
                  res.kind + "'; expected cnn-ensemble, or logreg / a dataset W)");
  });
  runtime::broadcast(ctx, res.kind);
  const std::string bytes = res.kind == "logreg" ? logreg_bytes(ctx, r, res) : ensemble_bytes(ctx, r, res);
  res.bytes = static_cast<std::int64_t>(bytes.size());
  outputs.write_text(r.out, bytes);
  return res;
}

}  // namespace spmd::workloads
