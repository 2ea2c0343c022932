#pragma once
// The op library: layers as ops that models are sequences of (the ensemble's CNN, built from
// a CnnConfig by CnnLayout; the ONNX import adds its own ops here). An op is a kind (the
// registry's key, "conv2d"), integer attributes, and a shape rule: given one row's input
// shape it states the output shape and its parameter tensors. Each backend implements the
// kinds it runs (cpu_op.hpp here; src/backends/cuda/ops for the CUDA module), each op kind in
// its own file that registers itself with one SPMD_REGISTER_* line.
//
// Tensors are float32, NHWC per row (batch rows outermost); a vector of features is
// [1, 1, features], so flattening an image for a dense layer moves no data.
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace spmd::ops {

// One row's tensor, NHWC.
struct Shape {
  int h = 1, w = 1, c = 1;
  std::int64_t size() const { return static_cast<std::int64_t>(h) * w * c; }
  friend bool operator==(const Shape&, const Shape&) = default;
};

// A node of a model: which op, under which name its parameters are stored (Flax's "Conv_0";
// empty for ops without parameters), and its attributes ("kernel", "stride", "relu", ...).
struct OpSpec {
  std::string kind;
  std::string name;
  std::map<std::string, int> attrs;
  // The attribute, or `fallback` when the node does not set it.
  int attr(const std::string& key, int fallback = 0) const;
};

// A parameter tensor of an op, in its storage layout (HWIO kernels, [in, out] dense kernels).
struct ParamSpec {
  std::string name;          // OpSpec::name + "/kernel"
  int rank;                  // 1, 2 or 4
  std::array<int, 4> shape;  // first `rank` entries used
  int fan_in;                // for kernels (lecun_normal); 0 for biases
  std::size_t size() const;
};

// What an op makes of its input; computed once when a model is built and handed to every
// backend's implementation.
struct OpShape {
  Shape in, out;
  std::vector<ParamSpec> params;  // in storage order
  std::int64_t multiply_adds = 0;  // of one row's forward pass
};

// A kind's shape rule. Throws spmd::Error naming the node and the attribute or input it
// cannot take.
using ShapeFn = OpShape (*)(const OpSpec& spec, const Shape& in);

// The kind's shape rule; spmd::Error naming the kind (and the kinds there are) when none is
// registered.
OpShape infer_shape(const OpSpec& spec, const Shape& in);

namespace detail {
bool register_shape(const char* kind, ShapeFn fn);
}  // namespace detail

}  // namespace spmd::ops

// At namespace scope in the op's file: registration at library load, no central list.
#define SPMD_OPS_CONCAT2(a, b) a##b
#define SPMD_OPS_CONCAT(a, b) SPMD_OPS_CONCAT2(a, b)
#define SPMD_REGISTER_OP_SHAPE(kind, fn) \
  [[maybe_unused]] static const bool SPMD_OPS_CONCAT(spmd_op_shape_, __LINE__) = ::spmd::ops::detail::register_shape(kind, fn)
