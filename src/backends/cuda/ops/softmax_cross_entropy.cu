// softmax_cross_entropy on the GPU, as the CPU's (ops/softmax_cross_entropy.cpp). exp() is
// evaluated twice per logit instead of kept: no per-thread array whose size would depend on
// the number of classes.
#include "cuda_op.hpp"

namespace spmd::backends::cuda {
namespace {

__global__ void softmax_cross_entropy_kernel(const float* logits, const std::int32_t* labels, std::int64_t rows,
                                             int classes, float scale, float* probs, double* row_loss,
                                             float* dlogits) {
  for (std::int64_t r = grid_start(); r < rows; r += grid_stride()) {
    const float* z = logits + r * classes;
    float zmax = z[0];
    for (int j = 1; j < classes; ++j) zmax = fmaxf(zmax, z[j]);
    float total = 0.0f;
    for (int j = 0; j < classes; ++j) total += expf(z[j] - zmax);
    const float inv_total = 1.0f / total;
    for (int j = 0; j < classes; ++j) probs[r * classes + j] = expf(z[j] - zmax) * inv_total;
    if (labels == nullptr) continue;
    const std::int32_t label = labels[r];
    row_loss[r] = static_cast<double>(logf(total) - (z[label] - zmax));
    for (int j = 0; j < classes; ++j) dlogits[r * classes + j] = probs[r * classes + j] * scale;
    dlogits[r * classes + label] -= scale;
  }
}

class CudaSoftmaxCrossEntropy final : public CudaLossOp {
 public:
  CudaSoftmaxCrossEntropy(const ops::OpSpec&, const ops::OpShape& shape) : classes_(shape.in.c) {}
  void loss(const CudaContext& ctx, const float* logits, const std::int32_t* labels, std::int64_t rows, float scale,
            float* probs, double* row_loss, float* dlogits) override {
    softmax_cross_entropy_kernel<<<blocks_for(rows), kThreadsPerBlock, 0, ctx.stream>>>(
        logits, labels, rows, classes_, scale, probs, row_loss, dlogits);
    SPMD_CHECK_CUDA_LAUNCH("CNN softmax cross-entropy kernel");
  }

 private:
  int classes_;
};

}  // namespace

SPMD_REGISTER_CUDA_LOSS("softmax_cross_entropy", CudaSoftmaxCrossEntropy);

}  // namespace spmd::backends::cuda
