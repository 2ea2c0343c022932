#pragma once
// The CNN ensemble as an eval classifier: class = argmax of the mean of the members'
// softmax probabilities (members summed in order, so the result is layout independent).
#include <memory>
#include <string>
#include <vector>

#include "spmd/models/classifier.hpp"
#include "spmd/models/cnn_config.hpp"

namespace spmd::models {

// members: each a flat parameter vector of the config's CnnLayout::param_count() floats
// (Flax layout, cnn_params.hpp). Throws spmd::Error naming `source` for an invalid config,
// no members, or a member of another size.
std::unique_ptr<Classifier> make_cnn_classifier(const CnnConfig& config, std::vector<std::vector<float>> members,
                                                std::string source);

}  // namespace spmd::models
