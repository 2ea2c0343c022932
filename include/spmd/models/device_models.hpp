#pragma once
// The models as the workloads drive them on one device, whatever the backend. Each object
// lives on (and is only used from) its device's worker thread; it owns that device's
// parameters and buffers, allocated once. Every backend (src/backends/<name>/) provides a
// factory per kind it runs (DeviceModels below): the CPU backend wraps the host kernels, the
// CUDA backend (a module loaded at run time) keeps everything on the GPU and moves only
// batches and results. make_* below ask the device's own backend.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "spmd/models/classifier.hpp"
#include "spmd/models/cnn_params.hpp"
#include "spmd/models/logreg_parameters.hpp"
#include "spmd/models/logreg_sparse.hpp"
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
  // train_step on such images: the bits of train_step on their decoded floats.
  virtual float train_step_bytes(const std::uint8_t* images, const std::int32_t* labels, int batch,
                                 const ByteTable& table, const optim::SgdMomentum& sgd, float* probs_out);
};

// This device's rows of the logistic-regression data, resident where the device computes.
class LogregShard {
 public:
  virtual ~LogregShard() = default;
  // Partials (loss sum, gradient sums; see models/logreg.hpp) of each chunk of chunk_rows
  // rows of this device's range, for W [features, classes] (host). out: [chunks][partials].
  virtual void chunk_partials(const float* W, double* out) = 0;
  // The same partials added up, where they were computed, to the canonical nodes of this
  // device's chunks in the objective's tree (they are the global chunks [first_chunk,
  // first_chunk + chunks) of global_chunks; models/partial_sum_tree.hpp): [nodes][partials],
  // valid until the next call: a GPU sends a few records instead of one per chunk. What the
  // objective calls; nullptr when the device has no rows.
  virtual const double* node_partials(const float* W, std::int64_t first_chunk, std::int64_t global_chunks) = 0;
};

// The same in float64 (the float64 kernels of models/logreg.hpp): W [features, classes] in
// double on the host.
class LogregShard64 {
 public:
  virtual ~LogregShard64() = default;
  virtual void chunk_partials(const double* W, double* out) = 0;
  virtual const double* node_partials(const double* W, std::int64_t first_chunk, std::int64_t global_chunks) = 0;
};

// The kinds of device implementation the models need, one per interface above: a kind names
// itself (for messages) and the signature of its factory. X [rows, features], labels [rows]
// (and a logreg shard's row_weights [rows], or nullptr: unweighted) on the host: a CPU shard views them (they must outlive it), a GPU shard copies them to its
// device once. A logreg predictor keeps its own copy of the parameters. A new model kind is
// its interface and one such struct; each backend that accelerates it adds one
// provide<Kind>() line (a backend that lacks a kind refuses it, naming both).
struct CnnMemberKind {
  static constexpr const char* name = "CNN member (ensemble training and eval --model cnn)";
  using Make = std::unique_ptr<CnnMember> (*)(const runtime::DeviceInfo& device, const CnnConfig& config, int max_batch,
                                              int max_train_batch);
};
struct LogregShardKind {
  static constexpr const char* name = "logistic-regression shard (spmd logreg)";
  using Make = std::unique_ptr<LogregShard> (*)(const runtime::DeviceInfo& device, const float* X,
                                                const std::int32_t* labels, std::int64_t rows, int features,
                                                int classes, std::int64_t chunk_rows, const double* row_weights);
};
struct LogregShard64Kind {
  static constexpr const char* name = "logistic-regression shard in float64 (spmd logreg --precision float64)";
  using Make = std::unique_ptr<LogregShard64> (*)(const runtime::DeviceInfo& device, const float* X,
                                                  const std::int32_t* labels, std::int64_t rows, int features,
                                                  int classes, std::int64_t chunk_rows, const double* row_weights);
};
// The same shards over CSR rows (models/logreg_sparse.hpp): row_start [rows + 1], columns
// and values viewed on the host as X is.
struct LogregSparseShardKind {
  static constexpr const char* name = "sparse (CSR) logistic-regression shard (spmd logreg on a sparse matrix)";
  using Make = std::unique_ptr<LogregShard> (*)(const runtime::DeviceInfo& device, const CsrRows& X,
                                                const std::int32_t* labels, std::int64_t rows, int features,
                                                int classes, std::int64_t chunk_rows, const double* row_weights);
};
struct LogregSparseShard64Kind {
  static constexpr const char* name = "sparse (CSR) logistic-regression shard in float64";
  using Make = std::unique_ptr<LogregShard64> (*)(const runtime::DeviceInfo& device, const CsrRows& X,
                                                  const std::int32_t* labels, std::int64_t rows, int features,
                                                  int classes, std::int64_t chunk_rows, const double* row_weights);
};
struct LogregPredictorKind {
  static constexpr const char* name = "logistic-regression predictor (eval --model logreg)";
  using Make = std::unique_ptr<DevicePredictor> (*)(const runtime::DeviceInfo& device,
                                                    const LogregParameters& parameters, std::int64_t max_rows);
};

// The factories one backend provides, keyed by kind. Plain function pointers under the
// kind's name: a module built elsewhere shares no type identity with libspmd, only names.
class DeviceModels {
 public:
  virtual ~DeviceModels();

  template <class Kind>
  void provide(typename Kind::Make make) {
    factories_.push_back({Kind::name, reinterpret_cast<void (*)()>(make)});
  }
  // The factory of Kind; throws spmd::Error naming the kind and the backend when this
  // backend provides none.
  template <class Kind>
  typename Kind::Make factory(std::string_view backend) const {
    return reinterpret_cast<typename Kind::Make>(find(Kind::name, backend));
  }
  bool provides(std::string_view kind) const;

 private:
  void (*find(std::string_view kind, std::string_view backend) const)();
  std::vector<std::pair<std::string_view, void (*)()>> factories_;
};

// The factories of the device's backend. Defined by the backend registry
// (src/backends/registry.cpp), which sits above this layer: models name no backend.
const DeviceModels& device_models(const runtime::DeviceInfo& device);

// Kind's implementation on `device`, made by the device's own backend.
template <class Kind, class... Args>
auto make_on_device(const runtime::DeviceInfo& device, Args&&... args) {
  return device_models(device).factory<Kind>(device.backend())(device, std::forward<Args>(args)...);
}

inline std::unique_ptr<CnnMember> make_cnn_member(const runtime::DeviceInfo& device, const CnnConfig& config,
                                                  int max_batch, int max_train_batch) {
  return make_on_device<CnnMemberKind>(device, config, max_batch, max_train_batch);
}
inline std::unique_ptr<LogregShard> make_logreg_shard(const runtime::DeviceInfo& device, const float* X,
                                                      const std::int32_t* labels, std::int64_t rows, int features,
                                                      int classes, std::int64_t chunk_rows,
                                                      const double* row_weights = nullptr) {
  return make_on_device<LogregShardKind>(device, X, labels, rows, features, classes, chunk_rows, row_weights);
}
inline std::unique_ptr<LogregShard64> make_logreg_shard64(const runtime::DeviceInfo& device, const float* X,
                                                          const std::int32_t* labels, std::int64_t rows, int features,
                                                          int classes, std::int64_t chunk_rows,
                                                          const double* row_weights = nullptr) {
  return make_on_device<LogregShard64Kind>(device, X, labels, rows, features, classes, chunk_rows, row_weights);
}
inline std::unique_ptr<LogregShard> make_logreg_sparse_shard(const runtime::DeviceInfo& device, const CsrRows& X,
                                                             const std::int32_t* labels, std::int64_t rows,
                                                             int features, int classes, std::int64_t chunk_rows,
                                                             const double* row_weights) {
  return make_on_device<LogregSparseShardKind>(device, X, labels, rows, features, classes, chunk_rows, row_weights);
}
inline std::unique_ptr<LogregShard64> make_logreg_sparse_shard64(const runtime::DeviceInfo& device, const CsrRows& X,
                                                                 const std::int32_t* labels, std::int64_t rows,
                                                                 int features, int classes, std::int64_t chunk_rows,
                                                                 const double* row_weights) {
  return make_on_device<LogregSparseShard64Kind>(device, X, labels, rows, features, classes, chunk_rows, row_weights);
}
inline std::unique_ptr<DevicePredictor> make_logreg_predictor(const runtime::DeviceInfo& device,
                                                              const LogregParameters& parameters,
                                                              std::int64_t max_rows) {
  return make_on_device<LogregPredictorKind>(device, parameters, max_rows);
}

}  // namespace spmd::models
