// dense: y = x W + b over [rows, in] (an image input is flattened in NHWC order, which moves
// no data), W [in, features], and ReLU when fused ("relu"). A batch op.
//
// CPU paths: a layer with fused ReLU (a hidden layer) is three GEMMs (forward; input
// gradient as dx^T = W dh^T over batch columns padded to 16; weight gradient, with the
// SGD-momentum update fused into its store when the step asks); the classifier, a few
// columns wide where the GEMM's vector tiles would be mostly empty, is a narrow loop.
#include <algorithm>
#include <string>

#include "spmd/models/cnn_aligned.hpp"
#include "spmd/ops/cpu_op.hpp"
#include "spmd/runtime/error.hpp"

namespace spmd::models::cnn_cpu {

void dense_forward(const float* in, int rows, int n_in, const float* kernel, const float* bias, int n_out,
                   float* out) {
  for (int r = 0; r < rows; ++r) {
    float* o = out + static_cast<long>(r) * n_out;
    for (int j = 0; j < n_out; ++j) o[j] = bias[j];
    const float* x = in + static_cast<long>(r) * n_in;
    for (int k = 0; k < n_in; ++k) {
      const float xk = x[k];
      const float* wk = kernel + static_cast<long>(k) * n_out;
      for (int j = 0; j < n_out; ++j) o[j] += xk * wk[j];
    }
  }
}

void dense_backward(const float* in, int rows, int n_in, const float* kernel, int n_out, const float* dout,
                    float* dkernel, float* dbias, float* din, bool relu_input_mask) {
  add_row_sums(dout, rows, n_out, dbias);
  for (int r = 0; r < rows; ++r) {
    const float* x = in + static_cast<long>(r) * n_in;
    const float* g = dout + static_cast<long>(r) * n_out;
    for (int k = 0; k < n_in; ++k) {
      float* dk = dkernel + static_cast<long>(k) * n_out;
      const float xk = x[k];
      for (int j = 0; j < n_out; ++j) dk[j] += xk * g[j];
    }
    if (din == nullptr) continue;
    float* dx = din + static_cast<long>(r) * n_in;
    for (int k = 0; k < n_in; ++k) {
      const float* wk = kernel + static_cast<long>(k) * n_out;
      float s = 0.0f;
      for (int j = 0; j < n_out; ++j) s += g[j] * wk[j];
      dx[k] = relu_input_mask && !(x[k] > 0.0f) ? 0.0f : s;
    }
  }
}

void add_row_sums(const float* x, int rows, int n, float* acc) {
  for (int r = 0; r < rows; ++r) {
    const float* row = x + static_cast<long>(r) * n;
    for (int j = 0; j < n; ++j) acc[j] += row[j];
  }
}

void transpose(const float* src, int rows, int cols, long src_stride, float* dst, long dst_stride) {
  constexpr int kBlock = 16;  // a 16x16 tile of both sides stays in L1
  for (int r0 = 0; r0 < rows; r0 += kBlock)
    for (int c0 = 0; c0 < cols; c0 += kBlock)
      for (int r = r0; r < std::min(rows, r0 + kBlock); ++r)
        for (int c = c0; c < std::min(cols, c0 + kBlock); ++c) dst[c * dst_stride + r] = src[r * src_stride + c];
}

}  // namespace spmd::models::cnn_cpu

namespace spmd::ops {
namespace {

using models::AlignedFloats;
namespace k = models::cnn_cpu;

int round_up16(int n) { return (n + 15) / 16 * 16; }

OpShape dense_shape(const OpSpec& spec, const Shape& in) {
  const int f = spec.attr("features");
  if (f < 1) throw Error(spec.name + ": 'features' must be >= 1, got " + std::to_string(f));
  const auto n_in = in.size();
  if (n_in > (std::int64_t{1} << 30)) throw Error(spec.name + ": " + std::to_string(n_in) + " input features");
  OpShape s{in, {1, 1, f}, {}, n_in * f};
  s.params.push_back({spec.name + "/kernel", 2, {static_cast<int>(n_in), f, 0, 0}, static_cast<int>(n_in)});
  s.params.push_back({spec.name + "/bias", 1, {f, 0, 0, 0}, 0});
  return s;
}

class CpuDense final : public CpuOp {
 public:
  CpuDense(const OpSpec& spec, const OpShape& shape, const CpuOpContext& ctx)
      : k_(*ctx.kernels), in_(static_cast<int>(shape.in.size())), out_(shape.out.c), relu_(spec.attr("relu") != 0) {
    if (relu_ && ctx.max_train_rows > 0) {
      const auto pad = static_cast<std::size_t>(round_up16(ctx.max_train_rows));
      dout_t_ = AlignedFloats(static_cast<std::size_t>(out_) * pad);
      din_t_ = AlignedFloats(static_cast<std::size_t>(in_) * pad);
    }
  }
  bool per_image() const override { return false; }
  bool output_relu() const override { return relu_; }
  bool absorbs_input_relu() const override { return true; }
  std::vector<int> fused_sgd_params() const override { return relu_ ? std::vector<int>{0} : std::vector<int>{}; }
  std::size_t scratch_bytes() const override { return (dout_t_.size() + din_t_.size()) * sizeof(float); }

  void forward(const CpuStep& step, const CpuIo& io) override {
    if (relu_)
      k_.gemm(false, io.rows, out_, in_, io.in.data, in_, step.params[0], out_, io.out.data, out_, false,
              {step.params[1], true});
    else
      k::dense_forward(io.in.data, io.rows, in_, step.params[0], step.params[1], out_, io.out.data);
  }

  // io.dout: the gradient w.r.t. the pre-activation output.
  void backward(const CpuStep& step, const CpuIo& io) override {
    float* dw = step.grads[0];
    float* db = step.grads[1];
    std::fill(db, db + out_, 0.0f);
    if (!relu_) {
      std::fill(dw, dw + static_cast<long>(in_) * out_, 0.0f);
      return k::dense_backward(io.in.data, io.rows, in_, step.params[0], out_, io.dout.data, dw, db, io.din.data,
                               step.mask_input_relu);
    }
    const int rows = io.rows, bpad = round_up16(rows);
    const float* x = io.in.data;
    const float* dh = io.dout.data;
    k::add_row_sums(dh, rows, out_, db);
    if (float* dx = io.din.data) {
      std::fill(dout_t_.data(), dout_t_.data() + static_cast<long>(out_) * bpad, 0.0f);
      k::transpose(dh, rows, out_, out_, dout_t_.data(), bpad);
      k_.gemm(false, in_, bpad, out_, step.params[0], out_, dout_t_.data(), bpad, din_t_.data(), bpad, false, {});
      k::transpose(din_t_.data(), in_, rows, bpad, dx, in_);
      if (step.mask_input_relu)
        for (long i = 0; i < static_cast<long>(rows) * in_; ++i) dx[i] = x[i] > 0.0f ? dx[i] : 0.0f;
    }
    // The weight gradient last: with a fused update it overwrites the weights the input
    // gradient above has just read.
    k::GemmEpilogue epilogue;
    if (step.sgd_params != nullptr) {
      epilogue.sgd_params = step.sgd_params[0];
      epilogue.sgd_trace = step.sgd_trace[0];
      epilogue.sgd = step.sgd;
    }
    k_.gemm(true, in_, out_, rows, x, in_, dh, out_, dw, out_, false, epilogue);
  }

 private:
  const k::Kernels& k_;
  int in_, out_;
  bool relu_;
  AlignedFloats dout_t_;  // [out, train rows padded to 16] zero-padded columns
  AlignedFloats din_t_;   // [in, train rows padded to 16]
};

}  // namespace

SPMD_REGISTER_CPU_OP("dense", dense_shape, CpuDense);

}  // namespace spmd::ops
