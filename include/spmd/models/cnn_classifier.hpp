#pragma once
// The CNN ensemble as an eval classifier: class = argmax of the mean of the members'
// softmax probabilities (members summed in order, so the result is layout independent).
#include <memory>
#include <string>
#include <vector>

#include "spmd/models/classifier.hpp"

namespace spmd::models {

// members: each a flat parameter vector of kCnnParamCount floats (Flax layout).
std::unique_ptr<Classifier> make_cnn_classifier(std::vector<std::vector<float>> members, std::string source);

}  // namespace spmd::models
