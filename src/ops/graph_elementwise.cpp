// Elementwise graph ops: unary maps, and binary ops with numpy broadcasting. Each output
// element depends on the matching input elements only (row independent by construction).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "graph_broadcast.hpp"
#include "vector_math.hpp"
#include "spmd/ops/graph_op.hpp"

namespace spmd::ops {
namespace {

template <class Fn>
void unary(const OpCall& c, Fn fn) {
  const Tensor& x = c.input(0);
  if (x.type != ElemType::Float32) c.fail("needs a float input");
  Tensor& y = *c.out[0];
  y.reset(ElemType::Float32, x.shape);
  map_floats(x.f.data(), y.f.data(), x.size(), fn);
}

// Neg and Abs of int64 too: shape arithmetic (ONNX's expanded LayerNormalization negates an
// axis count), exact.
template <class Fn, class IntFn>
void unary_or_int(const OpCall& c, Fn fn, IntFn int_fn) {
  const Tensor& x = c.input(0);
  if (x.type == ElemType::Float32) return unary(c, fn);
  Tensor& y = *c.out[0];
  y.reset(ElemType::Int64, x.shape);
  std::transform(x.i.begin(), x.i.end(), y.i.begin(), int_fn);
}

void relu(const OpCall& c) { unary(c, [](float v) { return v > 0.0f ? v : 0.0f; }); }
void sigmoid(const OpCall& c) { unary(c, [](float v) { return fast_sigmoid(v); }); }
void tanh_op(const OpCall& c) { unary(c, [](float v) { return fast_tanh(v); }); }
void erf_op(const OpCall& c) { unary(c, [](float v) { return fast_erf(v); }); }
void exp_op(const OpCall& c) { unary(c, [](float v) { return fast_exp(v); }); }
void log_op(const OpCall& c) { unary(c, [](float v) { return std::log(v); }); }
void sqrt_op(const OpCall& c) { unary(c, [](float v) { return std::sqrt(v); }); }
void neg(const OpCall& c) {
  unary_or_int(c, [](float v) { return -v; }, [](std::int64_t v) { return -v; });
}
void abs_op(const OpCall& c) {
  unary_or_int(c, [](float v) { return std::fabs(v); }, [](std::int64_t v) { return v < 0 ? -v : v; });
}
void reciprocal(const OpCall& c) { unary(c, [](float v) { return 1.0f / v; }); }
void floor_op(const OpCall& c) { unary(c, [](float v) { return std::floor(v); }); }
void ceil_op(const OpCall& c) { unary(c, [](float v) { return std::ceil(v); }); }
void leaky_relu(const OpCall& c) {
  const float alpha = c.node.attrs.f("alpha", 0.01f);
  unary(c, [alpha](float v) { return v >= 0.0f ? v : alpha * v; });
}
void elu(const OpCall& c) {
  const float alpha = c.node.attrs.f("alpha", 1.0f);
  unary(c, [alpha](float v) { return v >= 0.0f ? v : alpha * (fast_exp(v) - 1.0f); });
}
void hard_sigmoid(const OpCall& c) {
  const float alpha = c.node.attrs.f("alpha", 0.2f), beta = c.node.attrs.f("beta", 0.5f);
  unary(c, [=](float v) { return std::clamp(alpha * v + beta, 0.0f, 1.0f); });
}
// The trigonometric and hyperbolic maps (positional encodings computed in the graph).
void sin_op(const OpCall& c) { unary(c, [](float v) { return std::sin(v); }); }
void cos_op(const OpCall& c) { unary(c, [](float v) { return std::cos(v); }); }
void tan_op(const OpCall& c) { unary(c, [](float v) { return std::tan(v); }); }
void asin_op(const OpCall& c) { unary(c, [](float v) { return std::asin(v); }); }
void acos_op(const OpCall& c) { unary(c, [](float v) { return std::acos(v); }); }
void atan_op(const OpCall& c) { unary(c, [](float v) { return std::atan(v); }); }
void sinh_op(const OpCall& c) { unary(c, [](float v) { return std::sinh(v); }); }
void cosh_op(const OpCall& c) { unary(c, [](float v) { return std::cosh(v); }); }
void asinh_op(const OpCall& c) { unary(c, [](float v) { return std::asinh(v); }); }
void acosh_op(const OpCall& c) { unary(c, [](float v) { return std::acosh(v); }); }
void atanh_op(const OpCall& c) { unary(c, [](float v) { return std::atanh(v); }); }

// HardSwish (opset 14, what PyTorch's nn.Hardswish exports there): x * HardSigmoid(x) with
// alpha 1/6, beta 1/2.
void hard_swish(const OpCall& c) {
  unary(c, [](float v) { return v * std::clamp(v / 6.0f + 0.5f, 0.0f, 1.0f); });
}
// Gelu (opset 20, how newer exporters write F.gelu): exact with erf, or the tanh approximation.
void gelu(const OpCall& c) {
  const std::string approximate = c.node.attrs.s("approximate", "none");
  if (approximate == "tanh") {
    unary(c, [](float v) { return 0.5f * v * (1.0f + fast_tanh(0.7978845608028654f * (v + 0.044715f * v * v * v))); });
  } else if (approximate == "none" && c.node.attrs.floats.count("spmd_divisor")) {
    // The exporters' x * (erf(x / d) + a) * h fused at load (onnx_fusion.cpp): its constants,
    // its order of operations, so the same bits as the five nodes it replaces.
    const float d = c.node.attrs.f("spmd_divisor", 1.0f), a = c.node.attrs.f("spmd_addend", 1.0f),
                h = c.node.attrs.f("spmd_factor", 0.5f);
    unary(c, [d, a, h](float v) { return v * (fast_erf(v / d) + a) * h; });
  } else if (approximate == "none") {
    unary(c, [](float v) { return 0.5f * v * (1.0f + fast_erf(v * 0.7071067811865476f)); });
  } else {
    c.fail("approximate '" + approximate + "' is not none or tanh");
  }
}
void mish(const OpCall& c) { unary(c, [](float v) { return v * std::tanh(std::log1p(std::exp(v))); }); }
void celu(const OpCall& c) {
  const float alpha = c.node.attrs.f("alpha", 1.0f);
  unary(c, [alpha](float v) { return std::max(0.0f, v) + std::min(0.0f, alpha * (fast_exp(v / alpha) - 1.0f)); });
}
void thresholded_relu(const OpCall& c) {
  const float alpha = c.node.attrs.f("alpha", 1.0f);
  unary(c, [alpha](float v) { return v > alpha ? v : 0.0f; });
}
void shrink(const OpCall& c) {
  const float lambd = c.node.attrs.f("lambd", 0.5f), bias = c.node.attrs.f("bias", 0.0f);
  unary(c, [=](float v) { return v < -lambd ? v + bias : v > lambd ? v - bias : 0.0f; });
}
void sign(const OpCall& c) { unary(c, [](float v) { return v > 0.0f ? 1.0f : v < 0.0f ? -1.0f : v; }); }
// Round: halves to even, as ONNX (and numpy) round.
void round_op(const OpCall& c) { unary(c, [](float v) { return std::nearbyint(v); }); }
void softplus(const OpCall& c) { unary(c, [](float v) { return std::log1p(std::exp(v)); }); }
void softsign(const OpCall& c) { unary(c, [](float v) { return v / (1.0f + std::fabs(v)); }); }
void selu(const OpCall& c) {
  const float alpha = c.node.attrs.f("alpha", 1.67326319217681884765625f), gamma = c.node.attrs.f("gamma", 1.05070102214813232421875f);
  unary(c, [=](float v) { return v > 0.0f ? gamma * v : gamma * (alpha * fast_exp(v) - alpha); });
}

// Clip: bounds as attributes (opset < 11) or optional inputs 1 and 2.
// Clip of int64 values (a length clamped before indexing), its bounds as integers.
void clip_ints(const OpCall& c) {
  const auto bound = [&c](std::size_t k, std::int64_t none) {
    return c.has_input(k) && c.input(k).size() > 0 ? c.input(k).as_ints().at(0) : none;
  };
  const std::int64_t lo = bound(1, std::numeric_limits<std::int64_t>::min()), hi = bound(2, std::numeric_limits<std::int64_t>::max());
  const Tensor& x = c.input(0);
  Tensor& y = *c.out[0];
  y.reset(ElemType::Int64, x.shape);
  std::transform(x.i.begin(), x.i.end(), y.i.begin(), [lo, hi](std::int64_t v) { return std::min(std::max(v, lo), hi); });
}

void clip(const OpCall& c) {
  if (c.node.opset >= 11 && c.input(0).type == ElemType::Int64) return clip_ints(c);
  float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
  if (c.node.opset < 11) {
    lo = c.node.attrs.f("min", lo);
    hi = c.node.attrs.f("max", hi);
  } else {
    const auto bound = [&c](std::size_t k, float none) {
      if (!c.has_input(k) || c.input(k).size() == 0) return none;
      return c.float_input(k).f[0];
    };
    lo = bound(1, lo);
    hi = bound(2, hi);
  }
  unary(c, [lo, hi](float v) { return std::min(std::max(v, lo), hi); });
}

template <class FloatFn, class IntFn>
void binary_into(const OpCall& c, const Tensor& a, const Tensor& b, Tensor& y, FloatFn ff, IntFn fi) {
  if (a.type != b.type) c.fail("inputs of different element types");
  const auto b_shape = legacy_aligned(c, a.shape, b.shape);
  const auto shape = broadcast_shape(c, a.shape, b_shape);
  y.reset(a.type, shape);
  // Operands of the output's shape: one flat row; else the dimensions merged where they can be.
  const bool flat = a.shape == shape && b_shape == shape && !shape.empty();
  std::vector<std::int64_t> run = flat ? std::vector<std::int64_t>{y.size()} : shape;
  auto sa = flat ? std::vector<std::int64_t>{1} : broadcast_strides(a.shape, shape);
  auto sb = flat ? std::vector<std::int64_t>{1} : broadcast_strides(b_shape, shape);
  if (!flat && !shape.empty()) coalesce(run, sa, sb);
  if (a.type == ElemType::Float32) broadcast_apply(run, a.f.data(), sa, b.f.data(), sb, y.f.data(), ff);
  else broadcast_apply(run, a.i.data(), sa, b.i.data(), sb, y.i.data(), fi);
}

template <class FloatFn, class IntFn>
void binary(const OpCall& c, FloatFn ff, IntFn fi) {
  binary_into(c, c.input(0), c.input(1), *c.out[0], ff, fi);
}

// Max / Min of any number of inputs, broadcast, folded left to right.
template <class FloatFn, class IntFn>
void fold(const OpCall& c, FloatFn ff, IntFn fi) {
  Tensor acc = c.input(0), next;
  for (std::size_t k = 1; k < c.in.size(); ++k) {
    binary_into(c, acc, c.input(k), next, ff, fi);
    std::swap(acc, next);
  }
  *c.out[0] = std::move(acc);
}

// Add, then Relu where one was fused at load (attribute spmd_relu: a residual block's end).
void add(const OpCall& c) {
  const auto ints = [](std::int64_t x, std::int64_t y) { return x + y; };
  if (c.node.attrs.i("spmd_relu", 0) != 0) {
    if (c.input(0).type != ElemType::Float32) c.fail("the Relu fused into it needs float inputs");
    binary(c, [](float x, float y) { return std::max(x + y, 0.0f); }, ints);
  } else {
    binary(c, [](float x, float y) { return x + y; }, ints);
  }
}
void sub(const OpCall& c) { binary(c, [](float x, float y) { return x - y; }, [](std::int64_t x, std::int64_t y) { return x - y; }); }
void mul(const OpCall& c) { binary(c, [](float x, float y) { return x * y; }, [](std::int64_t x, std::int64_t y) { return x * y; }); }
void div(const OpCall& c) {
  binary(c, [](float x, float y) { return x / y; }, [](std::int64_t x, std::int64_t y) { return y ? x / y : 0; });
}
void pow_op(const OpCall& c) {
  // Squares (LayerNorm's variance, as exported) as a product: the bits of x * x.
  binary(c, [](float x, float y) { return y == 2.0f ? x * x : std::pow(x, y); },
         [](std::int64_t x, std::int64_t y) { return static_cast<std::int64_t>(std::pow(x, y)); });
}
// PRelu: x < 0 ? slope * x : x, the slope broadcast to x.
void prelu(const OpCall& c) {
  binary(c, [](float x, float slope) { return x < 0.0f ? slope * x : x; },
         [](std::int64_t x, std::int64_t slope) { return x < 0 ? slope * x : x; });
}
// Expand: the input broadcast to a shape (numpy rules, either side may be 1).
void expand(const OpCall& c) {
  Tensor ones;
  const auto dims = c.input(1).as_ints();
  ones.reset(c.input(0).type, dims);
  if (ones.type == ElemType::Float32) std::fill(ones.f.begin(), ones.f.end(), 0.0f);
  else std::fill(ones.i.begin(), ones.i.end(), 0);
  binary_into(c, c.input(0), ones, *c.out[0], [](float x, float) { return x; }, [](std::int64_t x, std::int64_t) { return x; });
}
void max_op(const OpCall& c) {
  fold(c, [](float x, float y) { return std::max(x, y); }, [](std::int64_t x, std::int64_t y) { return std::max(x, y); });
}
void min_op(const OpCall& c) {
  fold(c, [](float x, float y) { return std::min(x, y); }, [](std::int64_t x, std::int64_t y) { return std::min(x, y); });
}

}  // namespace

SPMD_REGISTER_GRAPH_OP("Relu", relu);
SPMD_REGISTER_GRAPH_OP("Sigmoid", sigmoid);
SPMD_REGISTER_GRAPH_OP("Tanh", tanh_op);
SPMD_REGISTER_GRAPH_OP("Erf", erf_op);
SPMD_REGISTER_GRAPH_OP("Exp", exp_op);
SPMD_REGISTER_GRAPH_OP("Log", log_op);
SPMD_REGISTER_GRAPH_OP("Sqrt", sqrt_op);
SPMD_REGISTER_GRAPH_OP("Neg", neg);
SPMD_REGISTER_GRAPH_OP("Abs", abs_op);
SPMD_REGISTER_GRAPH_OP("Reciprocal", reciprocal);
SPMD_REGISTER_GRAPH_OP("Floor", floor_op);
SPMD_REGISTER_GRAPH_OP("Ceil", ceil_op);
SPMD_REGISTER_GRAPH_OP("LeakyRelu", leaky_relu);
SPMD_REGISTER_GRAPH_OP("Elu", elu);
SPMD_REGISTER_GRAPH_OP("HardSigmoid", hard_sigmoid);
SPMD_REGISTER_GRAPH_OP("Softplus", softplus);
SPMD_REGISTER_GRAPH_OP("HardSwish", hard_swish);
SPMD_REGISTER_GRAPH_OP("Celu", celu);
SPMD_REGISTER_GRAPH_OP("Gelu", gelu);
SPMD_REGISTER_GRAPH_OP("Mish", mish);
SPMD_REGISTER_GRAPH_OP("ThresholdedRelu", thresholded_relu);
SPMD_REGISTER_GRAPH_OP("Shrink", shrink);
SPMD_REGISTER_GRAPH_OP("Sign", sign);
SPMD_REGISTER_GRAPH_OP("Round", round_op);
SPMD_REGISTER_GRAPH_OP("Sin", sin_op);
SPMD_REGISTER_GRAPH_OP("Cos", cos_op);
SPMD_REGISTER_GRAPH_OP("Tan", tan_op);
SPMD_REGISTER_GRAPH_OP("Asin", asin_op);
SPMD_REGISTER_GRAPH_OP("Acos", acos_op);
SPMD_REGISTER_GRAPH_OP("Atan", atan_op);
SPMD_REGISTER_GRAPH_OP("Sinh", sinh_op);
SPMD_REGISTER_GRAPH_OP("Cosh", cosh_op);
SPMD_REGISTER_GRAPH_OP("Asinh", asinh_op);
SPMD_REGISTER_GRAPH_OP("Acosh", acosh_op);
SPMD_REGISTER_GRAPH_OP("Atanh", atanh_op);
SPMD_REGISTER_GRAPH_OP("Softsign", softsign);
SPMD_REGISTER_GRAPH_OP("Selu", selu);
SPMD_REGISTER_GRAPH_OP("PRelu", prelu);
SPMD_REGISTER_GRAPH_OP("Expand", expand);
SPMD_REGISTER_GRAPH_OP("Clip", clip);
SPMD_REGISTER_GRAPH_OP("Add", add);
SPMD_REGISTER_GRAPH_OP("Sub", sub);
SPMD_REGISTER_GRAPH_OP("Mul", mul);
SPMD_REGISTER_GRAPH_OP("Div", div);
SPMD_REGISTER_GRAPH_OP("Pow", pow_op);
SPMD_REGISTER_GRAPH_OP("Max", max_op);
SPMD_REGISTER_GRAPH_OP("Min", min_op);

}  // namespace spmd::ops
