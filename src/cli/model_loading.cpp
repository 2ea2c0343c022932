#include "model_loading.hpp"

#include "spmd/runtime/error.hpp"

namespace spmd::cli {

std::unique_ptr<models::Classifier> load_classifier(const runtime::Context&, const std::string& model,
                                                    const std::string& weights, int classes) {
  if (model == "zero") return models::make_zero_classifier(classes);
  throw CollectiveError("--model " + model + " (" + weights + "): not available in this build yet");
}

}  // namespace spmd::cli
