#pragma once
// Multiclass logistic regression as an eval classifier: class = argmax of x.W.
#include <memory>
#include <string>
#include <vector>

#include "spmd/models/classifier.hpp"

namespace spmd::models {

// W: [features, classes] row-major float32 (owned by the classifier). source names the
// file in messages.
std::unique_ptr<Classifier> make_logreg_classifier(std::vector<float> W, int features, int classes, std::string source);

}  // namespace spmd::models
