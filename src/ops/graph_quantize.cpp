// Quantized inference: QuantizeLinear / DequantizeLinear (the QDQ pairs that onnxruntime's
// quantize_static writes around float ops), QLinearConv and QLinearMatMul (its QOperator
// format), DynamicQuantizeLinear, MatMulInteger and ConvInteger (quantize_dynamic's).
// Quantized values live in int64 tensors (the library's integer type), in the range of the type
// the file states for them: the loader records it as attribute spmd_to (the zero point's
// declared type, or opset 21's output_dtype). Integer products are summed exactly in int32 as
// ONNX defines them; requantization scales in float32 and rounds half to even, as ONNX
// Runtime's kernels do.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "graph_nd.hpp"
#include "spmd/models/cnn_kernels.hpp"
#include "spmd/ops/graph_op.hpp"

namespace spmd::ops {
namespace {

constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding and taking it away rounds half to even below 2^22

struct QuantizedRange {
  float lo, hi;
};

// The range of the element type in spmd_to (ONNX TensorProto numbers).
QuantizedRange quantized_range(const OpCall& c) {
  const std::int64_t to = c.node.attrs.i("spmd_to", 0);
  switch (to) {
    case 2: return {0.0f, 255.0f};         // uint8
    case 3: return {-128.0f, 127.0f};      // int8
    case 4: return {0.0f, 65535.0f};       // uint16
    case 5: return {-32768.0f, 32767.0f};  // int16
    case 0: c.fail("the file does not state the element type of the zero point (uint8 or int8?)");
    default:
      c.fail("quantizing to element type " + std::to_string(to) + " is not supported (uint8, int8, uint16 and int16 are)");
  }
}

// round(v) + zero point, saturated to the quantized type: the float holds every such integer
// exactly; NaN becomes the range's low end instead of undefined behaviour.
inline std::int64_t saturate(float rounded_plus_zero, QuantizedRange r) {
  const float v = rounded_plus_zero != rounded_plus_zero ? r.lo : rounded_plus_zero;
  return static_cast<std::int64_t>(v < r.lo ? r.lo : v > r.hi ? r.hi : v);
}

const Tensor& integer_input(const OpCall& c, std::size_t k) {
  const Tensor& t = c.input(k);
  if (t.type != ElemType::Int64) c.fail("input " + std::to_string(k) + " is float; it takes quantized (integer) values");
  return t;
}

// A scale or zero point of a tensor of `shape`: one value (a scalar or [1]) for all of it, or
// one per index along `axis` (a 1-D tensor of that length). index(e): which applies to element e.
class QuantParam {
 public:
  QuantParam(const OpCall& c, const Tensor* param, const std::vector<std::int64_t>& shape, std::int64_t axis_attr,
             const char* what)
      : param_(param) {
    if (param == nullptr || param->size() == 1) return;
    if (param->shape.size() != 1 || shape.empty())
      c.fail(std::string(what) + " " + to_string(param->shape) + " is neither one value nor one per index of an axis");
    const std::size_t axis = c.axis(axis_attr, shape.size());
    if (param->shape[0] != shape[axis])
      c.fail(std::string(what) + " has " + std::to_string(param->shape[0]) + " values for axis " + std::to_string(axis) +
             " of " + to_string(shape));
    length_ = shape[axis];
    for (std::size_t d = axis + 1; d < shape.size(); ++d) inner_ *= shape[d];
  }
  bool per_axis() const { return length_ != 0; }
  std::int64_t index(std::int64_t e) const { return length_ == 0 ? 0 : (e / inner_) % length_; }
  float scale(std::int64_t e) const { return scale_at(index(e)); }
  std::int64_t zero(std::int64_t e) const { return zero_at(index(e)); }
  // By the index runs() gives (0 for a per-tensor parameter).
  float scale_at(std::int64_t k) const { return param_->f[static_cast<std::size_t>(length_ == 0 ? 0 : k)]; }
  std::int64_t zero_at(std::int64_t k) const { return param_ ? param_->i[static_cast<std::size_t>(length_ == 0 ? 0 : k)] : 0; }
  // f(first, count, k) for each run of consecutive elements of a tensor of `size` that share
  // parameter index k: the whole tensor for a per-tensor parameter.
  template <class F>
  void runs(std::int64_t size, F f) const {
    if (size == 0) return;
    if (length_ == 0) return f(std::int64_t{0}, size, std::int64_t{0});
    for (std::int64_t at = 0, k = 0; at < size; at += inner_, k = k + 1 == length_ ? 0 : k + 1) f(at, inner_, k);
  }

 private:
  const Tensor* param_;
  std::int64_t length_ = 0, inner_ = 1;
};

std::int64_t quant_axis(const OpCall& c) {
  if (c.node.attrs.i("block_size", 0) != 0) c.fail("blocked quantization (block_size) is not supported");
  return c.node.opset < 13 ? 0 : c.node.attrs.i("axis", 1);
}

const Tensor* zero_point(const OpCall& c, std::size_t k) { return c.has_input(k) ? &integer_input(c, k) : nullptr; }

// ONNX gives a zero point the scale's shape; one per index where the scale is one value would
// be read as its first value alone.
void check_pair(const OpCall& c, const QuantParam& scale, const QuantParam& zero) {
  if (zero.per_axis() && !scale.per_axis()) c.fail("the zero point has one value per index of an axis, the scale one value");
}

// Each x / scale rounded half to even and saturated, as the offset q from the zero point:
// store(e, q, scale, zero) for element e. Clamping to the integer bounds less the zero point
// commutes with rounding, and every value is then an integer below 2^22, where adding and taking
// away 1.5 * 2^23 rounds half to even: a loop the compiler vectorises. NaN saturates low.
template <class Store>
void quantized_offsets(const OpCall& c, const Tensor& x, std::int64_t axis, Store store) {
  const QuantParam scale(c, &c.float_input(1), x.shape, axis, "the scale");
  const QuantParam zero(c, zero_point(c, 2), x.shape, axis, "the zero point");
  check_pair(c, scale, zero);
  const QuantizedRange r = quantized_range(c);
  scale.runs(x.size(), [&](std::int64_t at, std::int64_t count, std::int64_t k) {
    const float s = scale.scale_at(k), z = static_cast<float>(zero.zero_at(k)), lo = r.lo - z, hi = r.hi - z;
    const float* in = x.f.data() + at;
    for (std::int64_t e = 0; e < count; ++e) {
      float v = in[e] / s;
      v = v >= lo ? v : lo;
      v = v <= hi ? v : hi;
      store(at + e, (v + kRound) - kRound, s, z);
    }
  });
}

// y = saturate(round(x / scale) + zero_point).
void quantize_linear(const OpCall& c) {
  const Tensor& x = c.float_input(0);
  Tensor& y = *c.out[0];
  y.reset(ElemType::Int64, x.shape);
  quantized_offsets(c, x, quant_axis(c), [&y](std::int64_t e, float q, float, float z) {
    y.i[static_cast<std::size_t>(e)] = static_cast<std::int32_t>(q + z);
  });
}

// A QuantizeLinear -> DequantizeLinear pair fused at load (models/onnx_fusion.cpp): the float
// input quantized and dequantized in one pass, the bits of the two ops ((q + z) - z is q).
void quantize_dequantize(const OpCall& c, std::int64_t axis) {
  const Tensor& x = c.float_input(0);
  Tensor& y = *c.out[0];
  y.reset(ElemType::Float32, x.shape);
  quantized_offsets(c, x, axis, [&y](std::int64_t e, float q, float s, float) { y.f[static_cast<std::size_t>(e)] = q * s; });
}

// y = (x - zero_point) * scale.
void dequantize_linear(const OpCall& c) {
  const std::int64_t axis = quant_axis(c);
  if (c.node.attrs.i("spmd_quantize_first", 0) != 0) return quantize_dequantize(c, axis);
  const Tensor& x = integer_input(c, 0);
  const QuantParam scale(c, &c.float_input(1), x.shape, axis, "x_scale");
  const QuantParam zero(c, zero_point(c, 2), x.shape, axis, "x_zero_point");
  check_pair(c, scale, zero);
  Tensor& y = *c.out[0];
  y.reset(ElemType::Float32, x.shape);
  scale.runs(x.size(), [&](std::int64_t at, std::int64_t count, std::int64_t k) {
    const float s = scale.scale_at(k);
    const std::int64_t z = zero.zero_at(k);
    const std::int64_t* in = x.i.data() + at;
    float* out = y.f.data() + at;
    for (std::int64_t e = 0; e < count; ++e) out[e] = static_cast<float>(in[e] - z) * s;
  });
}

// uint8 with a scale and zero point from the tensor's range (with 0 in it), as ONNX's reference
// computes them. The range is the whole tensor's, batch included: eval's trial at load finds
// that a row's result then depends on the others and refuses such a model.
void dynamic_quantize_linear(const OpCall& c) {
  const Tensor& x = c.float_input(0);
  float lo = 0.0f, hi = 0.0f;
  for (const float v : x.f) lo = std::fmin(lo, v), hi = std::fmax(hi, v);
  const float scale = (hi == lo ? 1.0f : hi - lo) / 255.0f;
  const QuantizedRange r{0.0f, 255.0f};
  const float zero = std::nearbyintf(std::fmin(std::fmax(0.0f - lo / scale, r.lo), r.hi));
  Tensor& y = *c.out[0];
  y.reset(ElemType::Int64, x.shape);
  for (std::size_t u = 0; u < x.f.size(); ++u) y.i[u] = saturate(std::nearbyintf(x.f[u] / scale) + zero, r);
  if (c.out.size() > 1 && c.out[1]) {
    c.out[1]->reset(ElemType::Float32, {});
    c.out[1]->f[0] = scale;
  }
  if (c.out.size() > 2 && c.out[2]) {
    c.out[2]->reset(ElemType::Int64, {});
    c.out[2]->i[0] = static_cast<std::int64_t>(zero);
  }
}

// Float32 arithmetic on integers is exact, in any order, while every partial sum stays below
// 2^24 in magnitude: the tuned float GEMM then gives the int32 sums ONNX defines. With
// operands of at most `bound` = max|a| * max|b| per product, that holds for sums of
// exact_terms(bound) products (at least 258: 8-bit values are at most 255 from their zero point).
constexpr double kExact = 16777215.0;  // 2^24 - 1
std::int64_t exact_terms(double bound) { return bound < 1.0 ? std::numeric_limits<std::int64_t>::max() : static_cast<std::int64_t>(kExact / bound); }

const models::cnn_cpu::Kernels& kernels() {
  return models::cnn_cpu::kernels_for(models::cnn_cpu::resolve_isa(models::cnn_cpu::Isa::Auto));
}

template <class Floats>
float max_abs(const Floats& v) {
  float m = 0.0f;
  for (const float x : v) m = std::max(m, std::fabs(x));
  return m;
}

// acc[M, N] = a[M, K] b[K, N] of integer values held in floats, exactly: the float GEMM over
// chunks of K short enough to be exact (exact_terms), the chunks added in int32.
void exact_gemm(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, const float* b, std::int32_t* acc, double bound) {
  const std::int64_t chunk = std::min(k, exact_terms(bound));
  if (chunk < 1) {  // one product past 2^24 (16-bit values): int64 sums, plainly
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        std::int64_t sum = 0;
        for (std::int64_t p = 0; p < k; ++p) sum += static_cast<std::int64_t>(a[i * k + p]) * static_cast<std::int64_t>(b[p * n + j]);
        acc[i * n + j] = static_cast<std::int32_t>(static_cast<std::uint32_t>(sum));
      }
    return;
  }
  thread_local std::vector<float> part;
  part.resize(static_cast<std::size_t>(m * n));
  std::fill(acc, acc + m * n, 0);
  for (std::int64_t p = 0; p < k; p += chunk) {
    const std::int64_t kc = std::min(chunk, k - p);
    kernels().gemm(false, static_cast<int>(m), static_cast<int>(n), static_cast<int>(kc), a + p, k, b + p * n, n, part.data(), n,
                   false, {});
    for (std::int64_t e = 0; e < m * n; ++e)
      acc[e] = static_cast<std::int32_t>(static_cast<std::uint32_t>(acc[e]) +
                                         static_cast<std::uint32_t>(static_cast<std::int32_t>(part[static_cast<std::size_t>(e)])));
  }
}

// What the integer matrix products share: A [..., M, K] x B [..., K, N] (numpy broadcasting of
// the leading dimensions), each operand's zero point subtracted (a: one value or one per row
// [M]; b: one or one per column [N]), summed in int32.
class IntegerMatmul {
 public:
  IntegerMatmul(const OpCall& c, const Tensor& a, const Tensor* a_zero, const Tensor& b, const Tensor* b_zero)
      : a_(a), b_(b), az_(c, a_zero, a.shape, -2, "a_zero_point"), bz_(c, b_zero, b.shape, -1, "b_zero_point") {
    if (a.shape.size() < 2 || b.shape.size() < 2)
      c.fail("A " + to_string(a.shape) + " and B " + to_string(b.shape) + " must be at least 2-D");
    m_ = a.shape[a.shape.size() - 2], k_ = a.shape.back(), n_ = b.shape.back();
    if (b.shape[b.shape.size() - 2] != k_) c.fail("inner dimensions differ: " + to_string(a.shape) + " x " + to_string(b.shape));
    rank_ = std::max(a.shape.size(), b.shape.size()) - 2;
    for (std::size_t d = 0; d < rank_; ++d) {
      const std::int64_t x = extent(a.shape, d), z = extent(b.shape, d);
      if (x != z && x != 1 && z != 1) c.fail("batch dimensions do not broadcast: " + to_string(a.shape) + " x " + to_string(b.shape));
      shape_.push_back(std::max(x, z));
      batches_ *= shape_.back();
    }
    shape_.push_back(m_);
    shape_.push_back(n_);
  }
  const std::vector<std::int64_t>& shape() const { return shape_; }
  std::int64_t k() const { return k_; }
  // store(accumulators [M, N] row-major, the output matrix's first element) for each matrix.
  template <class Store>
  void run(Store store) const {
    std::vector<float> am(static_cast<std::size_t>(m_ * k_)), bm(static_cast<std::size_t>(k_ * n_));
    std::vector<std::int32_t> acc(static_cast<std::size_t>(m_ * n_));
    for (std::int64_t q = 0; q < batches_; ++q) {
      const std::int64_t ao = matrix(a_.shape, q) * m_ * k_, bo = matrix(b_.shape, q) * k_ * n_;
      for (std::int64_t e = 0; e < m_ * k_; ++e)
        am[static_cast<std::size_t>(e)] = static_cast<float>(a_.i[static_cast<std::size_t>(ao + e)] - az_.zero(ao + e));
      for (std::int64_t e = 0; e < k_ * n_; ++e)
        bm[static_cast<std::size_t>(e)] = static_cast<float>(b_.i[static_cast<std::size_t>(bo + e)] - bz_.zero(bo + e));
      exact_gemm(m_, n_, k_, am.data(), bm.data(), acc.data(), static_cast<double>(max_abs(am)) * max_abs(bm));
      store(acc, q * m_ * n_);
    }
  }

 private:
  // Extent of the output's leading dimension d in an operand of shape s (1 where s lacks it).
  std::int64_t extent(const std::vector<std::int64_t>& s, std::size_t d) const {
    const std::size_t own = s.size() - 2;
    return d + own >= rank_ ? s[d + own - rank_] : 1;
  }
  std::int64_t matrix(const std::vector<std::int64_t>& s, std::int64_t q) const {  // the operand's matrix for batch q
    std::int64_t index = 0, stride = 1;
    for (std::size_t d = rank_; d-- > 0;) {
      const std::int64_t coord = q % shape_[d], own = extent(s, d);
      q /= shape_[d];
      index += (own == 1 ? 0 : coord) * stride;
      stride *= own;
    }
    return index;
  }
  const Tensor &a_, &b_;
  QuantParam az_, bz_;
  std::int64_t m_ = 0, k_ = 0, n_ = 0, batches_ = 1;
  std::size_t rank_ = 0;
  std::vector<std::int64_t> shape_;
};

void matmul_integer(const OpCall& c) {
  const IntegerMatmul mm(c, integer_input(c, 0), zero_point(c, 2), integer_input(c, 1), zero_point(c, 3));
  Tensor& y = *c.out[0];
  y.reset(ElemType::Int64, mm.shape());
  mm.run([&](const std::vector<std::int32_t>& acc, std::int64_t at) { std::copy(acc.begin(), acc.end(), y.i.begin() + at); });
}

// A requantizing op's output: out[e] = saturate(round((acc[e] + bias) * multiplier[e]) + zero)
// (multiplier[e]: `multipliers` at e, or `multiplier` for all), in float32 as ONNX Runtime's
// kernels compute it. The bounds are integers, which commute with rounding, so the value is
// clamped first and every rounded one lies below 2^22: a loop the compiler vectorises.
void requantize(const std::int32_t* acc, std::int32_t bias, const float* multipliers, float multiplier, float zero,
                QuantizedRange r, std::int64_t count, std::int64_t* out) {
  const float lo = r.lo - zero, hi = r.hi - zero;
  for (std::int64_t e = 0; e < count; ++e) {
    const auto sum = static_cast<std::int32_t>(static_cast<std::uint32_t>(acc[e]) + static_cast<std::uint32_t>(bias));
    float v = static_cast<float>(sum) * (multipliers ? multipliers[e] : multiplier);
    v = v >= lo ? v : lo;
    v = v <= hi ? v : hi;
    out[e] = static_cast<std::int32_t>((v + kRound) - kRound + zero);
  }
}

float one_value(const OpCall& c, const Tensor& t, const char* what) {
  if (t.size() != 1) c.fail(std::string(what) + " must be one value (it has " + std::to_string(t.size()) + ")");
  return t.type == ElemType::Float32 ? t.f[0] : static_cast<float>(t.i[0]);
}

// QLinearMatMul: the int32 product requantized; a's scale one value or one per row, b's one
// or one per column.
void qlinear_matmul(const OpCall& c) {
  const Tensor &a = integer_input(c, 0), &b = integer_input(c, 3);
  const IntegerMatmul mm(c, a, zero_point(c, 2), b, zero_point(c, 5));
  const QuantParam as(c, &c.float_input(1), a.shape, -2, "a_scale"), bs(c, &c.float_input(4), b.shape, -1, "b_scale");
  const float y_scale = one_value(c, c.float_input(6), "y_scale"), y_zero = one_value(c, integer_input(c, 7), "y_zero_point");
  const QuantizedRange r = quantized_range(c);
  const std::int64_t m = mm.shape()[mm.shape().size() - 2], n = mm.shape().back();
  Tensor& y = *c.out[0];
  y.reset(ElemType::Int64, mm.shape());
  std::vector<float> multipliers(static_cast<std::size_t>(n));
  mm.run([&](const std::vector<std::int32_t>& acc, std::int64_t at) {
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t j = 0; j < n; ++j)  // row i of a, column j of b
        multipliers[static_cast<std::size_t>(j)] = as.scale(i * mm.k()) * bs.scale(j) / y_scale;
      requantize(acc.data() + i * n, 0, multipliers.data(), 0.0f, y_zero, r, n, y.i.data() + at + i * n);
    }
  });
}

// What the integer convolutions share: (x - x's zero point, one value) convolved with (w - w's
// zero point, one value or one per output channel), every attribute of Conv, summed exactly in
// int32: the float Conv on those integers, over chunks of input channels short enough to be
// exact (exact_terms), the chunks added. The sums [N, M, positions], in the output's order.
const std::vector<std::int32_t>& integer_conv(const OpCall& c, const Tensor& x, const Tensor* x_zero, const Tensor& w,
                                              const Tensor* w_zero, ConvShape& s) {
  s = conv_shape(c, x.shape, w.shape);
  c.check_kernel_shape(w);
  if (x_zero && x_zero->size() != 1) c.fail("x_zero_point must be one value");
  const std::int64_t xz = x_zero ? x_zero->i[0] : 0;
  const QuantParam wz(c, w_zero, w.shape, 0, "w_zero_point");
  thread_local Tensor xf, wf, xs, ws, part;
  thread_local std::vector<std::int32_t> acc;
  xf.reset(ElemType::Float32, x.shape);
  for (std::size_t e = 0; e < x.i.size(); ++e) xf.f[e] = static_cast<float>(x.i[e] - xz);  // the padding: 0, the zero point
  wf.reset(ElemType::Float32, w.shape);
  wz.runs(w.size(), [&](std::int64_t at, std::int64_t count, std::int64_t k) {
    for (std::int64_t e = at; e < at + count; ++e) wf.f[static_cast<std::size_t>(e)] = static_cast<float>(w.i[static_cast<std::size_t>(e)] - wz.zero_at(k));
  });
  const std::int64_t chunk = exact_terms(static_cast<double>(max_abs(xf.f)) * max_abs(wf.f)) / s.taps;  // input channels
  if (chunk < 1)
    c.fail("values this far from their zero points (16-bit quantization) over a kernel of " + std::to_string(s.taps) +
           " taps: the exact sums this convolution takes are not supported");
  const GraphOpFn conv = find_graph_op("Conv");
  acc.assign(static_cast<std::size_t>(s.n * s.m * s.pixels), 0);
  const auto add = [&](std::int64_t first, std::int64_t channels) {  // part [N, channels, positions] into acc
    for (std::int64_t n = 0; n < s.n; ++n)
      for (std::int64_t e = 0; e < channels * s.pixels; ++e) {
        auto& sum = acc[static_cast<std::size_t>((n * s.m + first) * s.pixels + e)];
        sum = static_cast<std::int32_t>(static_cast<std::uint32_t>(sum) +
                                        static_cast<std::uint32_t>(static_cast<std::int32_t>(part.f[static_cast<std::size_t>(n * channels * s.pixels + e)])));
      }
  };
  if (chunk >= s.cg) {
    const Tensor* in[] = {&xf, &wf};
    Tensor* out[] = {&part};
    conv(OpCall{c.node, in, out});
    add(0, s.m);
    return acc;
  }
  GraphNode single = c.node;  // a chunk of one group's channels
  single.attrs.ints["group"] = 1;
  std::vector<std::int64_t> x_shape = x.shape, w_shape = w.shape;
  for (std::int64_t g = 0; g < s.group; ++g)
    for (std::int64_t c0 = 0; c0 < s.cg; c0 += chunk) {
      const std::int64_t cc = std::min(chunk, s.cg - c0);
      x_shape[1] = w_shape[1] = cc;
      w_shape[0] = s.mg;
      xs.reset(ElemType::Float32, x_shape);
      for (std::int64_t n = 0; n < s.n; ++n)
        std::copy_n(xf.f.data() + (n * s.c + g * s.cg + c0) * s.plane, cc * s.plane, xs.f.data() + n * cc * s.plane);
      ws.reset(ElemType::Float32, w_shape);
      for (std::int64_t o = 0; o < s.mg; ++o)
        std::copy_n(wf.f.data() + ((g * s.mg + o) * s.cg + c0) * s.taps, cc * s.taps, ws.f.data() + o * cc * s.taps);
      const Tensor* in[] = {&xs, &ws};
      Tensor* out[] = {&part};
      conv(OpCall{single, in, out});
      add(g * s.mg, s.mg);
    }
  return acc;
}

void conv_integer(const OpCall& c) {
  const Tensor &x = integer_input(c, 0), &w = integer_input(c, 1);
  ConvShape s;
  const auto& acc = integer_conv(c, x, zero_point(c, 2), w, zero_point(c, 3), s);
  Tensor& y = *c.out[0];
  y.reset(ElemType::Int64, s.output_shape());
  std::copy(acc.begin(), acc.end(), y.i.begin());
}

// QLinearConv: the int32 convolution plus its int32 bias, requantized; w's scale one value or
// one per output channel.
void qlinear_conv(const OpCall& c) {
  const Tensor &x = integer_input(c, 0), &w = integer_input(c, 3);
  if (w.shape.size() < 3) c.fail("w " + to_string(w.shape) + " is not [M, C / group, kernel...]");
  const float x_scale = one_value(c, c.float_input(1), "x_scale"), y_scale = one_value(c, c.float_input(6), "y_scale");
  const float y_zero = one_value(c, integer_input(c, 7), "y_zero_point");
  const QuantParam ws(c, &c.float_input(4), w.shape, 0, "w_scale");
  const Tensor* bias = c.has_input(8) ? &integer_input(c, 8) : nullptr;
  if (bias && bias->size() != w.shape[0])
    c.fail("B has " + std::to_string(bias->size()) + " values for " + std::to_string(w.shape[0]) + " output channels");
  const QuantizedRange r = quantized_range(c);
  ConvShape s;
  const auto& acc = integer_conv(c, x, zero_point(c, 2), w, zero_point(c, 5), s);
  const std::int64_t per_channel = w.size() / std::max<std::int64_t>(1, s.m);  // w's elements per output channel
  Tensor& y = *c.out[0];
  y.reset(ElemType::Int64, s.output_shape());
  for (std::int64_t plane = 0; plane < s.n * s.m; ++plane) {
    const std::int64_t oc = plane % s.m;
    const float multiplier = x_scale * ws.scale(oc * per_channel) / y_scale;
    const auto b = bias ? static_cast<std::int32_t>(bias->i[static_cast<std::size_t>(oc)]) : 0;
    requantize(acc.data() + plane * s.pixels, b, nullptr, multiplier, y_zero, r, s.pixels, y.i.data() + plane * s.pixels);
  }
}

}  // namespace

SPMD_REGISTER_GRAPH_OP("QuantizeLinear", quantize_linear);
SPMD_REGISTER_GRAPH_OP("DequantizeLinear", dequantize_linear);
SPMD_REGISTER_GRAPH_OP("DynamicQuantizeLinear", dynamic_quantize_linear);
SPMD_REGISTER_GRAPH_OP("MatMulInteger", matmul_integer);
SPMD_REGISTER_GRAPH_OP("QLinearMatMul", qlinear_matmul);
SPMD_REGISTER_GRAPH_OP("ConvInteger", conv_integer);
SPMD_REGISTER_GRAPH_OP("QLinearConv", qlinear_conv);

}  // namespace spmd::ops
