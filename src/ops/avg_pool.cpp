// avg_pool: 2x2 average pooling with stride 2, VALID (Flax's avg_pool default: an odd last
// row or column is dropped): [h, w, c] -> [h/2, w/2, c]. Writes its output with any row
// stride (into a convolution's bordered frame) and folds the ReLU backward of its input
// into its own backward (the fused pool/ReLU pass).
#include <algorithm>
#include <string>

#include "spmd/ops/cpu_op.hpp"
#include "spmd/runtime/error.hpp"

namespace spmd::models::cnn_cpu {

void avg_pool2x2(const float* in, int h, int w, int c, float* out, long out_row_stride) {
  const long in_row = static_cast<long>(w) * c;
  for (int py = 0; py < h / 2; ++py) {
    for (int px = 0; px < w / 2; ++px) {
      const float* __restrict a = in + (2 * py) * in_row + (2 * px) * c;
      const float* __restrict b = a + in_row;
      float* __restrict o = out + py * out_row_stride + px * c;
      for (int ch = 0; ch < c; ++ch) o[ch] = 0.25f * ((a[ch] + a[c + ch]) + (b[ch] + b[c + ch]));
    }
  }
}

namespace {

// relu: dpre = (activation > 0) * dpooled / 4; else dpre = dpooled / 4.
template <bool Relu>
void pool_backward(const float* activation, const float* dpooled, long dpooled_row_stride, int h, int w, int c,
                   float* dpre) {
  const long row = static_cast<long>(w) * c;
  // Rows and columns past 2 * (h/2), 2 * (w/2) (odd sizes) fed no pooled output.
  const int h_used = h / 2 * 2, w_used = w / 2 * 2;
  for (int y = 0; y < h; ++y) {
    if (y >= h_used) {
      std::fill(dpre + y * row, dpre + (y + 1) * row, 0.0f);
      continue;
    }
    if (w_used < w) std::fill(dpre + y * row + static_cast<long>(w_used) * c, dpre + (y + 1) * row, 0.0f);
    for (int x = 0; x < w_used; ++x) {
      // Multiplying by the 0/1 mask instead of branching lets GCC vectorise the loop (it does
      // not if-convert a float comparison under -ftrapping-math). g is finite, so the result
      // is the same.
      const float* __restrict g = dpooled + (y / 2) * dpooled_row_stride + (x / 2) * c;
      const float* __restrict act = activation + y * row + x * c;
      float* __restrict d = dpre + y * row + x * c;
      if constexpr (Relu)
        for (int ch = 0; ch < c; ++ch) d[ch] = static_cast<float>(act[ch] > 0.0f) * (0.25f * g[ch]);
      else
        for (int ch = 0; ch < c; ++ch) d[ch] = 0.25f * g[ch];
    }
  }
}

}  // namespace

void avg_pool2x2_relu_backward(const float* activation, const float* dpooled, long dpooled_row_stride, int h,
                               int w, int c, float* dpre) {
  pool_backward<true>(activation, dpooled, dpooled_row_stride, h, w, c, dpre);
}

}  // namespace spmd::models::cnn_cpu

namespace spmd::ops {
namespace {

namespace k = models::cnn_cpu;

OpShape avg_pool_shape(const OpSpec& spec, const Shape& in) {
  const int size = spec.attr("size", 2);
  if (size != 2) throw Error(spec.name + ": pool size " + std::to_string(size) + "; avg_pool implements 2");
  if (in.h < 2 || in.w < 2)
    throw Error("avg_pool: input " + std::to_string(in.h) + "x" + std::to_string(in.w) + " is smaller than the 2x2 window");
  return {in, {in.h / 2, in.w / 2, in.c}, {}, 0};
}

class CpuAvgPool final : public CpuOp {
 public:
  CpuAvgPool(const OpSpec&, const OpShape& shape, const CpuOpContext&) : in_(shape.in) {}
  bool per_image() const override { return true; }
  bool strided_output() const override { return true; }
  bool absorbs_input_relu() const override { return true; }

  void forward(const CpuStep&, const CpuIo& io) override {
    require_dense(io.in.stride);
    k::avg_pool2x2(io.in.data, in_.h, in_.w, in_.c, io.out.data, io.out.stride);
  }

  void backward(const CpuStep& step, const CpuIo& io) override {
    if (io.din.data == nullptr) return;
    require_dense(io.din.stride);
    if (step.mask_input_relu)
      k::pool_backward<true>(io.in.data, io.dout.data, io.dout.stride, in_.h, in_.w, in_.c, io.din.data);
    else
      k::pool_backward<false>(io.in.data, io.dout.data, io.dout.stride, in_.h, in_.w, in_.c, io.din.data);
  }

 private:
  void require_dense(long stride) const {
    if (stride != static_cast<long>(in_.w) * in_.c) throw Error("avg_pool: the input must be unstrided");
  }
  Shape in_;
};

}  // namespace

SPMD_REGISTER_CPU_OP("avg_pool", avg_pool_shape, CpuAvgPool);

}  // namespace spmd::ops
