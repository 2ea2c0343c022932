#include <algorithm>
#include <array>
#include <atomic>
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
thread_local double granted_in_scope = 0;  // bytes granted since the innermost OpMemoryScope opened
thread_local bool scope_open = false;

// Only growth counts, against what is free now plus what this op was already granted: a buffer
// reused at its size asks for nothing, and earlier ops' outputs, written, have left the node's
// free memory; this op's own are not yet written. Every rank of the node and every device of a
// rank asks for the same size at about the same moment (SPMD), so the node must hold it that
// many times, and the process as many times as it has devices.
// `what` names the buffer for a refusal; it is called only then (every op's outputs come here).
template <class What>
void require_room(const What& what, double grow_bytes) {
  constexpr double kAskFrom = 64.0 * 1024 * 1024;  // below this, reading /proc costs more than it saves
  if (grow_bytes <= 0) return;
  const double op_need = scope_open ? granted_in_scope + grow_bytes : grow_bytes;
  if (grow_bytes >= kAskFrom) {
    const runtime::MemorySharers sharers = runtime::memory_sharers();
    const double node_need = op_need * sharers.total(), process_need = grow_bytes * sharers.devices_per_rank;
    const runtime::MemoryRoom node = runtime::node_memory_room(), process = runtime::address_space_room();
    // RLIMIT_AS's room is less the address space already mapped: this op's grants are in it.
    const bool node_short = node_need > node.bytes;
    if (node_short || process_need > process.bytes) {
      const runtime::MemoryRoom& room = node_short ? node : process;
      std::string need = runtime::format_bytes(grow_bytes) + " more";
      if (node_short && op_need > grow_bytes) need += "; " + runtime::format_bytes(op_need) + " with the op's other new buffers";
      const int times = node_short ? sharers.total() : sharers.devices_per_rank;
      if (times > 1)
        need += "; " + runtime::format_bytes(node_short ? node_need : process_need) + " for " +
                (node_short ? "this node's " + std::to_string(sharers.ranks_on_node) + " rank(s) x " +
                                  std::to_string(sharers.devices_per_rank) + " device(s)"
                            : "this rank's " + std::to_string(times) + " devices") + " running it at once";
      throw TooLarge(what() + " (" + need + "): more than the " + runtime::format_bytes(room.bytes) + " free (" + room.source + ")");
    }
  }
  if (scope_open) granted_in_scope = op_need;
}

// The element count of `dims`, or TooLarge for a negative dimension or past 2^40 elements.
template <class What>
std::int64_t element_count(const std::vector<std::int64_t>& dims, const What& what) {
  constexpr std::int64_t kMaxElements = std::int64_t{1} << 40;
  std::int64_t count = 1;
  for (const std::int64_t d : dims) {
    if (d < 0) throw TooLarge(what() + ": a negative dimension");
    if (d > 0 && count > kMaxElements / d) throw TooLarge(what() + ": past 2^40 elements");
    count *= d;
  }
  return count;
}
}  // namespace

namespace {
std::atomic<std::int64_t> range_limit{kDefaultMaxRangeLength};
}  // namespace

void set_max_range_length(std::int64_t length) {
  if (length < 1) throw Error("--max-range-length must be >= 1 (got " + std::to_string(length) + ")");
  range_limit.store(length);
}
std::int64_t max_range_length() { return range_limit.load(); }

OpMemoryScope::OpMemoryScope() : outer_granted_(granted_in_scope), outer_open_(scope_open) {
  granted_in_scope = 0;
  scope_open = true;
}
OpMemoryScope::~OpMemoryScope() {
  granted_in_scope = outer_granted_;
  scope_open = outer_open_;
}

FloatBuffer& scratch(Scratch which, std::int64_t floats) {
  FloatBuffer& buffer = scratch_buffers[static_cast<std::size_t>(which)];
  const auto what = [floats] { return "a scratch buffer of " + std::to_string(floats) + " floats"; };
  if (floats < 0 || floats > std::int64_t{1} << 40) throw TooLarge(what() + ": negative, or past 2^40");
  require_room(what, 4.0 * (static_cast<double>(floats) - static_cast<double>(buffer.capacity())));
  if (static_cast<std::size_t>(floats) > buffer.capacity()) FloatBuffer().swap(buffer);  // as Tensor::reset
  buffer.resize(static_cast<std::size_t>(floats));
  return buffer;
}

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
  const auto what = [&dims] { return "a tensor of shape " + to_string(dims); };
  const std::int64_t count = element_count(dims, what);
  const double held = t == ElemType::Float32 ? 4.0 * static_cast<double>(f.capacity()) : 8.0 * static_cast<double>(i.capacity());
  require_room(what, (t == ElemType::Float32 ? 4.0 : 8.0) * static_cast<double>(count) - held);
  type = t;
  shape = std::move(dims);
  // Growing past the capacity frees first: the values are unspecified, so a reallocation's copy
  // of the old ones would be wasted time and, for a moment, both buffers' memory.
  const auto n = static_cast<std::size_t>(count);
  if (t == ElemType::Float32) {
    if (n > f.capacity()) FloatBuffer().swap(f);
    f.resize(n);
  } else {
    if (n > i.capacity()) std::vector<std::int64_t>().swap(i);
    i.resize(n);
  }
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
