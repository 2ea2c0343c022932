#include "spmd/workloads/eval_models.hpp"

#include "spmd/backends/backend.hpp"
#include "spmd/data/dataset.hpp"
#include "spmd/data/feature_source.hpp"
#include "spmd/models/cnn_classifier.hpp"
#include "spmd/models/logreg_classifier.hpp"
#include "spmd/models/onnx_classifier.hpp"
#include "spmd/runtime/agree.hpp"
#include "spmd/runtime/error.hpp"
#include "spmd/workloads/checkpoint.hpp"
#include "spmd/workloads/eval.hpp"
#include "spmd/workloads/logreg_weights.hpp"

namespace spmd::workloads {

const std::vector<EvalModel>& eval_models() {
  static const std::vector<EvalModel> table = {
      {.name = "zero",
       .summary = "always class 0 (reading, padding and counting only)",
       .weights = "",
       .images = false,
       .computes = false,
       .load = [](const runtime::Context&, const EvalOptions& o) { return models::make_zero_classifier(o.classes); },
       .cpu_only_under_auto = nullptr},
      {.name = "logreg",
       .summary = "multiclass logistic regression",
       .weights = "a file written by spmd logreg --weights-out",
       .images = false,
       .computes = true,
       .load = [](const runtime::Context& ctx, const EvalOptions& o) {
         return models::make_logreg_classifier(read_logreg_weights(ctx, o.weights), o.weights);
       },
       .cpu_only_under_auto = nullptr},
      {.name = "cnn",
       .summary = "the mean probabilities of a CNN ensemble",
       .weights = "a spmd ensemble checkpoint",
       .images = true,
       .computes = true,
       .load = [](const runtime::Context& ctx, const EvalOptions& o) {
         auto checkpoint = read_checkpoint_params(ctx, o.weights);
         return models::make_cnn_classifier(checkpoint.config, std::move(checkpoint.members), o.weights);
       },
       .cpu_only_under_auto = nullptr},
      {.name = "onnx",
       .summary = "a classifier exported as ONNX (PyTorch, JAX, Keras, spmd export)",
       .weights = "an .onnx file",
       .images = false,
       .computes = true,
       .load = [](const runtime::Context& ctx, const EvalOptions& o) {
         std::unique_ptr<models::Classifier> model;  // every rank reads the file; a failure anywhere ends all
         runtime::agree_on(ctx.comm(), [&] {
           model = models::make_onnx_classifier(o.weights, {o.onnx_output, o.model_output}, {o.input_mean, o.input_std},
                                                &ctx.devices().front(),
                                                [&] { return data::probe_feature_source(o.data, o.keys).shape.sample_shape; });
         });
         return model;
       },
       .cpu_only_under_auto = [](const EvalOptions& o) {
         const runtime::PlatformChoice choice = backends::select_platform("auto");
         if (choice.platform == nullptr || choice.platform->name() == "cpu") return std::string();
         runtime::DeviceInfo device;
         device.platform = choice.platform;
         return models::onnx_file_unsupported_on(o.weights, device, o.onnx_output);
       }},
  };
  return table;
}

const EvalModel& eval_model(const std::string& name) {
  std::string names;
  for (const auto& m : eval_models()) {
    if (m.name == name) return m;
    names += (names.empty() ? "" : "|") + m.name;
  }
  throw Error("--model must be one of " + names + " (got '" + name + "')");
}

std::string eval_models_help() {
  std::string help;
  for (const auto& m : eval_models())
    help += (help.empty() ? "" : "; ") + m.name + ": " + m.summary + (m.weights.empty() ? "" : " (--weights: " + m.weights + ")");
  return help;
}

void fit_input_scale_to_model(EvalOptions& o, const models::Classifier& model, const data::DatasetShape& shape) {
  const std::string why = model.takes_stored_values();
  if (why.empty()) return;
  if (!data::is_integer(shape.features_type))
    throw CollectiveError("'" + o.data + "' holds " + data::to_string(shape.features_type) + " features and " + why +
                          ": it takes stored integers (images as uint8) as they are");
  if (o.input_scale.mode == data::FeatureScale::Mode::Factor)
    throw CollectiveError("--input-scale " + o.input_scale.text + ": " + why +
                          ", which takes the stored values as they are (leave --input-scale auto, or none)");
  o.input_scale = data::FeatureScale::parse("none", o.input_scale.images);
}

}  // namespace spmd::workloads
