#pragma once
// Builds the classifier named by --model from its weights file (read on every rank).
#include <memory>
#include <string>

#include "spmd/models/classifier.hpp"
#include "spmd/runtime/context.hpp"

namespace spmd::cli {

std::unique_ptr<models::Classifier> load_classifier(const runtime::Context& ctx, const std::string& model,
                                                    const std::string& weights, int classes);

}  // namespace spmd::cli
