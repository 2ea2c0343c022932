// relu: max(x, 0), elementwise, any shape. Models fuse it into the op before it where that
// op can apply it in its store (cnn_graph.cpp), so this runs only where nothing can.
#include "spmd/ops/cpu_op.hpp"

namespace spmd::ops {
namespace {

OpShape relu_shape(const OpSpec&, const Shape& in) { return {in, in, {}, 0}; }

class CpuRelu final : public CpuOp {
 public:
  CpuRelu(const OpSpec&, const OpShape& shape, const CpuOpContext&)
      : image_(shape.in.h > 1 || shape.in.w > 1), shape_(shape.in) {}
  bool per_image() const override { return image_; }
  bool strided_output() const override { return true; }
  bool absorbs_input_relu() const override { return true; }

  void forward(const CpuStep&, const CpuIo& io) override {
    each(io, [](const float* in, float* out, float*, const float*, long n) {
      for (long i = 0; i < n; ++i) out[i] = in[i] > 0.0f ? in[i] : 0.0f;
    });
  }
  // din = (out > 0) * dout, masked again by the input's ReLU when asked.
  void backward(const CpuStep& step, const CpuIo& io) override {
    if (io.din.data == nullptr) return;
    const bool twice = step.mask_input_relu;
    each(io, [twice](const float* in, const float* out, float* din, const float* dout, long n) {
      for (long i = 0; i < n; ++i) din[i] = out[i] > 0.0f && (!twice || in[i] > 0.0f) ? dout[i] : 0.0f;
    });
  }

 private:
  // fn(in row, out row, din row, dout row, floats) over the rows of the views.
  template <class Fn>
  void each(const CpuIo& io, Fn fn) const {
    const int rows = image_ ? shape_.h : io.rows;
    const long n = image_ ? static_cast<long>(shape_.w) * shape_.c : shape_.size();
    for (int r = 0; r < rows; ++r)
      fn(io.in.data + r * io.in.stride, io.out.data + r * io.out.stride,
         io.din.data != nullptr ? io.din.data + r * io.din.stride : nullptr,
         io.dout.data != nullptr ? io.dout.data + r * io.dout.stride : nullptr, n);
  }
  bool image_;
  Shape shape_;
};

}  // namespace

SPMD_REGISTER_CPU_OP("relu", relu_shape, CpuRelu);

}  // namespace spmd::ops
