// dense on the GPU: y = x W (GEMM) + b, ReLU when fused. Backward: dW = x^T dout,
// db = column sums, din = dout W^T, masked by the input's ReLU when asked.
#include "cuda_op.hpp"

namespace spmd::backends::cuda {
namespace {

class CudaDense final : public CudaOp {
 public:
  CudaDense(const ops::OpSpec& spec, const ops::OpShape& shape, const CudaOpLimits& limits)
      : in_(shape.in.size()), out_(shape.out.c), relu_(spec.attr("relu") != 0), bias_grad_(limits.max_train_rows, out_) {}
  bool output_relu() const override { return relu_; }

  void forward(const CudaContext& ctx, const CudaIo& io) override {
    sgemm_row_major(ctx.cublas, {false, false, io.rows, out_, in_, in_, out_, out_}, 1.0f, io.in, io.params[0], 0.0f,
                    io.out, "CNN dense forward GEMM");
    add_bias(ctx, io.out, io.rows, out_, io.params[1], relu_);
  }

  void backward(const CudaContext& ctx, const CudaIo& io) override {
    sgemm_row_major(ctx.cublas, {true, false, in_, out_, io.rows, in_, out_, out_}, 1.0f, io.in, io.dout, 0.0f,
                    io.grads[0], "CNN dense weight gradient GEMM");
    bias_grad_.run(ctx, io.dout, io.rows, io.grads[1]);
    if (io.din == nullptr) return;
    sgemm_row_major(ctx.cublas, {false, true, io.rows, in_, out_, out_, out_, in_}, 1.0f, io.dout, io.params[0], 0.0f,
                    io.din, "CNN dense input gradient GEMM");
    if (io.mask_input_relu) relu_mask(ctx, io.din, io.in, io.rows * in_);
  }

 private:
  std::int64_t in_;
  int out_;
  bool relu_;
  ColumnSums bias_grad_;
};

}  // namespace

SPMD_REGISTER_CUDA_OP("dense", CudaDense);

}  // namespace spmd::backends::cuda
