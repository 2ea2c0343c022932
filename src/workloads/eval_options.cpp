#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "spmd/data/dataset.hpp"
#include "spmd/runtime/error.hpp"
#include "spmd/sharding/step_sync.hpp"
#include "spmd/workloads/eval.hpp"
#include "spmd/workloads/eval_models.hpp"

namespace spmd::workloads {

namespace {
// --input-mean / --input-std: one number or a comma-separated list ("0.485,0.456,0.406").
std::string floats_text(const std::vector<float>& v) {
  std::string t;
  for (const float x : v) t += (t.empty() ? "" : ",") + format("%.9g", x);
  return t;
}
std::vector<float> parse_floats(const std::string& text) {
  std::vector<float> v;
  std::size_t at = 0;
  while (at <= text.size() && !text.empty()) {
    const std::size_t end = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, end - at);
    char* stop = nullptr;
    const float x = std::strtof(item.c_str(), &stop);
    if (item.empty() || *stop != '\0' || !std::isfinite(x))
      throw Error("--input-mean / --input-std take a number or a comma-separated list of numbers (got '" + text + "')");
    v.push_back(x);
    at = end + 1;
  }
  return v;
}
}  // namespace

const std::vector<Option<EvalOptions>>& EvalOptions::declared() {
  using namespace rule;
  using data::FeatureScale;
  static const std::vector<Option<EvalOptions>> list{
      {"data", SPMD_MEMBER(data), "HDF5 file with the examples (required)", required | input_file | mpi_io},
      {"model", SPMD_MEMBER(model), eval_models_help()},
      {"weights", SPMD_MEMBER(weights), "the model's file (what each --model takes: above)", input_file | mpi_io},
      {"classes", SPMD_MEMBER(classes), "number of classes for --model zero (labels must lie in [0, classes))",
       positive | at_most(data::kMaxClasses, "labels are class indices below it")},
      {"per-device-batch", SPMD_MEMBER(per_device_batch), "rows per device per step (B)", positive},
      {"strategy", SPMD_TEXT(strategy, to_string, parse_eval_strategy),
       "keep-remainder | drop-remainder | pad | pad-metrics | infinite-pad"},
      {"min-device-batch", SPMD_MEMBER(min_device_batch),
       "pad/pad-metrics: pad every device to at least this many rows (0: the per-device batch, one shape)", non_negative},
      {"count-window", SPMD_MEMBER(count_window),
       "infinite-pad: steps whose real rows one count-barrier allreduce sums (1: a barrier on every step, as in Flax's "
       "full-dataset evaluation guide; the stopping step is the same for every value)"},
      {"drop-label", SPMD_MEMBER(drop_label),
       "drop the examples with this label after loading (per-rank counts become data dependent)"},
      {"input-scale", SPMD_TEXT(input_scale, FeatureScale::text_of, FeatureScale::parse_other),
       "how stored features become float32: auto (uint8 / 255; other types as stored; with an image model (cnn), "
       "images of another type beyond [0, 1] are refused), none (as stored, uint8 too), or a factor such as 1/255"},
      {"onnx-output", SPMD_MEMBER(onnx_output),
       "onnx: the name of the graph output that holds the class scores (default: the first; a model returning "
       "(embedding, logits) names its logits); the nodes only the other outputs need do not run"},
      {"model-output", SPMD_TEXT(model_output, models::to_string, models::parse_onnx_output),
       "onnx: what the model's output holds: auto (Softmax: probabilities, LogSoftmax: log-probabilities, else "
       "logits), logits, probabilities or log-probabilities"},
      {"input-mean", SPMD_TEXT(input_mean, floats_text, parse_floats),
       "onnx: subtract this after --input-scale, one value or one per channel (a model trained on normalised inputs)"},
      {"input-std", SPMD_TEXT(input_std, floats_text, parse_floats),
       "onnx: then divide by this, one value or one per channel"},
      {"predictions", SPMD_MEMBER(predictions),
       "write every example's predicted class (int32 [N], -1 = not evaluated), class probabilities (float32 [N, C]) "
       "and label to this HDF5 file, rows in the input's order (each rank writes its rows; atomic)",
       output_file | mpi_io},
      {"dry-run", SPMD_MEMBER(dry_run), "read only shapes; print each rank's split, padded batch shape, steps and memory"},
      {"benchmark", SPMD_MEMBER(benchmark),
       "also time pad and infinite-pad against the plain forward over the same examples and print the ratios"},
      {"repeat", SPMD_MEMBER(repeat),
       "--benchmark: rounds (each times every strategy once; the median ratio counts; at least 5, then up to 30 s)",
       positive},
      {"passes", SPMD_MEMBER(passes), "--benchmark: passes over the data per sample (0: enough for about 2 ms)",
       non_negative},
      {"progress-seconds", SPMD_MEMBER(progress_seconds),
       "seconds between progress lines on stdout when stderr is not a terminal (a log; on a terminal a bar on stderr is "
       "redrawn instead, as logreg and ensemble do)",
       positive},
      {"quiet", SPMD_MEMBER(quiet), "no progress lines, only the start-up table, the results and the warnings"},
  };
  return list;
}

std::int64_t EvalOptions::device_batch() const {
  const bool padded = strategy == EvalStrategy::Pad || strategy == EvalStrategy::PadMetrics;
  return std::max(per_device_batch, padded ? min_device_batch : 0);
}

void EvalOptions::validate() const {
  if (count_window < 1 || count_window > sharding::WindowedCountBarrier::kMaxWindow)
    throw Error("--count-window must be between 1 and " + std::to_string(sharding::WindowedCountBarrier::kMaxWindow) +
                " steps (got " + std::to_string(count_window) + ")");
  const auto& m = eval_model(model);
  if (!m.weights.empty() && weights.empty())
    throw Error("--weights is required: --model " + m.name + " needs " + m.weights);
  if (drop_label && *drop_label < 0) throw Error("--drop-label must be >= 0");
  if (!predictions.empty() && dry_run) throw Error("--predictions: a --dry-run evaluates nothing to write");
  if (model != "onnx" &&
      (model_output != models::OnnxOutput::Auto || !onnx_output.empty() || !input_mean.empty() || !input_std.empty()))
    throw Error("--onnx-output, --model-output, --input-mean and --input-std apply to --model onnx (this run has --model " +
                model + ")");
}

}  // namespace spmd::workloads
