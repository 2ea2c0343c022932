#include <string>

#include "spmd/ops/cpu_op.hpp"
#include "spmd/ops/registry.hpp"

namespace spmd::ops {
namespace {

template <class Fn>
Registry<Fn>& table() {
  static Registry<Fn> t;
  return t;
}

}  // namespace

int OpSpec::attr(const std::string& key, int fallback) const {
  const auto it = attrs.find(key);
  return it == attrs.end() ? fallback : it->second;
}

std::size_t ParamSpec::size() const {
  std::size_t n = 1;
  for (int d = 0; d < rank; ++d) n *= static_cast<std::size_t>(shape[static_cast<std::size_t>(d)]);
  return n;
}

OpShape infer_shape(const OpSpec& spec, const Shape& in) { return table<ShapeFn>().find(spec.kind, "shape rule")(spec, in); }

std::unique_ptr<CpuOp> make_cpu_op(const OpSpec& spec, const OpShape& shape, const CpuOpContext& context) {
  return table<CpuFactory>().find(spec.kind, "CPU implementation")(spec, shape, context);
}

std::unique_ptr<CpuLossOp> make_cpu_loss(const OpSpec& spec, const OpShape& shape) {
  return table<CpuLossFactory>().find(spec.kind, "CPU loss implementation")(spec, shape);
}


namespace detail {
bool register_shape(const char* kind, ShapeFn fn) { return table<decltype(fn)>().add(kind, fn); }
bool register_cpu(const char* kind, CpuFactory fn) { return table<decltype(fn)>().add(kind, fn); }
bool register_cpu_loss(const char* kind, CpuLossFactory fn) { return table<decltype(fn)>().add(kind, fn); }
}  // namespace detail

}  // namespace spmd::ops
