// avg_pool on the GPU: 2x2, stride 2, VALID, summed in the CPU kernel's order; its backward
// folds the input's ReLU as the CPU's fused pass does.
#include "cuda_op.hpp"

namespace spmd::backends::cuda {
namespace {

// Index: the index type (fits_32bit_index of the input's size).
template <class Index>
__global__ void avg_pool2x2_kernel(const float* in, Index n, int h, int w, int c, float* out) {
  const Index ho = h / 2, wo = w / 2, cc = c;
  const Index total = n * ho * wo * cc;
  for (Index i = static_cast<Index>(grid_start()); i < total; i += static_cast<Index>(grid_stride())) {
    const auto [b, py, px, ch] = nhwc_index(i, ho, wo, cc);
    const float* a = in + ((b * h + 2 * py) * w + 2 * px) * cc + ch;
    const float* below = a + static_cast<Index>(w) * cc;
    out[i] = 0.25f * ((a[0] + a[c]) + (below[0] + below[c]));
  }
}

// dpre [n, h, w, c] = dpooled[b, y/2, x/2, ch] / 4, times (act > 0) when relu; 0 in an odd
// last row or column, which the pooling dropped.
template <class Index>
__global__ void avg_pool2x2_backward_kernel(const float* act, const float* dpooled, Index n, int h, int w, int c,
                                            bool relu, float* dpre) {
  const Index hh = h, ww = w, cc = c, ho = h / 2, wo = w / 2;
  const Index total = n * hh * ww * cc;
  for (Index i = static_cast<Index>(grid_start()); i < total; i += static_cast<Index>(grid_stride())) {
    const auto [b, y, x, ch] = nhwc_index(i, hh, ww, cc);
    if (y >= 2 * ho || x >= 2 * wo) {
      dpre[i] = 0.0f;
      continue;
    }
    const float g = dpooled[((b * ho + y / 2) * wo + x / 2) * cc + ch];
    dpre[i] = !relu || act[i] > 0.0f ? 0.25f * g : 0.0f;
  }
}

class CudaAvgPool final : public CudaOp {
 public:
  CudaAvgPool(const ops::OpSpec&, const ops::OpShape& shape, const CudaOpLimits&) : in_(shape.in) {}
  void forward(const CudaContext& ctx, const CudaIo& io) override {
    with_index_type(io.rows * in_.size(), [&](auto index) {
      avg_pool2x2_kernel<<<blocks_for(io.rows * (in_.h / 2) * (in_.w / 2) * in_.c), kThreadsPerBlock, 0, ctx.stream>>>(
          io.in, static_cast<decltype(index)>(io.rows), in_.h, in_.w, in_.c, io.out);
    });
    SPMD_CHECK_CUDA_LAUNCH("CNN pool kernel");
  }
  void backward(const CudaContext& ctx, const CudaIo& io) override {
    if (io.din == nullptr) return;
    with_index_type(io.rows * in_.size(), [&](auto index) {
      avg_pool2x2_backward_kernel<<<blocks_for(io.rows * in_.size()), kThreadsPerBlock, 0, ctx.stream>>>(
          io.in, io.dout, static_cast<decltype(index)>(io.rows), in_.h, in_.w, in_.c, io.mask_input_relu, io.din);
    });
    SPMD_CHECK_CUDA_LAUNCH("CNN pool backward kernel");
  }

 private:
  ops::Shape in_;
};

}  // namespace

SPMD_REGISTER_CUDA_OP("avg_pool", CudaAvgPool);

}  // namespace spmd::backends::cuda
