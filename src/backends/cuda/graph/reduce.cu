// Reductions on the GPU: Softmax / LogSoftmax (each opset's axis rule), ReduceMean / Sum /
// Max / Min over chosen axes, and the normalisations (Layer-, Instance-, GroupNormalization). One thread per output group, combining its elements in the
// CPU op's order (increasing input index).
#include <string>
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

// Which Scale / B value element k of normalised block b takes: ((b % mb) * sb + (k / dk) % mk).
struct NormIndex {
  std::int64_t mb = 1, sb = 0, dk = 1, mk = 1;
  __device__ std::int64_t operator()(std::int64_t b, std::int64_t k) const { return (b % mb) * sb + (k / dk) % mk; }
};

// Each block of `length` values normalised by its own mean and variance (summed in double, as
// the CPU ops), then scaled and shifted; one thread per block. mean / inv_std: the optional
// statistics outputs of LayerNormalization, one per block.
__global__ void normalise_kernel(const float* x, std::int64_t blocks, std::int64_t length, float eps, const float* scale,
                                 NormIndex si, const float* bias, NormIndex bi, float* y, float* mean_out, float* inv_std_out) {
  for (std::int64_t b = first_index(); b < blocks; b += index_stride()) {
    const float* in = x + b * length;
    double sum = 0.0;
    for (std::int64_t k = 0; k < length; ++k) sum += in[k];
    const double mean_d = sum / static_cast<double>(length);
    double squares = 0.0;
    for (std::int64_t k = 0; k < length; ++k) squares += (in[k] - mean_d) * (in[k] - mean_d);
    const auto mean = static_cast<float>(mean_d);
    const auto sd = static_cast<float>(sqrt(squares / static_cast<double>(length) + eps));
    for (std::int64_t k = 0; k < length; ++k)
      y[b * length + k] = (in[k] - mean) / sd * scale[si(b, k)] + (bias ? bias[bi(b, k)] : 0.0f);
    if (mean_out) mean_out[b] = mean;
    if (inv_std_out) inv_std_out[b] = 1.0f / sd;
  }
}

void launch_normalise(const CudaGraphCall& call, std::int64_t blocks, std::int64_t length, NormIndex si, NormIndex bi,
                      float* mean_out = nullptr, float* inv_std_out = nullptr) {
  const float* bias = call.has_input(2) ? call.input(2).data : nullptr;
  normalise_kernel<<<blocks_for(blocks), kThreadsPerBlock, 0, call.stream>>>(
      call.input(0).data, blocks, length, call.node.attrs.f("epsilon", 1e-5f), call.input(1).data, si, bias, bi,
      call.out[0]->data, mean_out, inv_std_out);
  SPMD_CHECK_CUDA_LAUNCH("ONNX normalisation kernel");
}

// LayerNormalization: blocks from `axis` on; Scale and B per element of a block, or one value.
void layer_norm(const CudaGraphCall& call) {
  const DeviceTensor& x = call.input(0);
  const auto r = static_cast<std::int64_t>(x.shape.size());
  std::int64_t axis = call.node.attrs.i("axis", -1);
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) call.fail("axis out of range for rank " + std::to_string(r));
  std::int64_t outer = 1, length = 1;
  for (std::int64_t k = 0; k < r; ++k) (k < axis ? outer : length) *= x.shape[static_cast<std::size_t>(k)];
  const auto per_element = [&](std::size_t k) {
    if (!call.has_input(k)) return NormIndex{};
    const std::int64_t n = call.input(k).size();
    if (n != length && n != 1) call.fail("Scale / B hold " + std::to_string(n) + " values for blocks of " + std::to_string(length));
    return n == 1 ? NormIndex{} : NormIndex{1, 0, 1, length};
  };
  const auto stat = [&](std::size_t k) { return k < call.out.size() && call.out[k] ? call.out[k]->data : nullptr; };
  launch_normalise(call, outer, length, per_element(1), per_element(2), stat(1), stat(2));
}

// InstanceNormalization: each (row, channel) plane; Scale and B per channel.
void instance_norm(const CudaGraphCall& call) {
  const DeviceTensor& x = call.input(0);
  if (x.shape.size() < 3) call.fail("needs an input [N, C, ...]");
  const std::int64_t channels = x.shape[1], planes = x.shape[0] * channels;
  const NormIndex per_channel{channels, 1, 1, 1};
  launch_normalise(call, planes, x.size() / planes, per_channel, per_channel);
}

// GroupNormalization: each row's channels in num_groups blocks; Scale and B per group (opset
// 18) or per channel (21).
void group_norm(const CudaGraphCall& call) {
  const DeviceTensor& x = call.input(0);
  if (x.shape.size() < 2) call.fail("needs an input [N, C, ...]");
  const std::int64_t channels = x.shape[1], groups = call.node.attrs.i("num_groups", 0);
  if (groups < 1 || channels % groups != 0) call.fail("num_groups does not divide the channels");
  const std::int64_t blocks = x.shape[0] * groups, length = x.size() / blocks, plane = length / (channels / groups);
  const NormIndex index = call.node.opset >= 21 ? NormIndex{groups, channels / groups, plane, channels / groups}
                                                : NormIndex{groups, 1, 1, 1};
  const std::int64_t want = call.node.opset >= 21 ? channels : groups;
  if (call.input(1).size() != want || call.input(2).size() != want) call.fail("Scale / B do not hold one value per " + std::string(call.node.opset >= 21 ? "channel" : "group"));
  launch_normalise(call, blocks, length, index, index);
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
SPMD_REGISTER_CUDA_GRAPH_OP("LayerNormalization", layer_norm);
SPMD_REGISTER_CUDA_GRAPH_OP("InstanceNormalization", instance_norm);
SPMD_REGISTER_CUDA_GRAPH_OP("GroupNormalization", group_norm);

}  // namespace spmd::backends::cuda
