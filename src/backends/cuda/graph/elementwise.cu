// Elementwise ops on the GPU: unary maps (with their attributes, Clip's bounds), binary ops with
// numpy broadcasting (and Expand, Max / Min folds, Sum / Mean of same-shaped inputs), each output element from its matching inputs only, as the
// CPU ops compute it (CUDA's expf, erff, ... are within 2 ulp of the host's).
#include <limits>
#include <string>

#include "graph_op.hpp"

namespace spmd::backends::cuda {
namespace {

enum class Unary {
  Relu, Sigmoid, Tanh, Erf, Exp, Log, Sqrt, Neg, Abs, Reciprocal, Floor, Ceil, Softplus, Softsign,
  LeakyRelu, Elu, HardSigmoid, Selu, Clip, DivideBy, HardSwish, GeluErf, GeluTanh, Mish, Celu, ThresholdedRelu,
  Shrink, Sign, Round
};

template <Unary kOp>
__device__ inline float apply(float v, float p, float q) {
  switch (kOp) {
    case Unary::Relu: return v > 0.0f ? v : 0.0f;
    case Unary::Sigmoid: return 1.0f / (1.0f + expf(-v));
    case Unary::Tanh: return tanhf(v);
    case Unary::Erf: return erff(v);
    case Unary::Exp: return expf(v);
    case Unary::Log: return logf(v);
    case Unary::Sqrt: return sqrtf(v);
    case Unary::Neg: return -v;
    case Unary::Abs: return fabsf(v);
    case Unary::Reciprocal: return 1.0f / v;
    case Unary::Floor: return floorf(v);
    case Unary::Ceil: return ceilf(v);
    case Unary::Softplus: return log1pf(expf(v));
    case Unary::Softsign: return v / (1.0f + fabsf(v));
    case Unary::LeakyRelu: return v >= 0.0f ? v : p * v;
    case Unary::Elu: return v >= 0.0f ? v : p * (expf(v) - 1.0f);
    case Unary::HardSigmoid: return fminf(fmaxf(p * v + q, 0.0f), 1.0f);
    case Unary::Selu: return v > 0.0f ? q * v : q * (p * expf(v) - p);
    case Unary::Clip: return fminf(fmaxf(v, p), q);
    case Unary::DivideBy: return v / p;
    case Unary::HardSwish: return v * fminf(fmaxf(v / 6.0f + 0.5f, 0.0f), 1.0f);
    case Unary::GeluErf: return 0.5f * v * (1.0f + erff(v * 0.7071067811865476f));
    case Unary::GeluTanh: return 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    case Unary::Mish: return v * tanhf(log1pf(expf(v)));
    case Unary::Celu: return fmaxf(0.0f, v) + fminf(0.0f, p * (expf(v / p) - 1.0f));
    case Unary::ThresholdedRelu: return v > p ? v : 0.0f;
    case Unary::Shrink: return v < -p ? v + q : v > p ? v - q : 0.0f;
    case Unary::Sign: return v > 0.0f ? 1.0f : v < 0.0f ? -1.0f : v;
    case Unary::Round: return rintf(v);  // halves to even, as ONNX rounds
  }
  return v;
}

template <Unary kOp>
__global__ void unary_kernel(const float* x, std::int64_t n, float p, float q, float* y) {
  for (std::int64_t i = first_index(); i < n; i += index_stride()) y[i] = apply<kOp>(x[i], p, q);
}

template <Unary kOp>
void launch_unary(const CudaGraphCall& call, const float* x, std::int64_t n, float p, float q, float* y) {
  unary_kernel<kOp><<<blocks_for(n), kThreadsPerBlock, 0, call.stream>>>(x, n, p, q, y);
  SPMD_CHECK_CUDA_LAUNCH("ONNX elementwise kernel");
}

// The op's attributes (p, q) with the CPU op's defaults.
template <Unary kOp>
void unary(const CudaGraphCall& call) {
  const ops::Attrs& a = call.node.attrs;
  float p = 0.0f, q = 0.0f;
  if (kOp == Unary::LeakyRelu) p = a.f("alpha", 0.01f);
  if (kOp == Unary::Elu) p = a.f("alpha", 1.0f);
  if (kOp == Unary::HardSigmoid) p = a.f("alpha", 0.2f), q = a.f("beta", 0.5f);
  if (kOp == Unary::Selu) p = a.f("alpha", 1.67326319217681884765625f), q = a.f("gamma", 1.05070102214813232421875f);
  if (kOp == Unary::Celu || kOp == Unary::ThresholdedRelu) p = a.f("alpha", 1.0f);
  if (kOp == Unary::Shrink) p = a.f("lambd", 0.5f), q = a.f("bias", 0.0f);
  const DeviceTensor& x = call.input(0);
  launch_unary<kOp>(call, x.data, x.size(), p, q, call.out[0]->data);
}

// Gelu (opset 20): exact (erf) or the tanh approximation, as the attribute says.
void gelu(const CudaGraphCall& call) {
  const std::string approximate = call.node.attrs.s("approximate", "none");
  if (approximate == "tanh") unary<Unary::GeluTanh>(call);
  else if (approximate == "none") unary<Unary::GeluErf>(call);
  else call.fail("approximate '" + approximate + "' is not none or tanh");
}

// A bound of Clip: the attribute (opset < 11) or the optional input.
float clip_bound(const CudaGraphCall& call, std::size_t input, const char* attribute, float fallback) {
  if (call.node.opset < 11) return call.node.attrs.f(attribute, fallback);
  return call.scalar(input, fallback);
}

void clip(const CudaGraphCall& call) {
  constexpr float inf = std::numeric_limits<float>::infinity();
  const DeviceTensor& x = call.input(0);
  launch_unary<Unary::Clip>(call, x.data, x.size(), clip_bound(call, 1, "min", -inf), clip_bound(call, 2, "max", inf),
                            call.out[0]->data);
}

enum class Binary { Add, AddRelu, Sub, Mul, Div, Pow, PRelu, Max, Min, First };

template <Binary kOp>
__global__ void binary_kernel(const float* a, Dims8 sa, const float* b, Dims8 sb, Dims8 shape, std::int64_t n, float* y) {
  for (std::int64_t i = first_index(); i < n; i += index_stride()) {
    std::int64_t rest = i, ia = 0, ib = 0;
    for (int d = shape.rank - 1; d >= 0; --d) {
      const std::int64_t k = rest % shape.d[d];
      rest /= shape.d[d];
      ia += k * sa.d[d];
      ib += k * sb.d[d];
    }
    const float u = a[ia], v = b[ib];
    switch (kOp) {
      case Binary::Add: y[i] = u + v; break;
      case Binary::AddRelu: y[i] = fmaxf(u + v, 0.0f); break;
      case Binary::Sub: y[i] = u - v; break;
      case Binary::Mul: y[i] = u * v; break;
      case Binary::Div: y[i] = u / v; break;
      case Binary::Pow: y[i] = v == 2.0f ? u * u : powf(u, v); break;  // squares as the CPU op: x * x
      case Binary::PRelu: y[i] = u < 0.0f ? v * u : u; break;
      case Binary::Max: y[i] = fmaxf(u, v); break;
      case Binary::Min: y[i] = fminf(u, v); break;
      case Binary::First: y[i] = u; break;
    }
  }
}

// y = a op b, both broadcast to y's shape (y may be a: its shape is y's).
template <Binary kOp>
void launch_binary(const CudaGraphCall& call, const DeviceTensor& a, const DeviceTensor& b, DeviceTensor& y) {
  binary_kernel<kOp><<<blocks_for(y.size()), kThreadsPerBlock, 0, call.stream>>>(
      a.data, broadcast_strides(call, a.shape, y.shape), b.data, broadcast_strides(call, b.shape, y.shape),
      dims_of(call, y.shape), y.size(), y.data);
  SPMD_CHECK_CUDA_LAUNCH("ONNX broadcast kernel");
}

template <Binary kOp>
void binary(const CudaGraphCall& call) {
  launch_binary<kOp>(call, call.input(0), call.input(1), *call.out[0]);
}

// Add, then Relu where the loader fused one into it (attrs.ints["spmd_relu"] == 1: a residual
// block's end), as the CPU op does.
void add(const CudaGraphCall& call) {
  if (call.node.attrs.i("spmd_relu", 0) != 0) binary<Binary::AddRelu>(call);
  else binary<Binary::Add>(call);
}

// Expand: the input broadcast to the output's (planned) shape.
void expand(const CudaGraphCall& call) { launch_binary<Binary::First>(call, call.input(0), call.input(0), *call.out[0]); }

// Max / Min of any number of inputs, broadcast, folded left to right (as the CPU op).
template <Binary kOp>
void fold(const CudaGraphCall& call) {
  DeviceTensor& y = *call.out[0];
  if (call.in.size() == 1) launch_binary<Binary::First>(call, call.input(0), call.input(0), y);
  for (std::size_t k = 1; k < call.in.size(); ++k) launch_binary<kOp>(call, k == 1 ? call.input(0) : y, call.input(k), y);
}

// Sum / Mean of inputs of one shape: added in input order, then divided by the count.
template <bool kMean>
void variadic(const CudaGraphCall& call) {
  DeviceTensor& y = *call.out[0];
  for (std::size_t k = 0; k < call.in.size(); ++k)
    if (call.input(k).shape != y.shape) call.fail("inputs of different shapes");
  copy_floats(call, y.data, call.input(0).data, y.size());
  for (std::size_t k = 1; k < call.in.size(); ++k) launch_binary<Binary::Add>(call, y, call.input(k), y);
  if (kMean) launch_unary<Unary::DivideBy>(call, y.data, y.size(), static_cast<float>(call.in.size()), 0.0f, y.data);
}

}  // namespace

SPMD_REGISTER_CUDA_GRAPH_OP("Relu", unary<Unary::Relu>);
SPMD_REGISTER_CUDA_GRAPH_OP("Sigmoid", unary<Unary::Sigmoid>);
SPMD_REGISTER_CUDA_GRAPH_OP("Tanh", unary<Unary::Tanh>);
SPMD_REGISTER_CUDA_GRAPH_OP("Erf", unary<Unary::Erf>);
SPMD_REGISTER_CUDA_GRAPH_OP("Exp", unary<Unary::Exp>);
SPMD_REGISTER_CUDA_GRAPH_OP("Log", unary<Unary::Log>);
SPMD_REGISTER_CUDA_GRAPH_OP("Sqrt", unary<Unary::Sqrt>);
SPMD_REGISTER_CUDA_GRAPH_OP("Neg", unary<Unary::Neg>);
SPMD_REGISTER_CUDA_GRAPH_OP("Abs", unary<Unary::Abs>);
SPMD_REGISTER_CUDA_GRAPH_OP("Reciprocal", unary<Unary::Reciprocal>);
SPMD_REGISTER_CUDA_GRAPH_OP("Floor", unary<Unary::Floor>);
SPMD_REGISTER_CUDA_GRAPH_OP("Ceil", unary<Unary::Ceil>);
SPMD_REGISTER_CUDA_GRAPH_OP("Softplus", unary<Unary::Softplus>);
SPMD_REGISTER_CUDA_GRAPH_OP("Softsign", unary<Unary::Softsign>);
SPMD_REGISTER_CUDA_GRAPH_OP("LeakyRelu", unary<Unary::LeakyRelu>);
SPMD_REGISTER_CUDA_GRAPH_OP("Elu", unary<Unary::Elu>);
SPMD_REGISTER_CUDA_GRAPH_OP("HardSigmoid", unary<Unary::HardSigmoid>);
SPMD_REGISTER_CUDA_GRAPH_OP("Selu", unary<Unary::Selu>);
SPMD_REGISTER_CUDA_GRAPH_OP("Clip", clip);
SPMD_REGISTER_CUDA_GRAPH_OP("HardSwish", unary<Unary::HardSwish>);
SPMD_REGISTER_CUDA_GRAPH_OP("Gelu", gelu);
SPMD_REGISTER_CUDA_GRAPH_OP("Mish", unary<Unary::Mish>);
SPMD_REGISTER_CUDA_GRAPH_OP("Celu", unary<Unary::Celu>);
SPMD_REGISTER_CUDA_GRAPH_OP("ThresholdedRelu", unary<Unary::ThresholdedRelu>);
SPMD_REGISTER_CUDA_GRAPH_OP("Shrink", unary<Unary::Shrink>);
SPMD_REGISTER_CUDA_GRAPH_OP("Sign", unary<Unary::Sign>);
SPMD_REGISTER_CUDA_GRAPH_OP("Round", unary<Unary::Round>);
SPMD_REGISTER_CUDA_GRAPH_OP("Add", add);
SPMD_REGISTER_CUDA_GRAPH_OP("Sub", binary<Binary::Sub>);
SPMD_REGISTER_CUDA_GRAPH_OP("Mul", binary<Binary::Mul>);
SPMD_REGISTER_CUDA_GRAPH_OP("Div", binary<Binary::Div>);
SPMD_REGISTER_CUDA_GRAPH_OP("Pow", binary<Binary::Pow>);
SPMD_REGISTER_CUDA_GRAPH_OP("PRelu", binary<Binary::PRelu>);
SPMD_REGISTER_CUDA_GRAPH_OP("Max", fold<Binary::Max>);
SPMD_REGISTER_CUDA_GRAPH_OP("Min", fold<Binary::Min>);
SPMD_REGISTER_CUDA_GRAPH_OP("Expand", expand);
SPMD_REGISTER_CUDA_GRAPH_OP("Sum", variadic<false>);
SPMD_REGISTER_CUDA_GRAPH_OP("Mean", variadic<true>);

}  // namespace spmd::backends::cuda
