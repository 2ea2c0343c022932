// Ops that move elements on the GPU: the reshaping ops as copies (their output shape is the
// plan's), Transpose, Concat, Pad, and Slice, Gather and Cast of float data (their indices,
// bounds and types on the host).
#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "graph_op.hpp"

namespace spmd::backends::cuda {
namespace {

// Identity, Dropout (inference), Reshape, Flatten, Squeeze, Unsqueeze: the same floats.
void copy(const CudaGraphCall& call) {
  const DeviceTensor& x = call.input(0);
  if (call.out[0]->size() != x.size()) call.fail("output " + ops::to_string(call.out[0]->shape) + " has another size than input " + ops::to_string(x.shape));
  copy_floats(call, call.out[0]->data, x.data, x.size());
}

// y at multi-index j reads x at offset base + sum_k j[k] * from.d[k].
__global__ void gather_kernel(const float* x, std::int64_t base, Dims8 shape, Dims8 from, std::int64_t n, float* y) {
  for (std::int64_t i = first_index(); i < n; i += index_stride()) {
    std::int64_t rest = i, off = base;
    for (int d = shape.rank - 1; d >= 0; --d) {
      off += (rest % shape.d[d]) * from.d[d];
      rest /= shape.d[d];
    }
    y[i] = x[off];
  }
}

void transpose(const CudaGraphCall& call) {
  const DeviceTensor& x = call.input(0);
  DeviceTensor& y = *call.out[0];
  std::vector<std::int64_t> perm(x.shape.size());
  std::iota(perm.rbegin(), perm.rend(), 0);  // default: reverse the dimensions
  perm = call.node.attrs.ints_or("perm", perm);
  if (perm.size() != x.shape.size()) call.fail("perm does not match the input's rank");
  const Dims8 in = strides_of(call, x.shape);
  Dims8 from = in;
  for (std::size_t k = 0; k < perm.size(); ++k) {
    if (perm[k] < 0 || perm[k] >= static_cast<std::int64_t>(perm.size())) call.fail("perm entry out of range");
    from.d[k] = in.d[perm[k]];
  }
  gather_kernel<<<blocks_for(y.size()), kThreadsPerBlock, 0, call.stream>>>(x.data, 0, dims_of(call, y.shape), from, y.size(), y.data);
  SPMD_CHECK_CUDA_LAUNCH("ONNX Transpose kernel");
}

// The "axis" attribute (default 0) of a tensor of `shape`, and the element counts before and
// after it: the tensor as [outer, shape[axis], inner].
struct AxisSplit {
  std::int64_t axis, outer, inner;
};
AxisSplit split_at_axis(const CudaGraphCall& call, const std::vector<std::int64_t>& shape) {
  const auto r = static_cast<std::int64_t>(shape.size());
  AxisSplit a{call.node.attrs.i("axis", 0), 1, 1};
  if (a.axis < 0) a.axis += r;
  if (a.axis < 0 || a.axis >= r) call.fail("axis out of range");
  for (std::int64_t d = 0; d < r; ++d)
    if (d != a.axis) (d < a.axis ? a.outer : a.inner) *= shape[static_cast<std::size_t>(d)];
  return a;
}

// The host value of input k as int64s, or fail().
std::vector<std::int64_t> host_ints(const CudaGraphCall& call, std::size_t k) {
  const ops::Tensor* v = call.host_value(k);
  if (!v) call.fail("input " + std::to_string(k) + " must be known on the host");
  return v->as_ints();
}

// Slice (starts, ends, axes, steps as inputs from opset 10, attributes before): the first
// element and the step per axis, ONNX's clamping as the CPU op; the output shape is the plan's.
void slice(const CudaGraphCall& call) {
  const DeviceTensor& x = call.input(0);
  DeviceTensor& y = *call.out[0];
  const bool attrs = call.node.opset < 10;
  const auto starts = attrs ? call.node.attrs.ints_or("starts", {}) : host_ints(call, 1);
  std::vector<std::int64_t> axes(starts.size());
  std::iota(axes.begin(), axes.end(), 0);
  if (attrs) axes = call.node.attrs.ints_or("axes", axes);
  else if (call.host_value(3)) axes = host_ints(call, 3);
  std::vector<std::int64_t> steps(starts.size(), 1);
  if (!attrs && call.host_value(4)) steps = host_ints(call, 4);
  if (axes.size() != starts.size() || steps.size() != starts.size()) call.fail("starts, axes and steps differ in length");
  const Dims8 in = strides_of(call, x.shape);
  Dims8 from = in;
  std::int64_t base = 0;
  const auto r = static_cast<std::int64_t>(x.shape.size());
  for (std::size_t k = 0; k < starts.size(); ++k) {
    const std::int64_t a = axes[k] < 0 ? axes[k] + r : axes[k];
    if (a < 0 || a >= r || steps[k] == 0) call.fail("an axis out of range or a step of 0");
    const std::int64_t dim = x.shape[static_cast<std::size_t>(a)], v = starts[k] < 0 ? starts[k] + dim : starts[k];
    base += (steps[k] > 0 ? std::clamp<std::int64_t>(v, 0, dim) : std::clamp<std::int64_t>(v, -1, dim - 1)) * in.d[a];
    from.d[a] = in.d[a] * steps[k];
  }
  if (y.size() == 0) return;
  gather_kernel<<<blocks_for(y.size()), kThreadsPerBlock, 0, call.stream>>>(x.data, base, dims_of(call, y.shape), from, y.size(), y.data);
  SPMD_CHECK_CUDA_LAUNCH("ONNX Slice kernel");
}

// Gather of float data by host indices: per index, its [outer, inner] slab of x copied to its
// place in y (the indices' dimensions replace the axis).
void gather(const CudaGraphCall& call) {
  const DeviceTensor& x = call.input(0);
  DeviceTensor& y = *call.out[0];
  const auto indices = host_ints(call, 1);
  const auto [axis, outer, inner] = split_at_axis(call, x.shape);
  const std::int64_t dim = x.shape[static_cast<std::size_t>(axis)], count = static_cast<std::int64_t>(indices.size());
  const std::size_t slab = static_cast<std::size_t>(inner) * sizeof(float);
  for (std::int64_t i = 0; i < count && slab > 0 && outer > 0; ++i) {
    const std::int64_t pick = indices[static_cast<std::size_t>(i)] < 0 ? indices[static_cast<std::size_t>(i)] + dim : indices[static_cast<std::size_t>(i)];
    if (pick < 0 || pick >= dim) call.fail("index " + std::to_string(pick) + " is out of range");
    SPMD_CHECK_CUDA(cudaMemcpy2DAsync(y.data + i * inner, slab * static_cast<std::size_t>(count), x.data + pick * inner,
                                      slab * static_cast<std::size_t>(dim), slab, static_cast<std::size_t>(outer),
                                      cudaMemcpyDeviceToDevice, call.stream),
                    "ONNX Gather copy");
  }
}

// Cast of float data to float or double (a copy); to an integer type, or to float16 / bfloat16
// (which the CPU rounds to), the plan refuses on the GPU.
std::string cast_limits(const ops::GraphNode& node, const std::vector<std::vector<std::int64_t>>&) {
  const std::int64_t to = node.attrs.i("to", 1);
  if (to == 10 || to == 16) return "a cast to float16 / bfloat16 (rounded to it on the CPU only)";
  if (to != 1 && to != 11) return "a cast of float data to an integer type";
  return "";
}

void cast(const CudaGraphCall& call) {
  if (const std::string why = cast_limits(call.node, {}); !why.empty()) call.fail(why);
  copy(call);
}

// Each input's [outer, its axis * inner] block goes to its columns of [outer, axis * inner].
void concat(const CudaGraphCall& call) {
  DeviceTensor& y = *call.out[0];
  const auto [axis, outer, inner] = split_at_axis(call, y.shape);
  const std::size_t row = static_cast<std::size_t>(y.shape[static_cast<std::size_t>(axis)] * inner) * sizeof(float);
  std::size_t at = 0;
  for (std::size_t k = 0; k < call.in.size(); ++k) {
    const DeviceTensor& t = call.input(k);
    const std::size_t block = static_cast<std::size_t>(t.size() / std::max<std::int64_t>(outer, 1)) * sizeof(float);
    if (block > 0)
      SPMD_CHECK_CUDA(cudaMemcpy2DAsync(reinterpret_cast<char*>(y.data) + at, row, t.data, block, block,
                                        static_cast<std::size_t>(outer), cudaMemcpyDeviceToDevice, call.stream),
                      "ONNX Concat copy");
    at += block;
  }
}

// mode 0 constant, 1 reflect, 2 edge; pads_begin per dimension; value outside (constant).
__global__ void pad_kernel(const float* x, Dims8 in_shape, Dims8 in_strides, Dims8 out_shape, Dims8 begin, int mode,
                           float value, std::int64_t n, float* y) {
  for (std::int64_t i = first_index(); i < n; i += index_stride()) {
    std::int64_t rest = i, off = 0;
    bool inside = true;
    for (int d = out_shape.rank - 1; d >= 0; --d) {
      std::int64_t v = rest % out_shape.d[d] - begin.d[d];
      rest /= out_shape.d[d];
      const std::int64_t len = in_shape.d[d];
      if (mode == 2) v = v < 0 ? 0 : v >= len ? len - 1 : v;
      if (mode == 1) {
        if (len == 1) v = 0;
        while (len > 1 && (v < 0 || v >= len)) v = v < 0 ? -v : 2 * (len - 1) - v;
      }
      inside = inside && v >= 0 && v < len;
      off += v * in_strides.d[d];
    }
    y[i] = inside ? x[off] : value;
  }
}

void pad(const CudaGraphCall& call) {
  const DeviceTensor& x = call.input(0);
  DeviceTensor& y = *call.out[0];
  const std::string mode = call.node.attrs.s("mode", "constant");
  const int m = mode == "constant" ? 0 : mode == "reflect" ? 1 : mode == "edge" ? 2 : -1;
  if (m < 0) call.fail("mode '" + mode + "' is not constant, reflect or edge");
  std::vector<std::int64_t> pads;
  float value = 0.0f;
  if (call.node.opset < 11) {
    pads = call.node.attrs.ints_or("pads", {});
    value = call.node.attrs.f("value", 0.0f);
  } else {
    pads = host_ints(call, 1);
    value = call.scalar(2, 0.0f);
  }
  if (pads.size() != 2 * x.shape.size()) call.fail("pads has " + std::to_string(pads.size()) + " values for rank " + std::to_string(x.shape.size()));
  Dims8 begin = dims_of(call, x.shape);
  for (int d = 0; d < begin.rank; ++d) begin.d[d] = pads[static_cast<std::size_t>(d)];
  pad_kernel<<<blocks_for(y.size()), kThreadsPerBlock, 0, call.stream>>>(x.data, dims_of(call, x.shape), strides_of(call, x.shape),
                                                                        dims_of(call, y.shape), begin, m, value, y.size(), y.data);
  SPMD_CHECK_CUDA_LAUNCH("ONNX Pad kernel");
}

}  // namespace

SPMD_REGISTER_CUDA_GRAPH_OP("Identity", copy);
SPMD_REGISTER_CUDA_GRAPH_OP("Dropout", copy);
SPMD_REGISTER_CUDA_GRAPH_OP("Reshape", copy);
SPMD_REGISTER_CUDA_GRAPH_OP("Flatten", copy);
SPMD_REGISTER_CUDA_GRAPH_OP("Squeeze", copy);
SPMD_REGISTER_CUDA_GRAPH_OP("Unsqueeze", copy);
SPMD_REGISTER_CUDA_GRAPH_OP("Transpose", transpose);
SPMD_REGISTER_CUDA_GRAPH_OP("Concat", concat);
SPMD_REGISTER_CUDA_GRAPH_OP("Pad", pad);
SPMD_REGISTER_CUDA_GRAPH_OP("Slice", slice);
SPMD_REGISTER_CUDA_GRAPH_OP("Gather", gather);
SPMD_REGISTER_CUDA_GRAPH_OP("Cast", cast, cast_limits);

}  // namespace spmd::backends::cuda
