// relu on the GPU, where no op before it fuses it: out = max(in, 0); din = (out > 0) * dout,
// masked again by the input's ReLU when asked.
#include "cuda_op.hpp"

namespace spmd::backends::cuda {
namespace {

__global__ void relu_kernel(const float* in, float* out, std::int64_t n) {
  for (std::int64_t i = grid_start(); i < n; i += grid_stride()) out[i] = in[i] > 0.0f ? in[i] : 0.0f;
}

__global__ void relu_backward_kernel(const float* in, const float* out, const float* dout, bool twice, float* din,
                                     std::int64_t n) {
  for (std::int64_t i = grid_start(); i < n; i += grid_stride())
    din[i] = out[i] > 0.0f && (!twice || in[i] > 0.0f) ? dout[i] : 0.0f;
}

class CudaRelu final : public CudaOp {
 public:
  CudaRelu(const ops::OpSpec&, const ops::OpShape& shape, const CudaOpLimits&) : size_(shape.in.size()) {}
  void forward(const CudaContext& ctx, const CudaIo& io) override {
    relu_kernel<<<blocks_for(io.rows * size_), kThreadsPerBlock, 0, ctx.stream>>>(io.in, io.out, io.rows * size_);
    SPMD_CHECK_CUDA_LAUNCH("ReLU kernel");
  }
  void backward(const CudaContext& ctx, const CudaIo& io) override {
    if (io.din == nullptr) return;
    relu_backward_kernel<<<blocks_for(io.rows * size_), kThreadsPerBlock, 0, ctx.stream>>>(
        io.in, io.out, io.dout, io.mask_input_relu, io.din, io.rows * size_);
    SPMD_CHECK_CUDA_LAUNCH("ReLU backward kernel");
  }

 private:
  std::int64_t size_;
};

}  // namespace

SPMD_REGISTER_CUDA_OP("relu", CudaRelu);

}  // namespace spmd::backends::cuda
