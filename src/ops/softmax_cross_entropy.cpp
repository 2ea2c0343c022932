// softmax_cross_entropy: a model's loss over its logits [rows, classes]: probabilities for
// every row, the loss summed over the counted rows, and its gradient w.r.t. the logits.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "spmd/ops/cpu_op.hpp"
#include "spmd/runtime/error.hpp"

namespace spmd::models::cnn_cpu {

std::int64_t count_rows(const std::uint8_t* mask, int rows) {
  if (mask == nullptr) return rows;
  std::int64_t n = 0;
  for (int r = 0; r < rows; ++r) n += mask[r] != 0;
  return n;
}

LossSum softmax_cross_entropy(const float* logits, const std::int32_t* labels, const std::uint8_t* mask, int rows,
                              int classes, float* probs, float* dlogits, float grad_scale) {
  if (classes < 1) throw Error("CNN loss: " + std::to_string(classes) + " classes; need at least 1");
  // exp() of each logit is kept between the two passes: on the stack for the usual few
  // classes, in one allocation per call beyond that.
  constexpr int kStackClasses = 64;
  float stack_e[kStackClasses];
  std::vector<float> heap_e(classes > kStackClasses ? static_cast<std::size_t>(classes) : 0);
  float* e = classes > kStackClasses ? heap_e.data() : stack_e;
  LossSum sum;
  for (int r = 0; r < rows; ++r) {
    const float* z = logits + static_cast<long>(r) * classes;
    const bool counted = labels != nullptr && (mask == nullptr || mask[r] != 0);
    // Shifting by the max keeps exp() finite; the log-sum-exp is exact in float.
    float zmax = z[0];
    for (int j = 1; j < classes; ++j) zmax = std::max(zmax, z[j]);
    float total = 0.0f;
    for (int j = 0; j < classes; ++j) {
      e[j] = std::exp(z[j] - zmax);
      total += e[j];
    }
    const float inv_total = 1.0f / total;
    if (probs != nullptr)
      for (int j = 0; j < classes; ++j) probs[static_cast<long>(r) * classes + j] = e[j] * inv_total;
    float* d = dlogits != nullptr ? dlogits + static_cast<long>(r) * classes : nullptr;
    if (!counted) {
      if (d != nullptr) std::fill(d, d + classes, 0.0f);
      continue;
    }
    const std::int32_t label = labels[r];
    if (label < 0 || label >= classes)
      throw Error("CNN loss: label " + std::to_string(label) + " of batch row " + std::to_string(r) +
                  " is outside [0, " + std::to_string(classes) + ")");
    sum.loss_sum += static_cast<double>(std::log(total) - (z[label] - zmax));
    sum.count += 1;
    if (d != nullptr) {
      for (int j = 0; j < classes; ++j) d[j] = e[j] * inv_total * grad_scale;
      d[label] -= grad_scale;
    }
  }
  return sum;
}

}  // namespace spmd::models::cnn_cpu

namespace spmd::ops {
namespace {

OpShape softmax_cross_entropy_shape(const OpSpec&, const Shape& in) {
  if (in.h != 1 || in.w != 1) throw Error("softmax_cross_entropy: the logits must be a vector per row");
  return {in, in, {}, 0};
}

class CpuSoftmaxCrossEntropy final : public CpuLossOp {
 public:
  CpuSoftmaxCrossEntropy(const OpSpec&, const OpShape& shape) : classes_(shape.in.c) {}
  models::cnn_cpu::LossSum loss(const float* logits, const std::int32_t* labels, const std::uint8_t* mask, int rows,
                                float* probs, float* dlogits, float grad_scale) const override {
    return models::cnn_cpu::softmax_cross_entropy(logits, labels, mask, rows, classes_, probs, dlogits, grad_scale);
  }

 private:
  int classes_;
};

}  // namespace

SPMD_REGISTER_CPU_LOSS("softmax_cross_entropy", softmax_cross_entropy_shape, CpuSoftmaxCrossEntropy);

}  // namespace spmd::ops
