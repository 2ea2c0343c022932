#pragma once
// The CUDA backend's device models: what its factory table (cuda_backend.cpp) hands out.
// Each object keeps its parameters and buffers on one GPU and moves only batches and
// results; semantics are those of the interfaces in models/device_models.hpp and
// models/classifier.hpp. Declared here for the backend's own table and the CUDA tests.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "spmd/models/classifier.hpp"
#include "spmd/models/device_models.hpp"
#include "spmd/models/onnx_predictor.hpp"
#include "spmd/runtime/devices.hpp"

namespace spmd::backends::cuda {

// Defined in cnn_member.cu.
std::unique_ptr<models::CnnMember> make_cnn_member_cuda(const runtime::DeviceInfo& device, const models::CnnConfig& config,
                                                int max_batch, int max_train_batch);

// Defined in logreg.cu. X and labels are copied to the GPU once.
std::unique_ptr<models::LogregShard> make_logreg_shard_cuda(const runtime::DeviceInfo& device, const float* X,
                                                    const std::int32_t* labels, std::int64_t rows, int features,
                                                    int classes, std::int64_t chunk_rows,
                                                    const double* row_weights = nullptr);

// Defined in logreg.cu: the same in float64 (the float64 kernels of models/logreg.hpp).
std::unique_ptr<models::LogregShard64> make_logreg_shard64_cuda(const runtime::DeviceInfo& device, const float* X,
                                                                const std::int32_t* labels, std::int64_t rows,
                                                                int features, int classes, std::int64_t chunk_rows,
                                                                const double* row_weights = nullptr);

// W [features, classes] copied to the device's GPU once. predict() takes up to max_rows
// host rows per call and works through them in tiles, so GPU memory stays bounded whatever
// max_rows is. The logits are logreg_predict's bit for bit (the arithmetic of
// logreg_kernel_spec.hpp); the host turns them into classes and probabilities with
// logreg_logits_to_outputs (intercept included), so both are the CPU predictor's bits.
// Throws spmd::Error for bad shapes (features < 1, classes < 1, W.size() != features *
// classes, a bias of another size than classes, max_rows < 0) and, with a clear message,
// when the device is not a usable GPU.
std::unique_ptr<models::DevicePredictor> make_logreg_predictor_cuda(const runtime::DeviceInfo& device,
                                                            const models::LogregParameters& parameters,
                                                            std::int64_t max_rows);

// Defined in graph/onnx_predictor.cu: eval --model onnx with the graph on the GPU (its
// weights uploaded once, its activations in buffers planned once for up to 2048 rows per run);
// outputs within 1e-5 of the CPU predictor's (cuBLAS's summation order is not the CPU's). Throws
// spmd::Error naming the node and op when the GPU cannot run the graph (onnx_unsupported_cuda).
std::unique_ptr<models::DevicePredictor> make_onnx_predictor_cuda(const runtime::DeviceInfo& device,
                                                                  const models::OnnxPredictorSpec& spec,
                                                                  std::int64_t max_rows);
// "" when the GPU runs every node of the graph, else why not (graph/graph_plan.hpp). Needs no GPU.
std::string onnx_unsupported_cuda(const models::OnnxGraph& graph);

// Defined in graph/graph_run.cpp, for ONNX's node tests: a graph of fixed shapes on these
// inputs (one per graph input, float or int64). The support check (needs no GPU), and one run
// on the GPU giving every graph output on the host (spmd::Error with the check's reason when
// the GPU cannot run it).
std::string onnx_unsupported_cuda_fixed(const models::OnnxGraph& graph, const std::vector<ops::Tensor>& inputs);
std::vector<ops::Tensor> run_onnx_graph_cuda(const runtime::DeviceInfo& device, std::shared_ptr<const models::OnnxGraph> graph,
                                             const std::vector<ops::Tensor>& inputs);

}  // namespace spmd::backends::cuda
