#pragma once
// Runs an ONNX graph on one GPU (graph_plan.hpp decides where each node runs). The graph's
// float constants are uploaded once; the float tensors of a run live in GPU buffers assigned
// once, for the largest batch, by the loader's liveness table (a tensor's buffer serves later
// tensors after its last reader: OnnxGraph::released_after); host nodes run the CPU ops on
// their small int64 tensors every call, and a float they compute is uploaded. Everything is
// queued on one stream; run() waits for the GPU only where a host node's upload does.
// One per device and thread; the stream's GPU must be current.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "graph_op.hpp"
#include "graph_plan.hpp"
#include "spmd/backends/cuda/device_buffer.hpp"

namespace spmd::backends::cuda {

class GraphExecutor {
 public:
  // Throws spmd::Error with plan.unsupported when the GPU cannot run the graph. fixed_inputs:
  // a graph of fixed shapes planned on these inputs (graph_plan.hpp; max_rows is then 1: set
  // them with set_input and run(1)).
  GraphExecutor(std::shared_ptr<const models::OnnxGraph> graph, std::int64_t max_rows, cudaStream_t stream,
                cublasHandle_t cublas, const std::vector<ops::Tensor>* fixed_inputs = nullptr);
  ~GraphExecutor();
  GraphExecutor(const GraphExecutor&) = delete;
  GraphExecutor& operator=(const GraphExecutor&) = delete;

  // The graph input's GPU buffer: [rows, row...] floats for rows <= max_rows.
  float* input();
  // Queues the graph on `rows` rows of input(); output() is valid once the stream has run it.
  void run(std::int64_t rows);
  const DeviceTensor& output() const;
  // Fixed shapes: graph input k (its planned shape), a float uploaded, an int64 kept on the host.
  void set_input(std::size_t k, const ops::Tensor& value);
  // Graph output k on the host, once the stream has run (waits for it).
  ops::Tensor read_output(std::size_t k);
  std::int64_t max_rows() const { return max_rows_; }
  // GPU bytes held: constants, the planned activation buffers and the scratch.
  std::int64_t device_bytes() const;

 private:
  class GrowingScratch;
  void assign_buffers();
  void run_host_node(std::size_t n);
  void run_device_node(std::size_t n);

  std::shared_ptr<const models::OnnxGraph> graph_;
  GraphPlan plan_;
  std::int64_t max_rows_;
  cudaStream_t stream_;
  cublasHandle_t cublas_;
  std::vector<DeviceBuffer<float>> constants_;  // per constant index (empty for int64 ones)
  std::vector<DeviceBuffer<float>> buffers_;    // the planned activation buffers
  std::vector<int> buffer_of_;                  // per tensor: its buffer, or -1
  std::vector<DeviceTensor> device_;            // per tensor: shape and data this run
  std::vector<ops::Tensor> host_;               // per run tensor computed on the host
  std::vector<ops::Tensor> proxy_;              // per device tensor: its shape only, for Shape
  std::vector<CudaGraphOpFn> ops_;              // per node (nullptr on the host)
  std::unique_ptr<GrowingScratch> scratch_;
};

}  // namespace spmd::backends::cuda
