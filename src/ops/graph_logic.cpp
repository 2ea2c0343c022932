// Comparison and logic graph ops, and Where: what exporters emit for masks and for shape
// arithmetic (PyTorch's expand(batch, -1, -1) becomes Equal + Where on the target shape).
// ONNX's bool tensors are int64 0 / 1 here, as bool initializers are read. Elementwise with
// numpy broadcasting: row independent by construction.
#include <cstdint>
#include <vector>

#include "graph_broadcast.hpp"
#include "spmd/ops/graph_op.hpp"

namespace spmd::ops {
namespace {

// y = fn(a, b) as 0 / 1, a and b float or int64 (of one type).
template <class Fn>
void compare(const OpCall& c, Fn fn) {
  const Tensor& a = c.input(0);
  const Tensor& b = c.input(1);
  if (a.type != b.type) c.fail("inputs of different element types");
  const auto b_shape = legacy_aligned(c, a.shape, b.shape);
  const auto shape = broadcast_shape(c, a.shape, b_shape);
  Tensor& y = *c.out[0];
  y.reset(ElemType::Int64, shape);
  const auto sa = broadcast_strides(a.shape, shape), sb = broadcast_strides(b_shape, shape);
  const auto as_int = [fn](auto x, auto z) { return static_cast<std::int64_t>(fn(x, z)); };
  if (a.type == ElemType::Float32) broadcast_apply(shape, a.f.data(), sa, b.f.data(), sb, y.i.data(), as_int);
  else broadcast_apply(shape, a.i.data(), sa, b.i.data(), sb, y.i.data(), as_int);
}

const Tensor& bool_input(const OpCall& c, std::size_t k) {
  const Tensor& t = c.input(k);
  if (t.type != ElemType::Int64) c.fail("input " + std::to_string(k) + " must be bool");
  return t;
}

template <class Fn>
void logic(const OpCall& c, Fn fn) {
  bool_input(c, 0);
  bool_input(c, 1);
  compare(c, [fn](std::int64_t x, std::int64_t z) { return fn(x != 0, z != 0); });
}

void equal(const OpCall& c) { compare(c, [](auto x, auto z) { return x == z; }); }
void greater(const OpCall& c) { compare(c, [](auto x, auto z) { return x > z; }); }
void less(const OpCall& c) { compare(c, [](auto x, auto z) { return x < z; }); }
void greater_or_equal(const OpCall& c) { compare(c, [](auto x, auto z) { return x >= z; }); }
void less_or_equal(const OpCall& c) { compare(c, [](auto x, auto z) { return x <= z; }); }
void and_op(const OpCall& c) { logic(c, [](bool x, bool z) { return x && z; }); }
void or_op(const OpCall& c) { logic(c, [](bool x, bool z) { return x || z; }); }
void xor_op(const OpCall& c) { logic(c, [](bool x, bool z) { return x != z; }); }

void not_op(const OpCall& c) {
  const Tensor& x = bool_input(c, 0);
  Tensor& y = *c.out[0];
  y.reset(ElemType::Int64, x.shape);
  for (std::size_t k = 0; k < x.i.size(); ++k) y.i[k] = x.i[k] == 0;
}

// Where(condition, X, Y): X where the condition holds, else Y; the three broadcast together.
void where(const OpCall& c) {
  const Tensor& cond = bool_input(c, 0);
  const Tensor& x = c.input(1);
  const Tensor& z = c.input(2);
  if (x.type != z.type) c.fail("X and Y of different element types");
  const auto shape = broadcast_shape(c, broadcast_shape(c, cond.shape, x.shape), z.shape);
  const auto sc = broadcast_strides(cond.shape, shape), sx = broadcast_strides(x.shape, shape),
             sz = broadcast_strides(z.shape, shape);
  Tensor& y = *c.out[0];
  y.reset(x.type, shape);
  // Odometer over the output, the three source offsets kept up to date (no index arithmetic
  // per element).
  std::vector<std::int64_t> index(shape.size(), 0);
  std::int64_t oc = 0, ox = 0, oz = 0;
  const bool floats = y.type == ElemType::Float32;
  const std::int64_t size = y.size();
  for (std::int64_t o = 0; o < size; ++o) {
    const bool pick_x = cond.i[static_cast<std::size_t>(oc)] != 0;
    const auto u = static_cast<std::size_t>(o);
    if (floats) y.f[u] = pick_x ? x.f[static_cast<std::size_t>(ox)] : z.f[static_cast<std::size_t>(oz)];
    else y.i[u] = pick_x ? x.i[static_cast<std::size_t>(ox)] : z.i[static_cast<std::size_t>(oz)];
    for (std::size_t k = shape.size(); k-- > 0;) {
      oc += sc[k], ox += sx[k], oz += sz[k];
      if (++index[k] < shape[k]) break;
      oc -= sc[k] * shape[k], ox -= sx[k] * shape[k], oz -= sz[k] * shape[k];
      index[k] = 0;
    }
  }
}

}  // namespace

SPMD_REGISTER_GRAPH_OP("Equal", equal);
SPMD_REGISTER_GRAPH_OP("Greater", greater);
SPMD_REGISTER_GRAPH_OP("Less", less);
SPMD_REGISTER_GRAPH_OP("GreaterOrEqual", greater_or_equal);
SPMD_REGISTER_GRAPH_OP("LessOrEqual", less_or_equal);
SPMD_REGISTER_GRAPH_OP("And", and_op);
SPMD_REGISTER_GRAPH_OP("Or", or_op);
SPMD_REGISTER_GRAPH_OP("Xor", xor_op);
SPMD_REGISTER_GRAPH_OP("Not", not_op);
SPMD_REGISTER_GRAPH_OP("Where", where);

}  // namespace spmd::ops
