// conv2d: a 3x3 SAME convolution with stride 1 (the kernel size is an attribute so that a
// model states it; 3 is what the kernels implement), + bias, and ReLU when fused ("relu").
// NHWC input [h, w, in] -> [h, w, features]; kernel HWIO [3, 3, in, features].
//
// CPU fast paths, by shape: a model-input layer with one channel (a grayscale first layer)
// runs the direct kernel (Kernels::conv1_forward), where an im2col GEMM's k would be 9;
// every other layer is im2col + the GEMM, bias and ReLU fused into its store.
#include <algorithm>
#include <cstring>
#include <string>

#include "spmd/models/cnn_aligned.hpp"
#include "spmd/ops/cpu_op.hpp"
#include "spmd/runtime/error.hpp"

namespace spmd::models::cnn_cpu {

void pad_image(const float* image, int h, int w, int c, float* x_padded) {
  const long row = static_cast<long>(w) * c, padded_row = static_cast<long>(w + 2) * c;
  for (int y = 0; y < h; ++y)
    std::memcpy(x_padded + (y + 1) * padded_row + c, image + y * row, static_cast<std::size_t>(row) * sizeof(float));
}

namespace {

// C known at compile time: the copies become a few vector moves instead of memcpy calls.
template <int C>
void im2col3x3_fixed(const float* in_padded, int h, int w, float* col) {
  const long in_row = static_cast<long>(w + 2) * C;
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      float* __restrict dst = col + (static_cast<long>(y) * w + x) * 9 * C;
      for (int dy = 0; dy < 3; ++dy) {
        // The three taps of a row are adjacent in the padded input: 3*C contiguous floats.
        const float* __restrict src = in_padded + (y + dy) * in_row + x * C;
        for (int i = 0; i < 3 * C; ++i) dst[dy * 3 * C + i] = src[i];
      }
    }
  }
}

}  // namespace

void im2col3x3(const float* in_padded, int h, int w, int c, float* col) {
  if (c == 32) return im2col3x3_fixed<32>(in_padded, h, w, col);
  const long in_row = static_cast<long>(w + 2) * c;
  const std::size_t chunk = static_cast<std::size_t>(c) * sizeof(float);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      float* dst = col + (static_cast<long>(y) * w + x) * 9 * c;
      for (int dy = 0; dy < 3; ++dy) std::memcpy(dst + dy * 3 * c, in_padded + (y + dy) * in_row + x * c, 3 * chunk);
    }
  }
}

void col2im3x3_add(const float* col, int h, int w, int c, float* d_in_padded) {
  const long in_row = static_cast<long>(w + 2) * c;
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      const float* src = col + (static_cast<long>(y) * w + x) * 9 * c;
      for (int dy = 0; dy < 3; ++dy) {
        float* __restrict dst = d_in_padded + (y + dy) * in_row + x * c;
        const float* __restrict s = src + dy * 3 * c;
        for (int i = 0; i < 3 * c; ++i) dst[i] += s[i];
      }
    }
  }
}

}  // namespace spmd::models::cnn_cpu

namespace spmd::ops {
namespace {

using models::AlignedFloats;
namespace k = models::cnn_cpu;

OpShape conv2d_shape(const OpSpec& spec, const Shape& in) {
  const int f = spec.attr("features"), size = spec.attr("kernel", 3);
  if (size != 3) throw Error(spec.name + ": kernel size " + std::to_string(size) + "; conv2d implements 3");
  if (f < 1) throw Error(spec.name + ": 'features' must be >= 1, got " + std::to_string(f));
  OpShape s{in, {in.h, in.w, f}, {}, 0};
  s.params.push_back({spec.name + "/kernel", 4, {3, 3, in.c, f}, 9 * in.c});
  s.params.push_back({spec.name + "/bias", 1, {f, 0, 0, 0}, 0});
  s.multiply_adds = in.size() * 9 * f;
  return s;
}

class CpuConv2d final : public CpuOp {
 public:
  CpuConv2d(const OpSpec& spec, const OpShape& shape, const CpuOpContext& ctx)
      : k_(*ctx.kernels), h_(shape.in.h), w_(shape.in.w), cin_(shape.in.c), cout_(shape.out.c),
        relu_(spec.attr("relu") != 0), model_input_(ctx.model_input) {
    direct_ = relu_ && model_input_ && cin_ == 1 && cout_ % k_.direct_conv_channels == 0;
    const auto n = static_cast<std::size_t>(pixels()) * static_cast<std::size_t>(patch());
    if (!direct_) col_ = AlignedFloats(n);
    if (ctx.max_train_rows > 0 && !model_input_) {
      kernel_t_ = AlignedFloats(static_cast<std::size_t>(cout_) * static_cast<std::size_t>(patch()));
      dcol_ = AlignedFloats(n);
    }
  }
  bool per_image() const override { return true; }
  int input_border() const override { return 1; }
  bool output_relu() const override { return relu_; }
  std::size_t scratch_bytes() const override {
    return (col_.size() + kernel_t_.size() + dcol_.size()) * sizeof(float);
  }

  void prepare_backward(const CpuStep& step) override {
    if (!model_input_) k::transpose(step.params[0], patch(), cout_, cout_, kernel_t_.data(), patch());
  }

  void forward(const CpuStep& step, const CpuIo& io) override {
    require_dense_out(io.out.stride);
    const float* in_pad = frame(io.in.data, io.in.stride);
    if (direct_) return k_.conv1_forward(in_pad, h_, w_, step.params[0], step.params[1], cout_, io.out.data);
    k::im2col3x3(in_pad, h_, w_, cin_, col_.data());
    k_.gemm(false, static_cast<int>(pixels()), cout_, patch(), col_.data(), patch(), step.params[0], cout_,
            io.out.data, cout_, false, {step.params[1], relu_});
  }

  // io.dout: the gradient w.r.t. the pre-activation output ([h, w, out], dense rows).
  void backward(const CpuStep& step, const CpuIo& io) override {
    require_dense_out(io.dout.stride);
    const float* in_pad = frame(io.in.data, io.in.stride);
    float* dw = step.grads[0];
    float* db = step.grads[1];
    if (!step.accumulate) std::fill(db, db + cout_, 0.0f);
    if (direct_) {
      if (!step.accumulate) std::fill(dw, dw + 9 * cout_, 0.0f);
      k_.conv1_weight_grad(in_pad, h_, w_, io.dout.data, cout_, dw, db);
    } else {
      k::add_row_sums(io.dout.data, static_cast<int>(pixels()), cout_, db);
      k::im2col3x3(in_pad, h_, w_, cin_, col_.data());
      k_.gemm(true, patch(), cout_, static_cast<int>(pixels()), col_.data(), patch(), io.dout.data, cout_, dw, cout_,
              step.accumulate, {});
    }
    if (io.din.data == nullptr) return;
    k_.gemm(false, static_cast<int>(pixels()), patch(), cout_, io.dout.data, cout_, kernel_t_.data(), patch(),
            dcol_.data(), patch(), false, {});
    float* d_in = frame(io.din.data, io.din.stride);
    std::fill(d_in, d_in + static_cast<long>(h_ + 2) * io.din.stride, 0.0f);
    k::col2im3x3_add(dcol_.data(), h_, w_, cin_, d_in);
  }

 private:
  long pixels() const { return static_cast<long>(h_) * w_; }
  int patch() const { return 9 * cin_; }
  // The zero-bordered frame around an interior view (input_border() == 1).
  template <class T>
  T* frame(T* interior, long stride) const {
    if (stride != static_cast<long>(w_ + 2) * cin_) throw Error("conv2d: the input is not in a 1-pixel bordered frame");
    return interior - stride - cin_;
  }
  void require_dense_out(long stride) const {
    if (stride != static_cast<long>(w_) * cout_) throw Error("conv2d: the output must be unstrided");
  }

  const k::Kernels& k_;
  int h_, w_, cin_, cout_;
  bool relu_, model_input_, direct_ = false;
  AlignedFloats col_;       // [pixels, 9*in] im2col of one image
  AlignedFloats kernel_t_;  // [out, 9*in] the transposed kernel (backward)
  AlignedFloats dcol_;      // [pixels, 9*in] the input gradient before col2im (backward)
};

}  // namespace

SPMD_REGISTER_CPU_OP("conv2d", conv2d_shape, CpuConv2d);

}  // namespace spmd::ops
