// Graph ops users' exports bring less often: IsNaN / IsInf, Mod, ArgMax / ArgMin, Hardmax,
// CumSum, LRN (AlexNet-era local response normalisation), MeanVarianceNormalization,
// LpNormalization and Size. Each output element from its own row's inputs, in an order fixed
// by the shapes.
#include <algorithm>
#include <cmath>
#include <limits>

#include "spmd/ops/graph_op.hpp"

namespace spmd::ops {
namespace {

// IsNaN / IsInf (detect_positive / detect_negative): bool (int64 0 / 1) of float data.
void isnan_op(const OpCall& c) {
  const Tensor& x = c.float_input(0);
  Tensor& y = *c.out[0];
  y.reset(ElemType::Int64, x.shape);
  for (std::size_t k = 0; k < y.i.size(); ++k) y.i[k] = std::isnan(x.f[k]);
}
void isinf_op(const OpCall& c) {
  const Tensor& x = c.float_input(0);
  const bool pos = c.node.attrs.i("detect_positive", 1) != 0, neg = c.node.attrs.i("detect_negative", 1) != 0;
  Tensor& y = *c.out[0];
  y.reset(ElemType::Int64, x.shape);
  for (std::size_t k = 0; k < y.i.size(); ++k) y.i[k] = std::isinf(x.f[k]) && (x.f[k] > 0 ? pos : neg);
}

// The input seen as [outer, length, inner] around `axis`.
struct Around {
  std::int64_t outer = 1, length = 1, inner = 1;
};
Around around(const Tensor& x, std::size_t axis) {
  Around a;
  for (std::size_t k = 0; k < x.shape.size(); ++k) (k < axis ? a.outer : k == axis ? a.length : a.inner) *= x.shape[k];
  return a;
}

// ArgMax / ArgMin along an axis (the first extreme, or the last with select_last_index), of
// float or int64 values (token ids: CLIP's text pooling takes the position of the largest).
template <bool kMax, class T>
void arg_extreme_of(const Around& a, bool last, const T* x, std::int64_t* y) {
  for (std::int64_t o = 0; o < a.outer; ++o)
    for (std::int64_t i = 0; i < a.inner; ++i) {
      const T* v = x + o * a.length * a.inner + i;
      std::int64_t best = 0;
      for (std::int64_t k = 1; k < a.length; ++k) {
        const T u = v[k * a.inner], b = v[best * a.inner];
        if (kMax ? (u > b || (last && u == b)) : (u < b || (last && u == b))) best = k;
      }
      y[o * a.inner + i] = best;
    }
}

template <bool kMax>
void arg_extreme(const OpCall& c) {
  const Tensor& x = c.input(0);
  const std::size_t axis = c.axis(c.node.attrs.i("axis", 0), x.shape.size());
  const bool keep = c.node.attrs.i("keepdims", 1) != 0, last = c.node.attrs.i("select_last_index", 0) != 0;
  auto shape = x.shape;
  if (keep) shape[axis] = 1;
  else shape.erase(shape.begin() + static_cast<std::ptrdiff_t>(axis));
  const Around a = around(x, axis);
  Tensor& y = *c.out[0];
  y.reset(ElemType::Int64, shape);
  if (x.type == ElemType::Float32) arg_extreme_of<kMax>(a, last, x.f.data(), y.i.data());
  else arg_extreme_of<kMax>(a, last, x.i.data(), y.i.data());
}

// Hardmax: 1 at each group's first maximum, 0 elsewhere (opset 13: along `axis`; before, the
// input flattened to 2-D at `axis`, as Softmax).
void hardmax(const OpCall& c) {
  const Tensor& x = c.float_input(0);
  const std::size_t r = x.shape.size();
  Around a;
  if (c.node.opset < 13) {
    const std::size_t axis = c.axis(c.node.attrs.i("axis", 1), r + 1);
    for (std::size_t k = 0; k < r; ++k) (k < axis ? a.outer : a.length) *= x.shape[k];
  } else {
    a = around(x, c.axis(c.node.attrs.i("axis", -1), r));
  }
  Tensor& y = *c.out[0];
  y.reset(ElemType::Float32, x.shape);
  std::fill(y.f.begin(), y.f.end(), 0.0f);
  for (std::int64_t o = 0; o < a.outer; ++o)
    for (std::int64_t i = 0; i < a.inner; ++i) {
      const float* v = x.f.data() + o * a.length * a.inner + i;
      std::int64_t best = 0;
      for (std::int64_t k = 1; k < a.length; ++k)
        if (v[k * a.inner] > v[best * a.inner]) best = k;
      y.f[static_cast<std::size_t>((o * a.length + best) * a.inner + i)] = 1.0f;
    }
}

// CumSum along the axis input (exclusive: starting from 0; reverse: from the end).
template <class T>
void cumsum_of(const Around& a, bool exclusive, bool reverse, const T* x, T* y) {
  for (std::int64_t o = 0; o < a.outer; ++o)
    for (std::int64_t i = 0; i < a.inner; ++i) {
      T acc = 0;
      for (std::int64_t s = 0; s < a.length; ++s) {
        const std::int64_t k = reverse ? a.length - 1 - s : s;
        const std::int64_t at = (o * a.length + k) * a.inner + i;
        const T v = x[at];
        if (!exclusive) acc += v;
        y[at] = acc;
        if (exclusive) acc += v;
      }
    }
}

// CumSum of float or int64 values (RoBERTa-style position ids: a cumulative sum of the
// non-padding mask).
void cumsum(const OpCall& c) {
  const Tensor& x = c.input(0);
  const std::size_t axis = c.axis(c.input(1).as_ints().at(0), x.shape.size());
  const bool exclusive = c.node.attrs.i("exclusive", 0) != 0, reverse = c.node.attrs.i("reverse", 0) != 0;
  const Around a = around(x, axis);
  Tensor& y = *c.out[0];
  y.reset(x.type, x.shape);
  if (x.type == ElemType::Float32) cumsum_of(a, exclusive, reverse, x.f.data(), y.f.data());
  else cumsum_of(a, exclusive, reverse, x.i.data(), y.i.data());
}

// Mod: fmod = 1 the C remainder (sign of the dividend); else Python's (sign of the divisor),
// float and int64, same shapes or a scalar divisor.
void mod_op(const OpCall& c) {
  const Tensor& a = c.input(0);
  const Tensor& b = c.input(1);
  if (a.type != b.type || (b.size() != 1 && b.shape != a.shape)) c.fail("needs operands of one type, the divisor of the dividend's shape or one value");
  const bool fmod = c.node.attrs.i("fmod", 0) != 0;
  Tensor& y = *c.out[0];
  y.reset(a.type, a.shape);
  const std::int64_t size = a.size(), b_size = b.size();
  for (std::int64_t k = 0; k < size; ++k) {
    const auto u = static_cast<std::size_t>(k), w = static_cast<std::size_t>(b_size == 1 ? 0 : k);
    if (a.type == ElemType::Float32) {
      float r = std::fmod(a.f[u], b.f[w]);
      if (!fmod && r != 0.0f && ((r < 0.0f) != (b.f[w] < 0.0f))) r += b.f[w];
      y.f[u] = r;
    } else {
      if (b.i[w] == 0) c.fail("integer division by zero");
      std::int64_t r = a.i[u] % b.i[w];
      if (!fmod && r != 0 && ((r < 0) != (b.i[w] < 0))) r += b.i[w];
      y.i[u] = r;
    }
  }
}

// LRN over channels: x / (bias + alpha / size * sum of squares over the size channels around)^beta.
void lrn(const OpCall& c) {
  const Tensor& x = c.float_input(0);
  if (x.shape.size() < 3) c.fail("needs an input [N, C, ...]");
  const std::int64_t size = c.node.attrs.i("size", 0);
  if (size < 1) c.fail("size must be positive");
  const float alpha = c.node.attrs.f("alpha", 1e-4f), beta = c.node.attrs.f("beta", 0.75f), bias = c.node.attrs.f("bias", 1.0f);
  const std::int64_t channels = x.shape[1], plane = x.size() / (x.shape[0] * channels);
  const std::int64_t lo = (size - 1) / 2, hi = size - 1 - lo;
  Tensor& y = *c.out[0];
  y.reset(ElemType::Float32, x.shape);
  for (std::int64_t n = 0; n < x.shape[0]; ++n)
    for (std::int64_t ch = 0; ch < channels; ++ch)
      for (std::int64_t p = 0; p < plane; ++p) {
        float squares = 0.0f;
        for (std::int64_t j = std::max<std::int64_t>(0, ch - lo); j <= std::min(channels - 1, ch + hi); ++j) {
          const float v = x.f[static_cast<std::size_t>((n * channels + j) * plane + p)];
          squares += v * v;
        }
        const std::size_t at = static_cast<std::size_t>((n * channels + ch) * plane + p);
        y.f[at] = x.f[at] / std::pow(bias + alpha / static_cast<float>(size) * squares, beta);
      }
}

// MeanVarianceNormalization: (x - mean) / sqrt(variance) over `axes` (default 0, 2, 3), with
// ONNX's 1e-9 under the root.
void mvn(const OpCall& c) {
  const Tensor& x = c.float_input(0);
  const auto axes = c.node.attrs.ints_or("axes", {0, 2, 3});
  std::vector<bool> reduced(x.shape.size(), false);
  for (const auto a : axes) reduced[c.axis(a, x.shape.size())] = true;
  // Each kept coordinate's group: elements combined in increasing index order.
  std::vector<std::int64_t> group(static_cast<std::size_t>(x.size()));
  std::int64_t groups = 1;
  {
    std::vector<std::int64_t> index(x.shape.size(), 0), stride(x.shape.size(), 0);
    for (std::size_t k = x.shape.size(); k-- > 0;)
      if (!reduced[k]) stride[k] = groups, groups *= x.shape[k];
    for (std::size_t e = 0; e < group.size(); ++e) {
      std::int64_t g = 0;
      for (std::size_t k = 0; k < index.size(); ++k) g += index[k] * stride[k];
      group[e] = g;
      for (std::size_t k = index.size(); k-- > 0;) {
        if (++index[k] < x.shape[k]) break;
        index[k] = 0;
      }
    }
  }
  std::vector<double> sum(static_cast<std::size_t>(groups), 0.0), squares(sum.size(), 0.0);
  for (std::size_t e = 0; e < group.size(); ++e) sum[static_cast<std::size_t>(group[e])] += x.f[e];
  const double count = static_cast<double>(x.size()) / static_cast<double>(groups);
  for (std::size_t e = 0; e < group.size(); ++e) {
    const double d = x.f[e] - sum[static_cast<std::size_t>(group[e])] / count;
    squares[static_cast<std::size_t>(group[e])] += d * d;
  }
  Tensor& y = *c.out[0];
  y.reset(ElemType::Float32, x.shape);
  for (std::size_t e = 0; e < group.size(); ++e) {
    const auto g = static_cast<std::size_t>(group[e]);
    y.f[e] = static_cast<float>((x.f[e] - sum[g] / count) / std::sqrt(squares[g] / count + 1e-9));
  }
}

// LpNormalization: x / ||x||_p along `axis` (p = 1 or 2).
void lp_norm(const OpCall& c) {
  const Tensor& x = c.float_input(0);
  const std::int64_t p = c.node.attrs.i("p", 2);
  if (p != 1 && p != 2) c.fail("p must be 1 or 2");
  const Around a = around(x, c.axis(c.node.attrs.i("axis", -1), x.shape.size()));
  Tensor& y = *c.out[0];
  y.reset(ElemType::Float32, x.shape);
  for (std::int64_t o = 0; o < a.outer; ++o)
    for (std::int64_t i = 0; i < a.inner; ++i) {
      const std::size_t first = static_cast<std::size_t>(o * a.length * a.inner + i);
      float norm = 0.0f;
      for (std::int64_t k = 0; k < a.length; ++k) {
        const float v = x.f[first + static_cast<std::size_t>(k * a.inner)];
        norm += p == 1 ? std::fabs(v) : v * v;
      }
      if (p == 2) norm = std::sqrt(norm);
      for (std::int64_t k = 0; k < a.length; ++k) {
        const std::size_t at = first + static_cast<std::size_t>(k * a.inner);
        y.f[at] = norm == 0.0f ? 0.0f : x.f[at] / norm;
      }
    }
}

void size_op(const OpCall& c) {
  Tensor& y = *c.out[0];
  y.reset(ElemType::Int64, {});
  y.i[0] = c.input(0).size();
}

}  // namespace

SPMD_REGISTER_GRAPH_OP("IsNaN", isnan_op);
SPMD_REGISTER_GRAPH_OP("IsInf", isinf_op);
SPMD_REGISTER_GRAPH_OP("ArgMax", arg_extreme<true>);
SPMD_REGISTER_GRAPH_OP("ArgMin", arg_extreme<false>);
SPMD_REGISTER_GRAPH_OP("Hardmax", hardmax);
SPMD_REGISTER_GRAPH_OP("CumSum", cumsum);
SPMD_REGISTER_GRAPH_OP("Mod", mod_op);
SPMD_REGISTER_GRAPH_OP("LRN", lrn);
SPMD_REGISTER_GRAPH_OP("MeanVarianceNormalization", mvn);
SPMD_REGISTER_GRAPH_OP("LpNormalization", lp_norm);
SPMD_REGISTER_GRAPH_OP("Size", size_op);

}  // namespace spmd::ops
