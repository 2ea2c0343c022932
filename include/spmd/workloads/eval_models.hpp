#pragma once
// The models `spmd eval` runs, one registry row each: its name, what --weights must be, how
// stored features become its input, and how it is loaded. `--model`'s choices and help come
// from this table, and no code outside it compares model names: a new eval model is its
// folder under src/models/ plus one row in src/workloads/eval_models.cpp.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "spmd/data/dataset.hpp"
#include "spmd/models/classifier.hpp"
#include "spmd/runtime/context.hpp"

namespace spmd::workloads {

struct EvalOptions;

struct EvalModel {
  std::string name;     // --model NAME
  std::string summary;  // what it predicts, for --help
  // What --weights must be, for --help and messages; empty when the model takes no weights.
  std::string weights;
  // An image model: with --input-scale auto, non-uint8 features beyond [0, 1] are refused
  // (uint8 is scaled by 1/255 either way; see data::FeatureScale::parse).
  bool images = false;
  // false for a model that predicts without computing: its timings measure data movement only.
  bool computes = true;
  // Collective: builds the classifier on every rank from the eval options (--weights, empty
  // when `weights` is; --classes for models whose weights do not fix it; the model's own
  // options, such as onnx's --model-output).
  std::function<std::unique_ptr<models::Classifier>(const runtime::Context& ctx, const EvalOptions& options)> load;
  // Under --backend auto, before the run takes its devices: why this model (with these
  // options) must run on the CPU although auto would take a GPU backend, or "" (auto's pick
  // stands). Empty function: never. --backend cuda with such a model is refused by its load.
  std::function<std::string(const EvalOptions& options)> cpu_only_under_auto;
};

// The registered models, in registration order.
const std::vector<EvalModel>& eval_models();

// The row named `name`; throws spmd::Error "--model must be one of zero|logreg|cnn (got 'x')".
const EvalModel& eval_model(const std::string& name);

// "--model" help: every model's name, summary and weights, one clause each.
std::string eval_models_help();

// A model that takes the stored values (Classifier::takes_stored_values: an ONNX model with a
// uint8 input) reads integer features unscaled: --input-scale auto becomes none; a factor, or
// features that are not integers, are refused naming both. Every rank decides alike.
void fit_input_scale_to_model(EvalOptions& options, const models::Classifier& model, const data::DatasetShape& shape);

}  // namespace spmd::workloads
