// One run of a graph of fixed shapes on a GPU, for ONNX's node tests (tests/onnx/conformance.cpp).
#include "graph_executor.hpp"
#include "spmd/backends/cuda/cuda_device.hpp"
#include "spmd/backends/cuda/models.hpp"
#include "spmd/backends/cuda/stream.hpp"

namespace spmd::backends::cuda {

std::string onnx_unsupported_cuda_fixed(const models::OnnxGraph& graph, const std::vector<ops::Tensor>& inputs) {
  return plan_graph(graph, &inputs).unsupported;
}

std::vector<ops::Tensor> run_onnx_graph_cuda(const runtime::DeviceInfo& device, std::shared_ptr<const models::OnnxGraph> graph,
                                             const std::vector<ops::Tensor>& inputs) {
  use_cuda_device(device, "CUDA ONNX graph run");
  Stream stream;
  CublasHandle cublas(stream.get());
  GraphExecutor executor(graph, 1, stream.get(), cublas.get(), &inputs);
  for (std::size_t k = 0; k < inputs.size(); ++k) executor.set_input(k, inputs[k]);
  executor.run(1);
  std::vector<ops::Tensor> outputs;
  for (std::size_t k = 0; k < graph->outputs().size(); ++k) outputs.push_back(executor.read_output(k));
  return outputs;
}

}  // namespace spmd::backends::cuda
