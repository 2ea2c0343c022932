// avg_pool on the GPU: 2x2, stride 2, VALID, summed in the CPU kernel's order; its backward
// folds the input's ReLU as the CPU's fused pass does.
#include "cuda_op.hpp"

namespace spmd::backends::cuda {
namespace {

__global__ void avg_pool2x2_kernel(const float* in, std::int64_t n, int h, int w, int c, float* out) {
  const int ho = h / 2, wo = w / 2;
  const std::int64_t total = n * ho * wo * c;
  for (std::int64_t i = grid_start(); i < total; i += grid_stride()) {
    const int ch = static_cast<int>(i % c);
    const std::int64_t pixel = i / c;
    const int px = static_cast<int>(pixel % wo);
    const std::int64_t q = pixel / wo;
    const int py = static_cast<int>(q % ho);
    const std::int64_t b = q / ho;
    const float* a = in + ((b * h + 2 * py) * w + 2 * px) * c + ch;
    const float* below = a + static_cast<std::int64_t>(w) * c;
    out[i] = 0.25f * ((a[0] + a[c]) + (below[0] + below[c]));
  }
}

// dpre [n, h, w, c] = dpooled[b, y/2, x/2, ch] / 4, times (act > 0) when relu; 0 in an odd
// last row or column, which the pooling dropped.
__global__ void avg_pool2x2_backward_kernel(const float* act, const float* dpooled, std::int64_t n, int h, int w,
                                            int c, bool relu, float* dpre) {
  const std::int64_t total = n * h * w * c;
  const int ho = h / 2, wo = w / 2;
  for (std::int64_t i = grid_start(); i < total; i += grid_stride()) {
    const int ch = static_cast<int>(i % c);
    const std::int64_t pixel = i / c;
    const int x = static_cast<int>(pixel % w);
    const std::int64_t q = pixel / w;
    const int y = static_cast<int>(q % h);
    const std::int64_t b = q / h;
    if (y >= 2 * ho || x >= 2 * wo) {
      dpre[i] = 0.0f;
      continue;
    }
    const float g = dpooled[((b * ho + y / 2) * wo + x / 2) * c + ch];
    dpre[i] = !relu || act[i] > 0.0f ? 0.25f * g : 0.0f;
  }
}

class CudaAvgPool final : public CudaOp {
 public:
  CudaAvgPool(const ops::OpSpec&, const ops::OpShape& shape, const CudaOpLimits&) : in_(shape.in) {}
  void forward(const CudaContext& ctx, const CudaIo& io) override {
    avg_pool2x2_kernel<<<blocks_for(io.rows * (in_.h / 2) * (in_.w / 2) * in_.c), kThreadsPerBlock, 0, ctx.stream>>>(
        io.in, io.rows, in_.h, in_.w, in_.c, io.out);
    SPMD_CHECK_CUDA_LAUNCH("CNN pool kernel");
  }
  void backward(const CudaContext& ctx, const CudaIo& io) override {
    if (io.din == nullptr) return;
    avg_pool2x2_backward_kernel<<<blocks_for(io.rows * in_.size()), kThreadsPerBlock, 0, ctx.stream>>>(
        io.in, io.dout, io.rows, in_.h, in_.w, in_.c, io.mask_input_relu, io.din);
    SPMD_CHECK_CUDA_LAUNCH("CNN pool backward kernel");
  }

 private:
  ops::Shape in_;
};

}  // namespace

SPMD_REGISTER_CUDA_OP("avg_pool", CudaAvgPool);

}  // namespace spmd::backends::cuda
