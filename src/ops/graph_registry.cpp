#include <algorithm>
#include <array>
#include <map>
#include <stdexcept>

#include "spmd/ops/graph_op.hpp"
#include "spmd/runtime/error.hpp"
#include "spmd/runtime/memory_limits.hpp"

namespace spmd::ops {

namespace {
std::map<std::string, GraphOpFn>& table() {
  static std::map<std::string, GraphOpFn> ops;  // filled at load time, read-only afterwards
  return ops;
}
}  // namespace

namespace {
thread_local std::array<FloatBuffer, static_cast<std::size_t>(Scratch::Count)> scratch_buffers;
}  // namespace

FloatBuffer& scratch(Scratch which) { return scratch_buffers[static_cast<std::size_t>(which)]; }

std::int64_t scratch_bytes() {
  std::int64_t bytes = 0;
  for (const auto& b : scratch_buffers) bytes += static_cast<std::int64_t>(b.capacity() * sizeof(float));
  return bytes;
}

std::int64_t Tensor::size() const {
  std::int64_t n = 1;
  for (const auto d : shape) n *= d;
  return n;
}

void Tensor::reset(ElemType t, std::vector<std::int64_t> dims) {
  // A damaged or hand-edited model can compute a negative or an absurd shape (a Reshape's
  // constant, a Resize's scale, a pad of 2^20): refused where every output is made, not handed to
  // the allocator, whose pages the kernel's OOM killer would take back with the rank (a
  // logic_error: the graph runner names the node). The room is the node's when first asked.
  constexpr std::int64_t kMaxElements = std::int64_t{1} << 40;
  static const runtime::MemoryRoom room = [] {
    const runtime::MemoryRoom node = runtime::node_memory_room(), process = runtime::address_space_room();
    return node.bytes <= process.bytes ? node : process;
  }();
  std::int64_t count = 1;
  for (const std::int64_t d : dims) {
    if (d < 0) throw std::length_error("a tensor of shape " + to_string(dims) + ": a negative dimension");
    if (d > 0 && count > kMaxElements / d) throw std::length_error("a tensor of shape " + to_string(dims) + ": past 2^40 elements");
    count *= d;
  }
  if (static_cast<double>(count) * 4.0 > room.bytes)  // 4 bytes an element: a lower bound for int64 tensors too
    throw std::length_error("a tensor of shape " + to_string(dims) + " (" + runtime::format_bytes(4.0 * count) +
                            "): more than the " + runtime::format_bytes(room.bytes) + " free (" + room.source + ")");
  type = t;
  shape = std::move(dims);
  if (t == ElemType::Float32) f.resize(static_cast<std::size_t>(size()));
  else i.resize(static_cast<std::size_t>(size()));
}

std::vector<std::int64_t> Tensor::as_ints() const {
  if (type == ElemType::Int64) return {i.begin(), i.begin() + size()};
  std::vector<std::int64_t> v(static_cast<std::size_t>(size()));
  for (std::size_t k = 0; k < v.size(); ++k) v[k] = static_cast<std::int64_t>(f[k]);
  return v;
}

std::string to_string(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t k = 0; k < shape.size(); ++k) s += (k ? ", " : "") + std::to_string(shape[k]);
  return s + "]";
}

std::int64_t Attrs::i(const std::string& name, std::int64_t fallback) const {
  const auto it = ints.find(name);
  return it == ints.end() ? fallback : it->second;
}
float Attrs::f(const std::string& name, float fallback) const {
  const auto it = floats.find(name);
  return it == floats.end() ? fallback : it->second;
}
std::vector<std::int64_t> Attrs::ints_or(const std::string& name, std::vector<std::int64_t> fallback) const {
  const auto it = int_lists.find(name);
  return it == int_lists.end() ? fallback : it->second;
}
std::string Attrs::s(const std::string& name, const std::string& fallback) const {
  const auto it = strings.find(name);
  return it == strings.end() ? fallback : it->second;
}

const Tensor& OpCall::input(std::size_t k) const {
  if (!has_input(k)) fail("input " + std::to_string(k) + " is missing");
  return *in[k];
}

const Tensor& OpCall::float_input(std::size_t k) const {
  const Tensor& t = input(k);
  if (t.type != ElemType::Float32) fail("input " + std::to_string(k) + " is an integer tensor; this op computes in float32");
  return t;
}

void OpCall::fail(const std::string& what) const {
  throw Error("ONNX node '" + node.name + "' (" + node.op + "): " + what);
}

std::size_t OpCall::axis(std::int64_t value, std::size_t rank) const {
  const auto r = static_cast<std::int64_t>(rank);
  if (value < -r || value >= r) fail("axis " + std::to_string(value) + " is outside a tensor of rank " + std::to_string(rank));
  return static_cast<std::size_t>(value < 0 ? value + r : value);
}

std::vector<std::int64_t> OpCall::ints_per_dim(const std::string& name, std::size_t count, std::int64_t fallback) const {
  auto v = node.attrs.ints_or(name, {});
  if (v.empty()) v.assign(count, fallback);
  if (v.size() != count) fail(name + " must have " + std::to_string(count) + " values");
  check_window_ints(name, v);
  return v;
}

void OpCall::check_window_ints(const std::string& name, const std::vector<std::int64_t>& values) const {
  const std::int64_t least = name == "kernel_shape" || name == "strides" || name == "dilations" || name == "blocksize" ? 1
                             : name == "pads" || name == "output_padding"                        ? 0
                                                                                                 : INT64_MIN;
  // No model's window comes near 2^24; past it, a kernel's span ((k - 1) * dilation + 1) could overflow.
  constexpr std::int64_t kMost = std::int64_t{1} << 24;
  if (least == INT64_MIN) return;
  if (std::any_of(values.begin(), values.end(), [least](std::int64_t v) { return v < least || v > kMost; }))
    fail(name + " " + to_string(values) + ": each must be at least " + std::to_string(least) + " and at most 2^24");
}

void OpCall::check_kernel_shape(const Tensor& weights) const {
  const std::vector<std::int64_t> spatial(weights.shape.begin() + std::min<std::size_t>(2, weights.shape.size()), weights.shape.end());
  check_window_ints("kernel_shape", spatial);
  const auto given = node.attrs.ints_or("kernel_shape", spatial);
  if (given != spatial) fail("kernel_shape " + to_string(given) + " is not the weights' " + to_string(weights.shape) + " spatial shape");
}

GraphOpFn find_graph_op(const std::string& op) {
  const auto it = table().find(op);
  return it == table().end() ? nullptr : it->second;
}

std::vector<std::string> graph_op_names() {
  std::vector<std::string> names;
  for (const auto& [name, fn] : table()) names.push_back(name);
  return names;
}

bool detail::register_graph_op(const char* op, GraphOpFn fn) {
  if (!table().emplace(op, fn).second) throw Error(std::string("graph op '") + op + "' registered twice");
  return true;
}

}  // namespace spmd::ops
