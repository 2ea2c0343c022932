// Reductions on the GPU: Softmax / LogSoftmax (each opset's axis rule) and ReduceMean / Sum /
// Max / Min over chosen axes. One thread per output group, combining its elements in the
// CPU op's order (increasing input index).
#include <vector>

#include "graph_op.hpp"

namespace spmd::backends::cuda {
namespace {

// Softmax over groups of `length` elements `inner` apart: [outer, length, inner] layout.
template <bool kLog>
__global__ void softmax_kernel(const float* x, std::int64_t outer, std::int64_t length, std::int64_t inner, float* y) {
  for (std::int64_t g = first_index(); g < outer * inner; g += index_stride()) {
    const std::int64_t o = g / inner, i = g % inner;
    const float* in = x + o * length * inner + i;
    float* out = y + o * length * inner + i;
    float top = -INFINITY;
    for (std::int64_t k = 0; k < length; ++k) top = fmaxf(top, in[k * inner]);
    float sum = 0.0f;
    for (std::int64_t k = 0; k < length; ++k) sum += expf(in[k * inner] - top);
    const float log_sum = logf(sum);
    for (std::int64_t k = 0; k < length; ++k) out[k * inner] = kLog ? in[k * inner] - top - log_sum : expf(in[k * inner] - top) / sum;
  }
}

template <bool kLog>
void softmax(const CudaGraphCall& call) {
  const DeviceTensor& x = call.input(0);
  const auto r = static_cast<std::int64_t>(x.shape.size());
  std::int64_t outer = 1, length = 1, inner = 1;
  // Before opset 13 the input is seen as 2-D at `axis` (default 1); from 13 one axis (default -1).
  const bool flat = call.node.opset < 13;
  std::int64_t axis = call.node.attrs.i("axis", flat ? 1 : -1);
  if (axis < 0) axis += r;
  if (axis < 0 || axis > r || (!flat && axis == r)) call.fail("axis " + std::to_string(axis) + " out of range for rank " + std::to_string(r));
  for (std::int64_t k = 0; k < r; ++k) (k < axis ? outer : (k == axis || flat) ? length : inner) *= x.shape[static_cast<std::size_t>(k)];
  softmax_kernel<kLog><<<blocks_for(outer * inner), kThreadsPerBlock, 0, call.stream>>>(x.data, outer, length, inner,
                                                                                        call.out[0]->data);
  SPMD_CHECK_CUDA_LAUNCH("ONNX Softmax kernel");
}

enum class Reduce { Mean, Sum, Max, Min };

// Output i: the elements of x whose kept coordinates are i's, in increasing index order.
// shape / strides: x's; reduced: 1 along reduced axes.
template <Reduce kOp>
__global__ void reduce_kernel(const float* x, Dims8 shape, Dims8 strides, Dims8 reduced, std::int64_t outputs,
                              std::int64_t count, float* y) {
  for (std::int64_t i = first_index(); i < outputs; i += index_stride()) {
    std::int64_t rest = i, base = 0;
    for (int d = shape.rank - 1; d >= 0; --d) {
      if (reduced.d[d]) continue;
      base += (rest % shape.d[d]) * strides.d[d];
      rest /= shape.d[d];
    }
    float acc = kOp == Reduce::Max ? -INFINITY : kOp == Reduce::Min ? INFINITY : 0.0f;
    for (std::int64_t e = 0; e < count; ++e) {
      std::int64_t r = e, off = base;
      for (int d = shape.rank - 1; d >= 0; --d) {
        if (!reduced.d[d]) continue;
        off += (r % shape.d[d]) * strides.d[d];
        r /= shape.d[d];
      }
      const float v = x[off];
      acc = kOp == Reduce::Max ? fmaxf(acc, v) : kOp == Reduce::Min ? fminf(acc, v) : acc + v;
    }
    y[i] = kOp == Reduce::Mean ? acc / static_cast<float>(count) : acc;
  }
}

template <Reduce kOp>
void reduce(const CudaGraphCall& call) {
  const DeviceTensor& x = call.input(0);
  const auto r = static_cast<std::int64_t>(x.shape.size());
  std::vector<std::int64_t> axes = call.node.attrs.ints_or("axes", {});
  if (axes.empty() && call.host_value(1)) axes = call.host_value(1)->as_ints();
  const bool noop = axes.empty() && call.node.attrs.i("noop_with_empty_axes", 0) != 0;
  Dims8 reduced = dims_of(call, x.shape);
  for (int d = 0; d < reduced.rank; ++d) reduced.d[d] = axes.empty() && !noop;
  for (auto a : axes) {
    if (a < 0) a += r;
    if (a < 0 || a >= r) call.fail("axis out of range for rank " + std::to_string(r));
    reduced.d[a] = 1;
  }
  std::int64_t count = 1;
  for (int d = 0; d < reduced.rank; ++d)
    if (reduced.d[d]) count *= x.shape[static_cast<std::size_t>(d)];
  DeviceTensor& y = *call.out[0];
  reduce_kernel<kOp><<<blocks_for(y.size()), kThreadsPerBlock, 0, call.stream>>>(
      x.data, dims_of(call, x.shape), strides_of(call, x.shape), reduced, y.size(), count, y.data);
  SPMD_CHECK_CUDA_LAUNCH("ONNX reduction kernel");
}

}  // namespace

SPMD_REGISTER_CUDA_GRAPH_OP("Softmax", softmax<false>);
SPMD_REGISTER_CUDA_GRAPH_OP("LogSoftmax", softmax<true>);
SPMD_REGISTER_CUDA_GRAPH_OP("ReduceMean", reduce<Reduce::Mean>);
SPMD_REGISTER_CUDA_GRAPH_OP("ReduceSum", reduce<Reduce::Sum>);
SPMD_REGISTER_CUDA_GRAPH_OP("ReduceMax", reduce<Reduce::Max>);
SPMD_REGISTER_CUDA_GRAPH_OP("ReduceMin", reduce<Reduce::Min>);

}  // namespace spmd::backends::cuda
