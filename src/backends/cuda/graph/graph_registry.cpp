// The CUDA graph ops' table, and the helpers several op files share.
#include "graph_op.hpp"

#include "spmd/ops/registry.hpp"
#include "spmd/runtime/error.hpp"

namespace spmd::backends::cuda {
namespace {

struct CudaGraphOp {
  CudaGraphOpFn run = nullptr;
  CudaGraphOpLimits limits = nullptr;
};

ops::Registry<CudaGraphOp>& table() {
  static ops::Registry<CudaGraphOp> t;
  return t;
}

}  // namespace

const DeviceTensor& CudaGraphCall::input(std::size_t k) const {
  if (!has_input(k)) fail("input " + std::to_string(k) + " is missing or not a float tensor on the GPU");
  return *in[k];
}

float CudaGraphCall::scalar(std::size_t k, float fallback) const {
  if (const ops::Tensor* v = host_value(k); v && v->type == ops::ElemType::Float32 && !v->f.empty()) return v->f[0];
  if (!has_input(k) || in[k]->size() == 0) return fallback;
  float value = fallback;
  SPMD_CHECK_CUDA(cudaMemcpyAsync(&value, in[k]->data, sizeof(float), cudaMemcpyDeviceToHost, stream), "reading a scalar input");
  SPMD_CHECK_CUDA(cudaStreamSynchronize(stream), "reading a scalar input");
  return value;
}

void CudaGraphCall::fail(const std::string& what) const {
  throw Error("ONNX node " + node.name + " (" + node.op + ") on the GPU: " + what);
}

CudaGraphOpFn find_cuda_graph_op(const std::string& op) {
  return table().contains(op) ? table().find(op, "CUDA graph op").run : nullptr;
}
CudaGraphOpLimits find_cuda_graph_op_limits(const std::string& op) {
  return table().contains(op) ? table().find(op, "CUDA graph op").limits : nullptr;
}
std::vector<std::string> cuda_graph_op_names() { return table().kinds(); }
bool register_cuda_graph_op(const char* op, CudaGraphOpFn fn, CudaGraphOpLimits limits) {
  return table().add(op, CudaGraphOp{fn, limits});
}

Dims8 dims_of(const CudaGraphCall& call, const std::vector<std::int64_t>& shape) {
  if (shape.size() > static_cast<std::size_t>(kMaxRank))
    call.fail("a tensor of rank " + std::to_string(shape.size()) + " (the GPU ops take up to " + std::to_string(kMaxRank) + ")");
  Dims8 d;
  d.rank = static_cast<int>(shape.size());
  for (std::size_t k = 0; k < shape.size(); ++k) d.d[k] = shape[k];
  return d;
}

Dims8 strides_of(const CudaGraphCall& call, const std::vector<std::int64_t>& shape) {
  Dims8 s = dims_of(call, shape);
  std::int64_t stride = 1;
  for (int k = s.rank - 1; k >= 0; --k) {
    const std::int64_t extent = s.d[k];
    s.d[k] = stride;
    stride *= extent;
  }
  return s;
}

Dims8 broadcast_strides(const CudaGraphCall& call, const std::vector<std::int64_t>& shape,
                        const std::vector<std::int64_t>& out) {
  Dims8 s = dims_of(call, out);
  if (shape.size() > out.size()) call.fail("an input of higher rank than the output");
  const Dims8 own = strides_of(call, shape);
  const std::size_t lead = out.size() - shape.size();
  for (std::size_t k = 0; k < out.size(); ++k) {
    if (k < lead) {
      s.d[k] = 0;
      continue;
    }
    const std::int64_t extent = shape[k - lead];
    if (extent != 1 && extent != out[k]) call.fail("input " + ops::to_string(shape) + " does not broadcast to " + ops::to_string(out));
    s.d[k] = extent == 1 ? 0 : own.d[k - lead];
  }
  return s;
}

void copy_floats(const CudaGraphCall& call, float* out, const float* in, std::int64_t n) {
  if (n <= 0 || out == in) return;
  SPMD_CHECK_CUDA(cudaMemcpyAsync(out, in, static_cast<std::size_t>(n) * sizeof(float), cudaMemcpyDeviceToDevice, call.stream),
                  "copying a tensor on the GPU");
}

}  // namespace spmd::backends::cuda
