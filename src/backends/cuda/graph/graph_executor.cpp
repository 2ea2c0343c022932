#include "graph_executor.hpp"

#include <algorithm>

#include "spmd/runtime/error.hpp"

namespace spmd::backends::cuda {

class GraphExecutor::GrowingScratch final : public Scratch {
 public:
  float* floats(std::size_t n) override {
    if (n > buffer_.size()) buffer_ = DeviceBuffer<float>(n, "ONNX graph scratch (im2col)");
    return buffer_.data();
  }
  std::size_t bytes() const { return buffer_.bytes(); }

 private:
  DeviceBuffer<float> buffer_;
};

GraphExecutor::GraphExecutor(std::shared_ptr<const models::OnnxGraph> graph, std::int64_t max_rows, cudaStream_t stream,
                             cublasHandle_t cublas, const std::vector<ops::Tensor>* fixed_inputs)
    : graph_(std::move(graph)), plan_(plan_graph(*graph_, fixed_inputs)),
      max_rows_(fixed_inputs ? 1 : std::max<std::int64_t>(1, max_rows)),
      stream_(stream), cublas_(cublas), scratch_(std::make_unique<GrowingScratch>()) {
  if (!plan_.unsupported.empty())
    throw Error("ONNX model '" + graph_->path() + "' cannot run on the GPU: " + plan_.unsupported);
  const std::size_t count = graph_->tensor_count();
  device_.resize(count);
  host_.resize(count);
  proxy_.resize(count);
  const auto& constants = graph_->constants();
  for (std::size_t k = 0; k < constants.size(); ++k) {
    constants_.emplace_back();
    if (constants[k].type != ops::ElemType::Float32 || constants[k].f.empty()) continue;
    constants_.back() = DeviceBuffer<float>(constants[k].f.size(), "ONNX graph weights");
    constants_.back().upload(constants[k].f.data(), constants[k].f.size(), stream_);
    device_[k] = {constants[k].shape, constants_.back().data()};
  }
  for (const auto& node : graph_->nodes()) ops_.push_back(find_cuda_graph_op(node.op));
  assign_buffers();
  SPMD_CHECK_CUDA(cudaStreamSynchronize(stream_), "uploading an ONNX graph's weights");
}

GraphExecutor::~GraphExecutor() = default;

// Buffers for the largest batch, reused by liveness: a tensor takes the smallest free buffer
// that holds it (or grows the largest free one, or adds one); its buffer is free again after
// the last node that reads it.
void GraphExecutor::assign_buffers() {
  std::vector<std::size_t> sizes;
  std::vector<int> free;
  buffer_of_.assign(graph_->tensor_count(), -1);
  const auto take = [&](int k) {
    const auto need = static_cast<std::size_t>(plan_.tensors[static_cast<std::size_t>(k)].size(max_rows_));
    const auto size_of = [&](auto it) { return sizes[static_cast<std::size_t>(*it)]; };
    auto best = free.end();
    for (auto it = free.begin(); it != free.end(); ++it) {
      const bool better = best == free.end() ||
                          (size_of(it) >= need ? size_of(best) < need || size_of(it) < size_of(best)
                                               : size_of(best) < need && size_of(it) > size_of(best));
      if (better) best = it;
    }
    int b = static_cast<int>(sizes.size());
    if (best != free.end()) {
      b = *best;
      free.erase(best);
    } else {
      sizes.push_back(0);
    }
    sizes[static_cast<std::size_t>(b)] = std::max(sizes[static_cast<std::size_t>(b)], need);
    buffer_of_[static_cast<std::size_t>(k)] = b;
  };
  for (std::size_t k = 0; k < graph_->inputs().size(); ++k)
    if (plan_.tensors[static_cast<std::size_t>(graph_->input_tensor(k))].device) take(graph_->input_tensor(k));
  const auto& nodes = graph_->nodes();
  for (std::size_t n = 0; n < nodes.size(); ++n) {
    for (const int k : nodes[n].outputs)
      if (plan_.tensors[static_cast<std::size_t>(k)].device) take(k);
    for (const int k : graph_->released_after(n))
      if (buffer_of_[static_cast<std::size_t>(k)] >= 0) free.push_back(buffer_of_[static_cast<std::size_t>(k)]);
  }
  for (const std::size_t s : sizes) buffers_.emplace_back(std::max<std::size_t>(s, 1), "ONNX graph activations");
}

float* GraphExecutor::input() {
  const auto k = static_cast<std::size_t>(graph_->input_tensor(0));
  return buffers_[static_cast<std::size_t>(buffer_of_[k])].data();
}

const DeviceTensor& GraphExecutor::output() const { return device_[static_cast<std::size_t>(graph_->output_tensor(0))]; }

void GraphExecutor::set_input(std::size_t k, const ops::Tensor& value) {
  const auto t = static_cast<std::size_t>(graph_->input_tensor(k));
  if (value.shape != plan_.tensors[t].shape(1))
    throw Error("ONNX graph on the GPU: input " + std::to_string(k) + " is " + ops::to_string(value.shape) + "; it was planned for " +
                ops::to_string(plan_.tensors[t].shape(1)));
  if (!plan_.tensors[t].device) {
    host_[t] = value;
    return;
  }
  if (!value.f.empty()) buffers_[static_cast<std::size_t>(buffer_of_[t])].upload(value.f.data(), value.f.size(), stream_);
}

ops::Tensor GraphExecutor::read_output(std::size_t k) {
  const auto t = static_cast<std::size_t>(graph_->output_tensor(k));
  if (t < graph_->constants().size()) return graph_->constants()[t];
  if (!plan_.tensors[t].device) return host_[t];
  ops::Tensor out;
  out.reset(ops::ElemType::Float32, device_[t].shape);
  if (!out.f.empty())
    SPMD_CHECK_CUDA(cudaMemcpyAsync(out.f.data(), device_[t].data, out.f.size() * sizeof(float), cudaMemcpyDeviceToHost, stream_),
                    "copying an ONNX graph's output to the host");
  SPMD_CHECK_CUDA(cudaStreamSynchronize(stream_), "running an ONNX graph on the GPU");
  return out;
}

std::int64_t GraphExecutor::device_bytes() const {
  std::size_t bytes = scratch_->bytes();
  for (const auto& b : constants_) bytes += b.bytes();
  for (const auto& b : buffers_) bytes += b.bytes();
  return static_cast<std::int64_t>(bytes);
}

void GraphExecutor::run(std::int64_t rows) {
  if (rows < 1 || rows > max_rows_)
    throw Error("ONNX graph on the GPU: a batch of " + std::to_string(rows) + " rows; it was planned for 1.." +
                std::to_string(max_rows_));
  for (std::size_t k = graph_->constants().size(); k < device_.size(); ++k) {
    const TensorPlan& t = plan_.tensors[k];
    if (!t.device) continue;
    device_[k].shape = t.shape(rows);
    device_[k].data = buffers_[static_cast<std::size_t>(buffer_of_[k])].data();
    proxy_[k].shape = device_[k].shape;
  }
  const auto& nodes = graph_->nodes();
  for (std::size_t n = 0; n < nodes.size(); ++n) {
    if (plan_.host_node[n]) run_host_node(n);
    else run_device_node(n);
  }
}

// The CPU op on host values (a device tensor's input is its shape only: Shape and Size read
// no data); a float it gives is uploaded for the GPU nodes after it.
void GraphExecutor::run_host_node(std::size_t n) {
  const ops::GraphNode& node = graph_->nodes()[n];
  const std::size_t constants = graph_->constants().size();
  std::vector<const ops::Tensor*> in;
  std::vector<ops::Tensor*> out;
  for (const int k : node.inputs) {
    const auto u = static_cast<std::size_t>(k);
    in.push_back(k < 0 ? nullptr : u < constants ? &graph_->constants()[u] : plan_.tensors[u].device ? &proxy_[u] : &host_[u]);
  }
  for (const int k : node.outputs) out.push_back(&host_[static_cast<std::size_t>(k)]);
  ops::find_graph_op(node.op)(ops::OpCall{node, in, out});
  for (const int k : node.outputs) {
    const auto u = static_cast<std::size_t>(k);
    if (!plan_.tensors[u].device) continue;
    if (host_[u].shape != device_[u].shape) throw Error("ONNX node " + node.name + " (" + node.op + "): its output's shape differs from the plan");
    buffers_[static_cast<std::size_t>(buffer_of_[u])].upload(host_[u].f.data(), host_[u].f.size(), stream_);
  }
}

void GraphExecutor::run_device_node(std::size_t n) {
  const ops::GraphNode& node = graph_->nodes()[n];
  const std::size_t constants = graph_->constants().size();
  std::vector<const DeviceTensor*> in;
  std::vector<const ops::Tensor*> host;
  std::vector<DeviceTensor*> out;
  for (const int k : node.inputs) {
    const auto u = static_cast<std::size_t>(k);
    const bool on_device = k >= 0 && device_[u].data != nullptr;
    in.push_back(on_device ? &device_[u] : nullptr);
    host.push_back(k < 0 ? nullptr : u < constants ? &graph_->constants()[u] : plan_.tensors[u].device ? nullptr : &host_[u]);
  }
  for (const int k : node.outputs) out.push_back(&device_[static_cast<std::size_t>(k)]);
  ops_[n](CudaGraphCall{node, in, host, out, stream_, cublas_, *scratch_});
}

}  // namespace spmd::backends::cuda
