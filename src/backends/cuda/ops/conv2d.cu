// conv2d on the GPU: im2col + one GEMM over the whole batch (col [rows*h*w, 9*in] times the
// HWIO kernel viewed as [9*in, out], exactly the parameter layout), bias and ReLU after.
// Backward: dW = col^T dout, one GEMM per image (a batched call: K = h * w, not the batch's
// pixels, so that the small [9 * in, out] product is spread over the GPU whatever cuBLAS would
// do with one long K), the images' products then added in order; db = column sums;
// din = col2im(dout W^T) (a gather: no atomics); the forward's col buffer is reused for the
// input gradient's columns.
#include <algorithm>
#include <cstdint>

#include "cuda_op.hpp"
#include "spmd/backends/cuda/device_buffer.hpp"

namespace spmd::backends::cuda {
namespace {

// in [n, h, w, c] (no border) -> col [n*h*w, 9*c], col[(b*h + y)*w + x][(dy*3 + dx)*c + ch] =
// in[b, y+dy-1, x+dx-1, ch], 0 outside the image. A block takes per_step pixels at a time
// (blockDim / patch of them, at least 1), a pixel's 9 * c columns over patch threads (or over
// all, in turn, when the patch is wider than the block): the pixel's coordinates are worked
// out once per pixel and thread, in 32-bit arithmetic where the buffer allows (Index), instead
// of a chain of 64-bit divisions (a long routine each on a GPU) per element. One pixel per
// block left most threads idle (32 for conv1's 9 columns, 256 for conv2's 288; the profile:
// tools/bench/README.md, second run).
constexpr int kMaxIm2colThreads = 1024;  // CUDA's limit per block
template <class Index>
__global__ void im2col3x3_kernel(const float* in, Index pixels, int h, int w, int c, float* col) {
  const int patch = 9 * c;
  const int per_step = max(1, static_cast<int>(blockDim.x) / patch);
  const int sub = static_cast<int>(threadIdx.x) / patch;  // 0 when the patch is wider than the block
  if (sub >= per_step) return;                            // threads past the block's whole patches
  const int k0 = static_cast<int>(threadIdx.x) - sub * patch;
  const Index stride = static_cast<Index>(gridDim.x) * static_cast<Index>(per_step);
  for (Index p = static_cast<Index>(blockIdx.x) * static_cast<Index>(per_step) + static_cast<Index>(sub); p < pixels;
       p += stride) {
    const Index q = p / static_cast<Index>(w);
    const int x = static_cast<int>(p - q * static_cast<Index>(w));
    const Index b = q / static_cast<Index>(h);
    const int y = static_cast<int>(q - b * static_cast<Index>(h));
    const float* image = in + static_cast<std::int64_t>(b) * h * w * c;
    float* out = col + static_cast<std::int64_t>(p) * patch;
    for (int k = k0; k < patch; k += static_cast<int>(blockDim.x)) {
      const int tap = k / c, ch = k - tap * c;
      const int yy = y + tap / 3 - 1, xx = x + tap % 3 - 1;
      out[k] = (yy >= 0 && yy < h && xx >= 0 && xx < w) ? image[(yy * w + xx) * c + ch] : 0.0f;
    }
  }
}

// The adjoint of im2col3x3_kernel as a gather: d_in[b, yy, xx, ch] = sum over taps (dy, dx)
// whose output pixel (yy-dy+1, xx-dx+1) is inside the image of dcol[that pixel][(dy*3 + dx)*c + ch].
// Index: fits_32bit_index of dcol's size.
template <class Index>
__global__ void col2im3x3_kernel(const float* dcol, Index n, int h, int w, int c, float* d_in) {
  const Index cc = c, ww = w, hh = h;
  const Index total = n * hh * ww * cc;
  for (Index i = static_cast<Index>(grid_start()); i < total; i += static_cast<Index>(grid_stride())) {
    const auto [b, row, column, ch] = nhwc_index(i, hh, ww, cc);
    const int yy = static_cast<int>(row), xx = static_cast<int>(column);
    float s = 0.0f;
    for (int dy = 0; dy < 3; ++dy) {
      const int y = yy - dy + 1;
      if (y < 0 || y >= h) continue;
      for (int dx = 0; dx < 3; ++dx) {
        const int x = xx - dx + 1;
        if (x < 0 || x >= w) continue;
        s += dcol[((b * hh + static_cast<Index>(y)) * ww + static_cast<Index>(x)) * 9 * cc + static_cast<Index>((dy * 3 + dx) * c) + ch];
      }
    }
    d_in[i] = s;
  }
}

class CudaConv2d final : public CudaOp {
 public:
  CudaConv2d(const ops::OpSpec& spec, const ops::OpShape& shape, const CudaOpLimits& limits)
      : in_(shape.in), out_c_(shape.out.c), relu_(spec.attr("relu") != 0),
        col_(static_cast<std::size_t>(limits.max_rows * in_.h * in_.w * 9 * in_.c), "CNN conv im2col (and its gradient)"),
        bias_grad_(limits.max_train_rows * in_.h * in_.w, out_c_),
        image_grads_(static_cast<std::size_t>(limits.max_train_rows * patch() * out_c_), "CNN conv per-image weight gradients"),
        weight_grad_(limits.max_train_rows, patch() * out_c_) {}
  bool output_relu() const override { return relu_; }

  void forward(const CudaContext& ctx, const CudaIo& io) override {
    const std::int64_t pix = io.rows * in_.h * in_.w;
    // Whole patches in a block of about kThreadsPerBlock threads, or one patch on up to 1024.
    const int per_step = std::max(1, kThreadsPerBlock / patch());
    const int threads = std::min(kMaxIm2colThreads, (per_step * patch() + 31) / 32 * 32);
    const auto blocks = static_cast<unsigned>(std::clamp<std::int64_t>((pix + per_step - 1) / per_step, 1, kMaxBlocks));
    with_index_type(pix * patch(), [&](auto index) {
      im2col3x3_kernel<<<blocks, threads, 0, ctx.stream>>>(io.in, static_cast<decltype(index)>(pix), in_.h, in_.w, in_.c,
                                                           col_.data());
    });
    SPMD_CHECK_CUDA_LAUNCH("CNN conv im2col kernel");
    sgemm_row_major(ctx.cublas, {false, false, pix, out_c_, patch(), patch(), out_c_, out_c_}, 1.0f, col_.data(),
                    io.params[0], 0.0f, io.out, "CNN conv forward GEMM");
    add_bias(ctx, io.out, pix, out_c_, io.params[1], relu_);
  }

  // Expects the forward pass's col_ of the same rows (same stream).
  void backward(const CudaContext& ctx, const CudaIo& io) override {
    const std::int64_t pix = io.rows * in_.h * in_.w;
    bias_grad_.run(ctx, io.dout, pix, io.grads[1]);
    const std::int64_t hw = in_.h * in_.w, per_image = static_cast<std::int64_t>(patch()) * out_c_;
    sgemm_row_major_strided_batched(ctx.cublas, {true, false, patch(), out_c_, hw, patch(), out_c_, out_c_}, 1.0f,
                                    col_.data(), hw * patch(), io.dout, hw * out_c_, 0.0f, image_grads_.data(),
                                    per_image, io.rows, "CNN conv weight gradient GEMMs (one per image)");
    weight_grad_.run(ctx, image_grads_.data(), io.rows, io.grads[0]);
    if (io.din == nullptr) return;
    sgemm_row_major(ctx.cublas, {false, true, pix, patch(), out_c_, out_c_, out_c_, patch()}, 1.0f, io.dout,
                    io.params[0], 0.0f, col_.data(), "CNN conv input gradient GEMM");
    with_index_type(pix * patch(), [&](auto index) {
      col2im3x3_kernel<<<blocks_for(pix * in_.c), kThreadsPerBlock, 0, ctx.stream>>>(
          col_.data(), static_cast<decltype(index)>(io.rows), in_.h, in_.w, in_.c, io.din);
    });
    SPMD_CHECK_CUDA_LAUNCH("CNN conv col2im kernel");
  }

 private:
  int patch() const { return 9 * in_.c; }
  ops::Shape in_;
  int out_c_;
  bool relu_;
  DeviceBuffer<float> col_;  // [rows * h * w, 9 * in]; the input gradient's columns in backward
  ColumnSums bias_grad_;
  DeviceBuffer<float> image_grads_;  // [rows, 9 * in, out]: each image's weight gradient
  ColumnSums weight_grad_;           // their sum over the images
};

}  // namespace

SPMD_REGISTER_CUDA_OP("conv2d", CudaConv2d);

}  // namespace spmd::backends::cuda
