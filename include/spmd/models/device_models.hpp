#pragma once
// The models as the workloads drive them on one device, whatever the backend. Each object
// lives on (and is only used from) its device's worker thread; it owns that device's
// parameters and buffers, allocated once. CPU implementations wrap the host kernels;
// CUDA implementations (src/models/*_cuda.cu) keep everything on the GPU and move only
// batches and results. make_* pick by device.backend.
#include <cstdint>
#include <memory>

#include "spmd/models/cnn_params.hpp"
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
};

std::unique_ptr<CnnMember> make_cnn_member(const runtime::DeviceInfo& device, const CnnConfig& config, int max_batch,
                                           int max_train_batch);

// This device's rows of the logistic-regression data, resident where the device computes.
class LogregShard {
 public:
  virtual ~LogregShard() = default;
  // Partials (loss sum, gradient sums; see models/logreg.hpp) of each chunk of chunk_rows
  // rows of this device's range, for W [features, classes] (host). out: [chunks][partials].
  virtual void chunk_partials(const float* W, double* out) = 0;
};

// X [rows, features], labels [rows] on the host; a CPU shard views them (they must
// outlive it), a CUDA shard copies them to its GPU once.
std::unique_ptr<LogregShard> make_logreg_shard(const runtime::DeviceInfo& device, const float* X, const std::int32_t* labels,
                                               std::int64_t rows, int features, int classes, std::int64_t chunk_rows);

#ifdef SPMD_HAVE_CUDA
// CUDA implementations (defined in src/models/*_cuda.cu).
std::unique_ptr<CnnMember> make_cnn_member_cuda(const runtime::DeviceInfo& device, const CnnConfig& config,
                                                int max_batch, int max_train_batch);
std::unique_ptr<LogregShard> make_logreg_shard_cuda(const runtime::DeviceInfo& device, const float* X,
                                                    const std::int32_t* labels, std::int64_t rows, int features,
                                                    int classes, std::int64_t chunk_rows);
#endif

}  // namespace spmd::models
