// Pooling on the GPU: MaxPool, AveragePool (count_include_pad; ceil_mode through the planned
// output shape), GlobalAveragePool and GlobalMaxPool over NCHW, one thread per output value
// reading its window in the CPU op's order.
#include "graph_op.hpp"
#include "window.hpp"

namespace spmd::backends::cuda {
namespace {

template <bool kMax>
__global__ void pool_kernel(const float* x, Window g, bool include_pad, float* y) {
  const std::int64_t total = g.n * g.c * g.oh * g.ow;
  for (std::int64_t i = first_index(); i < total; i += index_stride()) {
    const std::int64_t ox = i % g.ow, oy = (i / g.ow) % g.oh, plane = i / (g.ow * g.oh);
    const float* in = x + plane * g.h * g.w;
    float acc = kMax ? -INFINITY : 0.0f;
    std::int64_t count = 0, padded = 0;
    for (std::int64_t ky = 0; ky < g.kh; ++ky)
      for (std::int64_t kx = 0; kx < g.kw; ++kx) {
        const std::int64_t iy = oy * g.sh - g.top + ky * g.dh, ix = ox * g.sw - g.left + kx * g.dw;
        if (iy >= -g.top && iy < g.h + g.bottom && ix >= -g.left && ix < g.w + g.right) ++padded;
        if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
        const float v = in[iy * g.w + ix];
        acc = kMax ? fmaxf(acc, v) : acc + v;
        ++count;
      }
    y[i] = kMax ? acc : acc / static_cast<float>(include_pad ? padded : count);
  }
}

std::string pool_limits(const ops::GraphNode& node, const std::vector<std::vector<std::int64_t>>& in_shapes) {
  if (node.outputs.size() > 1) return "the Indices output (argmax positions) is not supported";
  const auto kernel = node.attrs.ints_or("kernel_shape", {});
  if (kernel.empty() || kernel.size() > 2) return "kernel_shape must have 1 or 2 values";
  return window_limits(node, in_shapes);
}

template <bool kMax>
void pool(const CudaGraphCall& call) {
  if (const std::string why = pool_limits(call.node, {call.input(0).shape}); !why.empty()) call.fail(why);
  const auto kernel = call.node.attrs.ints_or("kernel_shape", {});
  const Window g = window_of(call, call.input(0), *call.out[0], kernel.size() == 2 ? kernel[0] : 1, kernel.back());
  pool_kernel<kMax><<<blocks_for(call.out[0]->size()), kThreadsPerBlock, 0, call.stream>>>(
      call.input(0).data, g, call.node.attrs.i("count_include_pad", 0) != 0, call.out[0]->data);
  SPMD_CHECK_CUDA_LAUNCH("ONNX pooling kernel");
}

template <bool kMax>
__global__ void global_pool_kernel(const float* x, std::int64_t planes, std::int64_t spatial, float* y) {
  for (std::int64_t plane = first_index(); plane < planes; plane += index_stride()) {
    const float* in = x + plane * spatial;
    float acc = kMax ? -INFINITY : 0.0f;
    for (std::int64_t p = 0; p < spatial; ++p) acc = kMax ? fmaxf(acc, in[p]) : acc + in[p];
    y[plane] = kMax ? acc : acc / static_cast<float>(spatial);
  }
}

template <bool kMax>
void global_pool(const CudaGraphCall& call) {
  const DeviceTensor& x = call.input(0);
  if (x.shape.size() < 3) call.fail("input " + ops::to_string(x.shape) + " has no spatial dimension");
  const std::int64_t planes = x.shape[0] * x.shape[1];
  global_pool_kernel<kMax><<<blocks_for(planes), kThreadsPerBlock, 0, call.stream>>>(x.data, planes, x.size() / planes,
                                                                                      call.out[0]->data);
  SPMD_CHECK_CUDA_LAUNCH("ONNX global pooling kernel");
}

}  // namespace

SPMD_REGISTER_CUDA_GRAPH_OP("MaxPool", pool<true>, pool_limits);
SPMD_REGISTER_CUDA_GRAPH_OP("AveragePool", pool<false>, pool_limits);
SPMD_REGISTER_CUDA_GRAPH_OP("GlobalMaxPool", global_pool<true>);
SPMD_REGISTER_CUDA_GRAPH_OP("GlobalAveragePool", global_pool<false>);

}  // namespace spmd::backends::cuda
