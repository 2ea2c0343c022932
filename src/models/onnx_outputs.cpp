// The last step of every ONNX predictor, on the host (onnx_predictor.hpp): the graph's output
// rows as `output` says they are -> each row's class and probabilities, the same bits for the
// same rows wherever the graph ran.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "spmd/models/argmax.hpp"
#include "spmd/models/onnx_predictor.hpp"

namespace spmd::models {

std::int64_t onnx_outputs_to_predictions(OnnxOutput output, const float* y, std::int64_t rows, int width, int classes,
                                         std::int32_t* classes_out, float* probs_out) {
  thread_local std::vector<float> probs;
  std::int64_t non_finite = 0;
  probs.resize(static_cast<std::size_t>(classes));
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* v = y + r * width;
    if (width == 1) {  // a binary classifier's one score; sigmoid(-s) rather than 1 - sigmoid(s) keeps P(0)'s digits
      const float s = v[0];
      const float p1 = output == OnnxOutput::Probabilities      ? s
                       : output == OnnxOutput::LogProbabilities ? std::exp(s)
                                                                : 1.0f / (1.0f + std::exp(-s));
      probs[0] = output == OnnxOutput::Logits ? 1.0f / (1.0f + std::exp(s)) : 1.0f - p1;
      probs[1] = p1;
    } else if (output == OnnxOutput::Probabilities) {
      std::copy_n(v, classes, probs.begin());
    } else if (output == OnnxOutput::LogProbabilities) {
      for (int k = 0; k < classes; ++k) probs[static_cast<std::size_t>(k)] = std::exp(v[k]);
    } else {
      const float top = *std::max_element(v, v + classes);
      float sum = 0.0f;
      for (int k = 0; k < classes; ++k) sum += probs[static_cast<std::size_t>(k)] = std::exp(v[k] - top);
      for (auto& p : probs) p /= sum;
    }
    bool finite = true;
    classes_out[r] = argmax(probs.data(), classes, finite);
    non_finite += !finite;
    if (probs_out) std::copy(probs.begin(), probs.end(), probs_out + r * classes);
  }
  return non_finite;
}

}  // namespace spmd::models
