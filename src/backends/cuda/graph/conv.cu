// Conv on the GPU: per chunk of images, im2col ([C * kH * kW, oH * oW] per image, groups one
// after another) and one strided-batched cuBLAS SGEMM per group, then the bias and (for a Conv
// the loader fused with its Relu: attrs.ints["spmd_relu"] == 1) ReLU. A 1x1 convolution with
// stride 1 and no padding reads its input as the columns. BatchNormalization beside it.
#include <algorithm>

#include "graph_op.hpp"
#include "spmd/backends/cuda/gemm.hpp"
#include "window.hpp"

namespace spmd::backends::cuda {
namespace {

// images [n, C, H, W] -> col [n, C * kH * kW, oH * oW], 0 outside the image.
__global__ void im2col_kernel(const float* in, std::int64_t n, Window g, float* col) {
  const std::int64_t pixels = g.oh * g.ow, total = n * g.c * g.kh * g.kw * pixels;
  for (std::int64_t i = first_index(); i < total; i += index_stride()) {
    const std::int64_t p = i % pixels;
    std::int64_t t = i / pixels;
    const std::int64_t kx = t % g.kw;
    t /= g.kw;
    const std::int64_t ky = t % g.kh;
    t /= g.kh;  // t = image * C + channel
    const std::int64_t iy = (p / g.ow) * g.sh - g.top + ky * g.dh, ix = (p % g.ow) * g.sw - g.left + kx * g.dw;
    col[i] = iy >= 0 && iy < g.h && ix >= 0 && ix < g.w ? in[(t * g.h + iy) * g.w + ix] : 0.0f;
  }
}

// y [n, M, pixels] += bias[m], then ReLU when relu.
__global__ void bias_relu_kernel(float* y, std::int64_t total, std::int64_t channels, std::int64_t pixels, const float* bias,
                                 bool relu) {
  for (std::int64_t i = first_index(); i < total; i += index_stride()) {
    float v = y[i];
    if (bias) v += bias[(i / pixels) % channels];
    y[i] = relu ? (v > 0.0f ? v : 0.0f) : v;
  }
}

// Scratch floats an im2col chunk may take: chunks of images up to this size.
constexpr std::int64_t kColFloats = std::int64_t{1} << 26;

void conv(const CudaGraphCall& call) {
  const DeviceTensor& x = call.input(0);
  const DeviceTensor& wt = call.input(1);
  DeviceTensor& y = *call.out[0];
  const std::int64_t kh = x.shape.size() == 3 ? 1 : wt.shape.at(2), kw = wt.shape.back();
  const Window g = window_of(call, x, y, kh, kw);
  if (y.size() == 0) return;  // no output (an empty batch or image): no GEMM to run
  const std::int64_t group = call.node.attrs.i("group", 1), m = wt.shape[0];
  if (group < 1 || g.c % group != 0 || m % group != 0) call.fail("group " + std::to_string(group) + " does not divide the channels");
  const std::int64_t cg = g.c / group, mg = m / group, k = cg * kh * kw, pixels = g.oh * g.ow;
  const bool direct = kh == 1 && kw == 1 && g.sh == 1 && g.sw == 1 && g.top == 0 && g.left == 0 && g.oh == g.h && g.ow == g.w;
  const std::int64_t per_image = g.c * kh * kw * pixels;
  const std::int64_t chunk = direct ? g.n : std::clamp<std::int64_t>(kColFloats / std::max<std::int64_t>(per_image, 1), 1, g.n);
  float* col = direct ? nullptr : call.scratch.floats(static_cast<std::size_t>(chunk * per_image));
  for (std::int64_t first = 0; first < g.n; first += chunk) {
    const std::int64_t n = std::min(chunk, g.n - first);
    const float* in = x.data + first * g.c * g.h * g.w;
    if (!direct) {
      im2col_kernel<<<blocks_for(n * per_image), kThreadsPerBlock, 0, call.stream>>>(in, n, g, col);
      SPMD_CHECK_CUDA_LAUNCH("ONNX Conv im2col kernel");
    }
    const float* cols = direct ? in : col;
    for (std::int64_t gi = 0; gi < group; ++gi)
      sgemm_row_major_strided_batched(call.cublas, {false, false, mg, pixels, k, k, pixels, pixels}, 1.0f,
                                      wt.data + gi * mg * k, 0, cols + gi * k * pixels, per_image, 0.0f,
                                      y.data + (first * m + gi * mg) * pixels, m * pixels, n, "ONNX Conv GEMM");
  }
  const bool relu = call.node.attrs.i("spmd_relu", 0) != 0;
  const float* bias = call.has_input(2) ? call.input(2).data : nullptr;
  if (bias || relu) {
    bias_relu_kernel<<<blocks_for(y.size()), kThreadsPerBlock, 0, call.stream>>>(y.data, y.size(), m, pixels, bias, relu);
    SPMD_CHECK_CUDA_LAUNCH("ONNX Conv bias kernel");
  }
}

// y = x * a + b per channel, a = scale / sqrt(var + eps), b = bias - mean * a (the CPU op's).
__global__ void batch_norm_kernel(const float* x, std::int64_t total, std::int64_t channels, std::int64_t spatial,
                                  const float* scale, const float* bias, const float* mean, const float* var, float eps,
                                  float* y) {
  for (std::int64_t i = first_index(); i < total; i += index_stride()) {
    const std::int64_t c = (i / spatial) % channels;
    const float a = scale[c] / sqrtf(var[c] + eps), b = bias[c] - mean[c] * a;
    y[i] = x[i] * a + b;
  }
}

void batch_norm(const CudaGraphCall& call) {
  const DeviceTensor& x = call.input(0);
  if (call.node.attrs.i("training_mode", 0) != 0 || call.out.size() > 1) call.fail(ops::kTrainingModeRefusal);
  if (x.shape.size() < 2) call.fail("input " + ops::to_string(x.shape) + " has no channel dimension");
  const std::int64_t channels = x.shape[1], spatial = x.size() / std::max<std::int64_t>(1, x.shape[0] * channels);
  for (std::size_t k = 1; k <= 4; ++k)
    if (call.input(k).size() != channels) call.fail("input " + std::to_string(k) + " does not have one value per channel");
  DeviceTensor& y = *call.out[0];
  batch_norm_kernel<<<blocks_for(x.size()), kThreadsPerBlock, 0, call.stream>>>(
      x.data, x.size(), channels, spatial, call.input(1).data, call.input(2).data, call.input(3).data, call.input(4).data,
      call.node.attrs.f("epsilon", 1e-5f), y.data);
  SPMD_CHECK_CUDA_LAUNCH("ONNX BatchNormalization kernel");
}

}  // namespace

SPMD_REGISTER_CUDA_GRAPH_OP("Conv", conv, window_limits);
SPMD_REGISTER_CUDA_GRAPH_OP("BatchNormalization", batch_norm);

}  // namespace spmd::backends::cuda
