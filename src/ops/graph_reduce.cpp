// Graph ops that reduce: Softmax / LogSoftmax (each opset's axis rule), LayerNormalization
// (opset 17: PyTorch's LayerNorm), InstanceNormalization, the Reduce* ops over chosen axes, and the
// variadic Sum and Mean (our exported ensembles end in Mean). Each reduction runs in one fixed
// order along its axis.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "spmd/ops/graph_op.hpp"
#include "vector_math.hpp"

namespace spmd::ops {
namespace {


float strided_max(const float* v, std::int64_t n, std::int64_t stride) {
  float top = -std::numeric_limits<float>::infinity();
  for (std::int64_t k = 0; k < n; ++k) top = std::max(top, v[k * stride]);
  return top;
}

// Softmax over `rows` contiguous rows of `length`: each row's maximum subtracted, then one
// pass of exponentials over all the rows (short rows, as attention's 49 tokens, spent most of
// their time in a vector loop's scalar tail per row), then each row's sum in lanes.
template <bool kLog>
void softmax_rows(const float* x, std::int64_t rows, std::int64_t length, float* y) {
  std::vector<float> tops(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * length;
    float* out = y + r * length;
    const float top = tops[static_cast<std::size_t>(r)] = max_of(in, length);
    for (std::int64_t k = 0; k < length; ++k) out[k] = in[k] - top;
  }
  map_floats(y, y, rows * length, [](float v) { return fast_exp(v); });
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * length;
    float* out = y + r * length;
    const float sum = lane_sum(out, length);
    if constexpr (kLog) {
      const float top = tops[static_cast<std::size_t>(r)], log_sum = std::log(sum);
      for (std::int64_t k = 0; k < length; ++k) out[k] = in[k] - top - log_sum;
    } else {
      for (std::int64_t k = 0; k < length; ++k) out[k] /= sum;
    }
  }
}

// Softmax over groups of `length` elements `stride` apart: [outer, length, inner] layout.
template <bool kLog>
void softmax(const OpCall& c) {
  const Tensor& x = c.float_input(0);
  if (x.type != ElemType::Float32) c.fail("needs a float input");
  const std::size_t r = x.shape.size();
  std::int64_t outer = 1, length = 1, inner = 1;
  // Whether the groups are contiguous by the shape's structure (the last axis, or the 2-D view
  // before opset 13), not because the dimensions after the axis happen to be 1 (a batch of one
  // there): the vectorised sum's order must not change with the batch size.
  bool contiguous = true;
  if (c.node.opset < 13) {  // the input seen as 2-D at `axis` (default 1)
    std::int64_t a = c.node.attrs.i("axis", 1);
    if (a < 0) a += static_cast<std::int64_t>(r);  // negative axes count from the input's rank
    const std::size_t axis = c.axis(a, r + 1);
    for (std::size_t k = 0; k < r; ++k) (k < axis ? outer : length) *= x.shape[k];
  } else {
    const std::size_t axis = c.axis(c.node.attrs.i("axis", -1), r);
    for (std::size_t k = 0; k < r; ++k) (k < axis ? outer : k == axis ? length : inner) *= x.shape[k];
    contiguous = axis + 1 == r;
  }
  Tensor& y = *c.out[0];
  y.reset(ElemType::Float32, x.shape);
  if (contiguous) return softmax_rows<kLog>(x.f.data(), outer, length, y.f.data());
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i = 0; i < inner; ++i) {
      const float* in = x.f.data() + o * length * inner + i;
      float* out = y.f.data() + o * length * inner + i;
      const float top = strided_max(in, length, inner);
      for (std::int64_t k = 0; k < length; ++k) out[k * inner] = fast_exp(in[k * inner] - top);
      float sum = 0.0f;
      for (std::int64_t k = 0; k < length; ++k) sum += out[k * inner];
      const float log_sum = kLog ? std::log(sum) : 0.0f;
      for (std::int64_t k = 0; k < length; ++k) out[k * inner] = kLog ? in[k * inner] - top - log_sum : out[k * inner] / sum;
    }
}

// Mean and sqrt(variance + eps) of n values, summed in double: a normalised block can be a
// whole feature map (thousands of values), where float sums drift by 1e-6 from PyTorch's and
// ONNX Runtime's statistics.
struct Moments {
  float mean, sd;
};
Moments moments(const float* in, std::int64_t n, float eps) {
  // Eight partial sums (element k into lane k % 8), then the lanes in a fixed order: a loop the
  // compiler vectorises, where one running double sum would not.
  constexpr int kLanes = 8;
  const auto lanes_sum = [&](auto term) {
    double lane[kLanes] = {};
    std::int64_t k = 0;
    for (; k + kLanes <= n; k += kLanes)
      for (int j = 0; j < kLanes; ++j) lane[j] += term(in[k + j]);
    for (; k < n; ++k) lane[k % kLanes] += term(in[k]);
    return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
  };
  const double mean = lanes_sum([](float v) { return static_cast<double>(v); }) / static_cast<double>(n);
  const double squares = lanes_sum([mean](float v) { return (v - mean) * (v - mean); });
  return {static_cast<float>(mean), static_cast<float>(std::sqrt(squares / static_cast<double>(n) + eps))};
}

// LayerNormalization: Y = (X - mean) / sqrt(var + epsilon) * Scale + B over the dimensions
// from `axis` on (mean and variance of each of those blocks), Scale and B broadcast to them;
// the optional Mean and InvStdDev outputs [dims before axis, 1, ...].
void layer_norm(const OpCall& c) {
  const Tensor& x = c.float_input(0);
  const Tensor& scale = c.float_input(1);
  const Tensor* bias = c.has_input(2) ? &c.float_input(2) : nullptr;
  const std::size_t r = x.shape.size(), axis = c.axis(c.node.attrs.i("axis", -1), r);
  const float eps = c.node.attrs.f("epsilon", 1e-5f);
  std::int64_t outer = 1, length = 1;
  for (std::size_t k = 0; k < r; ++k) (k < axis ? outer : length) *= x.shape[k];
  for (const Tensor* t : {&scale, bias})
    if (t && t->size() != length && t->size() != 1)
      c.fail("Scale / B " + to_string(t->shape) + " do not broadcast to the normalised " + std::to_string(length) + " values");
  // Scale and B as pointers with a stride of 0 when they hold one value.
  const float* s = scale.f.data();
  const float* b = bias ? bias->f.data() : nullptr;
  const std::int64_t s_step = scale.size() == 1 ? 0 : 1, b_step = bias && bias->size() == 1 ? 0 : 1;
  Tensor& y = *c.out[0];
  y.reset(ElemType::Float32, x.shape);
  std::vector<std::int64_t> stat_shape(x.shape.begin(), x.shape.begin() + static_cast<std::ptrdiff_t>(axis));
  stat_shape.resize(r, 1);
  Tensor* stats[2] = {nullptr, nullptr};  // Mean, InvStdDev where asked for
  for (std::size_t k = 1; k < 3 && k < c.out.size(); ++k)
    if (c.out[k]) (stats[k - 1] = c.out[k])->reset(ElemType::Float32, stat_shape);
  for (std::int64_t o = 0; o < outer; ++o) {
    const float* in = x.f.data() + o * length;
    float* out = y.f.data() + o * length;
    const auto [mean, sd] = moments(in, length, eps);
    if (b) for (std::int64_t k = 0; k < length; ++k) out[k] = (in[k] - mean) / sd * s[k * s_step] + b[k * b_step];
    else for (std::int64_t k = 0; k < length; ++k) out[k] = (in[k] - mean) / sd * s[k * s_step];
    if (stats[0]) stats[0]->f[static_cast<std::size_t>(o)] = mean;
    if (stats[1]) stats[1]->f[static_cast<std::size_t>(o)] = 1.0f / sd;
  }
}

// InstanceNormalization: each (row, channel) plane of [N, C, ...] normalised by its own mean
// and variance, then scaled and shifted per channel (GroupNorm as PyTorch exports it).
void instance_norm(const OpCall& c) {
  const Tensor& x = c.float_input(0);
  const Tensor& scale = c.float_input(1);
  const Tensor& bias = c.float_input(2);
  if (x.shape.size() < 3) c.fail("needs an input [N, C, ...], not " + to_string(x.shape));
  const std::int64_t channels = x.shape[1];
  if (scale.size() != channels || bias.size() != channels)
    c.fail("scale / B hold " + std::to_string(scale.size()) + " / " + std::to_string(bias.size()) + " values for " +
           std::to_string(channels) + " channels");
  const float eps = c.node.attrs.f("epsilon", 1e-5f);
  const std::int64_t plane = x.size() / (x.shape[0] * channels);
  Tensor& y = *c.out[0];
  y.reset(ElemType::Float32, x.shape);
  for (std::int64_t p = 0; p < x.shape[0] * channels; ++p) {
    const float* in = x.f.data() + p * plane;
    float* out = y.f.data() + p * plane;
    const auto [mean, sd] = moments(in, plane, eps);
    const auto ch = static_cast<std::size_t>(p % channels);
    for (std::int64_t k = 0; k < plane; ++k) out[k] = (in[k] - mean) / sd * scale.f[ch] + bias.f[ch];
  }
}

// GroupNormalization (opset 18; 21 changed Scale and B from one value per group to one per
// channel): each row's channels in num_groups groups, each group normalised as one block.
void group_norm(const OpCall& c) {
  const Tensor& x = c.float_input(0);
  const Tensor& scale = c.float_input(1);
  const Tensor& bias = c.float_input(2);
  if (x.shape.size() < 2) c.fail("needs an input [N, C, ...], not " + to_string(x.shape));
  const std::int64_t channels = x.shape[1], groups = c.node.attrs.i("num_groups", 0);
  if (groups < 1 || channels % groups != 0)
    c.fail("num_groups " + std::to_string(groups) + " does not divide the " + std::to_string(channels) + " channels");
  const std::int64_t per_value = c.node.opset >= 21 ? channels : groups;
  if (scale.size() != per_value || bias.size() != per_value)
    c.fail("Scale / B hold " + std::to_string(scale.size()) + " / " + std::to_string(bias.size()) + " values; opset " +
           std::to_string(c.node.opset) + " takes " + std::to_string(per_value));
  const float eps = c.node.attrs.f("epsilon", 1e-5f);
  const std::int64_t plane = x.size() / (x.shape[0] * channels), block = plane * (channels / groups);
  Tensor& y = *c.out[0];
  y.reset(ElemType::Float32, x.shape);
  for (std::int64_t b = 0; b < x.shape[0] * groups; ++b) {
    const float* in = x.f.data() + b * block;
    float* out = y.f.data() + b * block;
    const auto [mean, sd] = moments(in, block, eps);
    for (std::int64_t k = 0; k < block; ++k) {
      const std::int64_t channel = b % groups * (channels / groups) + k / plane;
      const auto at = static_cast<std::size_t>(per_value == channels ? channel : b % groups);
      out[k] = (in[k] - mean) / sd * scale.f[at] + bias.f[at];
    }
  }
}

enum class Reduce { Mean, Sum, Max, Min, Prod, L1, L2, SumSquare, LogSum, LogSumExp };

// What a reduction adds up per element (|x| for L1, x^2 for L2 and SumSquare, e^x for
// LogSumExp), and what it makes of the total.
template <Reduce kOp>
float reduce_term(float v) {
  if constexpr (kOp == Reduce::L1) return std::fabs(v);
  else if constexpr (kOp == Reduce::L2 || kOp == Reduce::SumSquare) return v * v;
  else if constexpr (kOp == Reduce::LogSumExp) return std::exp(v);
  else return v;
}
template <Reduce kOp>
float reduce_result(float acc) {
  if constexpr (kOp == Reduce::L2) return std::sqrt(acc);
  else if constexpr (kOp == Reduce::LogSum || kOp == Reduce::LogSumExp) return std::log(acc);
  else return acc;
}

// Whether the reduced dimensions (1-sized ones aside) are one run of adjacent dimensions: the
// input is then [outer, length, inner] with `length` reduced.
bool reduced_block(const std::vector<std::int64_t>& shape, const std::vector<bool>& reduced, std::int64_t& outer,
                   std::int64_t& length, std::int64_t& inner) {
  int phase = 0;  // 0 before the run, 1 in it, 2 after it
  for (std::size_t k = 0; k < shape.size(); ++k) {
    if (shape[k] == 1) continue;
    if (reduced[k] && phase == 2) return false;
    if (reduced[k]) phase = 1;
    else if (phase == 1) phase = 2;
    (phase == 0 ? outer : phase == 1 ? length : inner) *= shape[k];
  }
  return true;
}

// y[kept index] = combine(y[kept index], x[e]) over every element e in index order, y holding
// each output's initial value: any set of reduced axes, any layout.
template <class T, class Combine>
void reduce_by_odometer(const std::vector<std::int64_t>& shape, const std::vector<bool>& reduced,
                        const std::vector<std::int64_t>& kept_shape, const T* x, T* y, Combine combine) {
  const std::size_t r = shape.size();
  std::vector<std::int64_t> out_strides(r, 0), index(r, 0);
  std::int64_t n = 1;
  for (std::int64_t k = static_cast<std::int64_t>(r) - 1, s = 1; k >= 0; --k) {
    out_strides[static_cast<std::size_t>(k)] = reduced[static_cast<std::size_t>(k)] ? 0 : s;
    s *= kept_shape[static_cast<std::size_t>(k)];
    n *= shape[static_cast<std::size_t>(k)];
  }
  for (std::int64_t e = 0; e < n; ++e) {
    std::int64_t o = 0;
    for (std::size_t k = 0; k < r; ++k) o += index[k] * out_strides[k];
    y[o] = combine(y[o], x[e]);
    for (std::size_t k = r; k-- > 0;) {
      if (++index[k] < shape[k]) break;
      index[k] = 0;
    }
  }
}

// An int64 reduction (the shape arithmetic of torch.std / var: the count of the reduced
// elements as ReduceProd over a Shape's entries): exact, in the odometer's order.
template <Reduce kOp>
void reduce_ints(const OpCall& c, const Tensor& x, const std::vector<bool>& reduced, const std::vector<std::int64_t>& kept_shape,
                 const std::vector<std::int64_t>& out_shape) {
  if constexpr (kOp != Reduce::Sum && kOp != Reduce::Prod && kOp != Reduce::Max && kOp != Reduce::Min) {
    c.fail("input 0 is an integer tensor; this op computes in float32 (ReduceSum, ReduceProd, ReduceMax and ReduceMin take int64)");
  } else {
    Tensor& y = *c.out[0];
    y.reset(ElemType::Int64, out_shape);
    const std::int64_t init = kOp == Reduce::Max ? std::numeric_limits<std::int64_t>::min()
                              : kOp == Reduce::Min ? std::numeric_limits<std::int64_t>::max() : kOp == Reduce::Prod ? 1 : 0;
    std::fill(y.i.begin(), y.i.end(), init);
    reduce_by_odometer(x.shape, reduced, kept_shape, x.i.data(), y.i.data(), [](std::int64_t acc, std::int64_t v) {
      return kOp == Reduce::Max ? std::max(acc, v) : kOp == Reduce::Min ? std::min(acc, v) : kOp == Reduce::Prod ? acc * v : acc + v;
    });
  }
}

template <Reduce kOp>
void reduce(const OpCall& c) {
  const Tensor& x = c.input(0);
  const std::size_t r = x.shape.size();
  std::vector<std::int64_t> axes = c.node.attrs.ints_or("axes", {});
  if (axes.empty() && c.has_input(1)) axes = c.input(1).as_ints();  // ReduceSum 13's, the others' 18's input form
  const bool noop = axes.empty() && c.node.attrs.i("noop_with_empty_axes", 0) != 0;
  if (noop) {  // the input unchanged (not even squared or exponentiated)
    *c.out[0] = x;
    return;
  }
  std::vector<bool> reduced(r, axes.empty() && !noop);
  for (const auto a : axes) reduced[c.axis(a, r)] = true;
  const bool keep = c.node.attrs.i("keepdims", 1) != 0;
  std::vector<std::int64_t> kept_shape, out_shape;
  for (std::size_t k = 0; k < r; ++k) {
    kept_shape.push_back(reduced[k] ? 1 : x.shape[k]);
    if (!reduced[k] || keep) out_shape.push_back(kept_shape.back());
  }
  if (x.type == ElemType::Int64) return reduce_ints<kOp>(c, x, reduced, kept_shape, out_shape);
  Tensor& y = *c.out[0];
  y.reset(ElemType::Float32, out_shape);
  const float init = kOp == Reduce::Max ? -std::numeric_limits<float>::infinity()
                     : kOp == Reduce::Min ? std::numeric_limits<float>::infinity() : kOp == Reduce::Prod ? 1.0f : 0.0f;
  std::fill(y.f.begin(), y.f.end(), init);
  const auto combine = [](float acc, float v) {
    return kOp == Reduce::Max ? std::max(acc, v) : kOp == Reduce::Min ? std::min(acc, v) : kOp == Reduce::Prod ? acc * v : acc + v;
  };
  // Each output's elements are combined in increasing index order (a trailing sum in eight
  // lanes, vector_math.hpp), whatever the batch.
  std::int64_t outer = 1, length = 1, inner = 1;
  const bool blocked = reduced_block(x.shape, reduced, outer, length, inner);
  // The lanes only where the reduced axes are the last ones by index, so that no 1-sized
  // dimension (a batch of one) decides the summation order.
  std::size_t first_reduced = r;
  while (first_reduced > 0 && reduced[first_reduced - 1]) --first_reduced;
  const bool trailing = first_reduced < r && std::none_of(reduced.begin(), reduced.begin() + static_cast<std::ptrdiff_t>(first_reduced),
                                                          [](bool b) { return b; });
  if (blocked && trailing && (kOp == Reduce::Sum || kOp == Reduce::Mean)) {  // trailing axes: vectorised lanes
    for (std::int64_t o = 0; o < outer; ++o) y.f[static_cast<std::size_t>(o)] = lane_sum(x.f.data() + o * length, length);
  } else if (blocked) {  // [outer, length, inner]: rows of `inner` at a time
    for (std::int64_t o = 0; o < outer; ++o) {
      float* acc = y.f.data() + o * inner;
      for (std::int64_t l = 0; l < length; ++l) {
        const float* in = x.f.data() + (o * length + l) * inner;
        for (std::int64_t i = 0; i < inner; ++i) acc[i] = combine(acc[i], reduce_term<kOp>(in[i]));
      }
    }
  } else {
    reduce_by_odometer(x.shape, reduced, kept_shape, x.f.data(), y.f.data(),
                       [&](float acc, float v) { return combine(acc, reduce_term<kOp>(v)); });
  }
  if (kOp == Reduce::Mean && y.size() > 0) {
    const float count = static_cast<float>(x.size() / y.size());
    for (auto& v : y.f) v /= count;
  }
  for (auto& v : y.f) v = reduce_result<kOp>(v);
}

// Sum / Mean of inputs of one shape (the exporters' ensembles and skip connections).
template <bool kMean>
void variadic(const OpCall& c) {
  const Tensor& first = c.float_input(0);
  Tensor& y = *c.out[0];
  y.reset(ElemType::Float32, first.shape);
  std::copy_n(first.f.begin(), first.size(), y.f.begin());
  for (std::size_t k = 1; k < c.in.size(); ++k) {
    const Tensor& t = c.float_input(k);
    if (t.shape != first.shape) c.fail("inputs of different shapes (" + to_string(first.shape) + ", " + to_string(t.shape) + ")");
    for (std::int64_t e = 0; e < y.size(); ++e) y.f[static_cast<std::size_t>(e)] += t.f[static_cast<std::size_t>(e)];
  }
  if (kMean)
    for (auto& v : y.f) v /= static_cast<float>(c.in.size());
}

}  // namespace

SPMD_REGISTER_GRAPH_OP("Softmax", softmax<false>);
SPMD_REGISTER_GRAPH_OP("LogSoftmax", softmax<true>);
SPMD_REGISTER_GRAPH_OP("LayerNormalization", layer_norm);
SPMD_REGISTER_GRAPH_OP("ReduceMean", reduce<Reduce::Mean>);
SPMD_REGISTER_GRAPH_OP("ReduceSum", reduce<Reduce::Sum>);
SPMD_REGISTER_GRAPH_OP("ReduceMax", reduce<Reduce::Max>);
SPMD_REGISTER_GRAPH_OP("ReduceMin", reduce<Reduce::Min>);
SPMD_REGISTER_GRAPH_OP("ReduceProd", reduce<Reduce::Prod>);
SPMD_REGISTER_GRAPH_OP("ReduceL1", reduce<Reduce::L1>);
SPMD_REGISTER_GRAPH_OP("ReduceL2", reduce<Reduce::L2>);
SPMD_REGISTER_GRAPH_OP("ReduceSumSquare", reduce<Reduce::SumSquare>);
SPMD_REGISTER_GRAPH_OP("ReduceLogSum", reduce<Reduce::LogSum>);
SPMD_REGISTER_GRAPH_OP("ReduceLogSumExp", reduce<Reduce::LogSumExp>);
SPMD_REGISTER_GRAPH_OP("InstanceNormalization", instance_norm);
SPMD_REGISTER_GRAPH_OP("GroupNormalization", group_norm);
SPMD_REGISTER_GRAPH_OP("Sum", variadic<false>);
SPMD_REGISTER_GRAPH_OP("Mean", variadic<true>);

}  // namespace spmd::ops
