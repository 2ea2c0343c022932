#pragma once
// The models as the workloads drive them on one device, whatever the backend. Each object
// lives on (and is only used from) its device's worker thread; it owns that device's
// parameters and buffers, allocated once. Every backend (src/backends/<name>/) fills one
// table of factories, DeviceModels: the CPU backend wraps the host kernels, the CUDA
// backend (a module loaded at run time) keeps everything on the GPU and moves only batches
// and results. make_* below ask the device's own backend.
#include <cstdint>
#include <memory>
#include <vector>

#include "spmd/models/classifier.hpp"
#include "spmd/models/cnn_params.hpp"
#include "spmd/models/logreg_parameters.hpp"
#include "spmd/optim/sgd.hpp"
#include "spmd/runtime/devices.hpp"

namespace spmd::models {

// One ensemble member on one device.
class CnnMember {
 public:
  virtual ~CnnMember() = default;
  // Host -> device: parameters and SGD momentum (both of the member's config).
  virtual void set_state(const CnnParams& params, const CnnParams& momentum) = 0;
  // Device -> host, for checkpoints and digests.
  virtual void get_state(CnnParams& params, CnnParams& momentum) const = 0;
  // One SGD-momentum step on a batch in host memory: images [batch, H * W * C] in [0, 1],
  // labels [batch]. probs_out [batch, classes] (host) receives the softmax of the forward
  // pass before the update. Returns the mean cross-entropy loss. batch <= max_train_batch.
  virtual float train_step(const float* images, const std::int32_t* labels, int batch, const optim::SgdMomentum& sgd,
                           float* probs_out) = 0;
  // Forward only: probs_out [batch, classes] (host). batch <= max_batch.
  virtual void forward(const float* images, int batch, float* probs_out) = 0;
  // As DevicePredictor::decodes_bytes / predict_bytes (classifier.hpp): forward() on images
  // stored one byte per value, decoded through table where the member computes.
  virtual bool decodes_bytes() const { return false; }
  virtual void forward_bytes(const std::uint8_t* images, int batch, const ByteTable& table, float* probs_out);
};

// This device's rows of the logistic-regression data, resident where the device computes.
class LogregShard {
 public:
  virtual ~LogregShard() = default;
  // Partials (loss sum, gradient sums; see models/logreg.hpp) of each chunk of chunk_rows
  // rows of this device's range, for W [features, classes] (host). out: [chunks][partials].
  virtual void chunk_partials(const float* W, double* out) = 0;
};

// The table of factories one backend fills. X [rows, features], labels [rows] on the host:
// a CPU shard views them (they must outlive it), a GPU shard copies them to its device once.
// A logreg predictor keeps its own copy of the parameters (W and the intercept, if any).
class DeviceModels {
 public:
  virtual ~DeviceModels();
  virtual std::unique_ptr<CnnMember> make_cnn_member(const runtime::DeviceInfo& device, const CnnConfig& config,
                                                     int max_batch, int max_train_batch) const = 0;
  virtual std::unique_ptr<LogregShard> make_logreg_shard(const runtime::DeviceInfo& device, const float* X,
                                                         const std::int32_t* labels, std::int64_t rows, int features,
                                                         int classes, std::int64_t chunk_rows) const = 0;
  virtual std::unique_ptr<DevicePredictor> make_logreg_predictor(const runtime::DeviceInfo& device,
                                                                 const LogregParameters& parameters,
                                                                 std::int64_t max_rows) const = 0;
};

// The factories of the device's backend. Defined by the backend registry
// (src/backends/registry.cpp), which sits above this layer: models name no backend.
const DeviceModels& device_models(const runtime::DeviceInfo& device);

inline std::unique_ptr<CnnMember> make_cnn_member(const runtime::DeviceInfo& device, const CnnConfig& config,
                                                  int max_batch, int max_train_batch) {
  return device_models(device).make_cnn_member(device, config, max_batch, max_train_batch);
}
inline std::unique_ptr<LogregShard> make_logreg_shard(const runtime::DeviceInfo& device, const float* X,
                                                      const std::int32_t* labels, std::int64_t rows, int features,
                                                      int classes, std::int64_t chunk_rows) {
  return device_models(device).make_logreg_shard(device, X, labels, rows, features, classes, chunk_rows);
}
inline std::unique_ptr<DevicePredictor> make_logreg_predictor(const runtime::DeviceInfo& device,
                                                              const LogregParameters& parameters,
                                                              std::int64_t max_rows) {
  return device_models(device).make_logreg_predictor(device, parameters, max_rows);
}

}  // namespace spmd::models
