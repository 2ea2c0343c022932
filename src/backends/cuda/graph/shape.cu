// Ops that move elements on the GPU: the reshaping ops as copies (their output shape is the
// plan's), Transpose, Concat and Pad.
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

// y at multi-index j reads x at offset sum_k j[k] * from.d[k].
__global__ void gather_kernel(const float* x, Dims8 shape, Dims8 from, std::int64_t n, float* y) {
  for (std::int64_t i = first_index(); i < n; i += index_stride()) {
    std::int64_t rest = i, off = 0;
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
  gather_kernel<<<blocks_for(y.size()), kThreadsPerBlock, 0, call.stream>>>(x.data, dims_of(call, y.shape), from, y.size(), y.data);
  SPMD_CHECK_CUDA_LAUNCH("ONNX Transpose kernel");
}

// Each input's [outer, its axis * inner] block goes to its columns of [outer, axis * inner].
void concat(const CudaGraphCall& call) {
  DeviceTensor& y = *call.out[0];
  const auto r = static_cast<std::int64_t>(y.shape.size());
  std::int64_t axis = call.node.attrs.i("axis", 0);
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) call.fail("axis out of range");
  std::int64_t outer = 1, inner = 1;
  for (std::int64_t d = 0; d < r; ++d)
    if (d != axis) (d < axis ? outer : inner) *= y.shape[static_cast<std::size_t>(d)];
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
    if (!call.host_value(1)) call.fail("its pads must be known on the host");
    pads = call.host_value(1)->as_ints();
    if (const ops::Tensor* v = call.host_value(2); v && v->type == ops::ElemType::Float32 && !v->f.empty()) value = v->f[0];
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

}  // namespace spmd::backends::cuda
