// The CPU backend: a device is a worker thread (runtime::host_platform) and the models run
// the host kernels (models/cnn_cpu.hpp, models/logreg.hpp) on that thread's own buffers.
#include "spmd/backends/cpu/cpu_backend.hpp"

#include <algorithm>
#include <optional>

#include "spmd/models/partial_sum_tree.hpp"
#include "spmd/models/cnn_cpu.hpp"
#include "spmd/models/logreg.hpp"
#include "spmd/models/logreg_sparse.hpp"
#include "spmd/runtime/error.hpp"

namespace spmd::backends::cpu {

namespace {

using namespace spmd::models;

class CpuCnnMember final : public CnnMember {
 public:
  CpuCnnMember(const CnnConfig& config, int max_batch, int max_train_batch)
      : params_(config), trace_(params_.shared_layout()), ws_(params_.shared_layout(), max_batch, max_train_batch) {}
  void set_state(const CnnParams& params, const CnnParams& momentum) override {
    require_geometry(params, params_.layout(), "CPU CNN member");
    require_geometry(momentum, params_.layout(), "CPU CNN member");
    std::copy(params.flat().begin(), params.flat().end(), params_.data());
    std::copy(momentum.flat().begin(), momentum.flat().end(), trace_.data());
  }
  void get_state(CnnParams& params, CnnParams& momentum) const override {
    require_geometry(params, params_.layout(), "CPU CNN member");
    require_geometry(momentum, params_.layout(), "CPU CNN member");
    std::copy(params_.flat().begin(), params_.flat().end(), params.data());
    std::copy(trace_.flat().begin(), trace_.flat().end(), momentum.data());
  }
  float train_step(const float* images, const std::int32_t* labels, int batch, const optim::SgdMomentum& sgd,
                   float* probs_out) override {
    return cnn_train_step(params_, trace_, sgd, images, labels, batch, probs_out, ws_);
  }
  void forward(const float* images, int batch, float* probs_out) override {
    cnn_forward(params_, images, batch, probs_out, ws_);
  }

 private:
  CnnParams params_, trace_;
  CnnWorkspace ws_;
};

// Base: LogregShard (float32) or LogregShard64; Scalar: its W's type.
template <class Base, class Scalar>
class CpuLogregShard final : public Base {
 public:
  CpuLogregShard(const float* X, const std::int32_t* labels, std::int64_t rows, int features, int classes,
                 std::int64_t chunk_rows, const double* row_weights)
      : X_(X), labels_(labels), row_weights_(row_weights), rows_(rows), features_(features), classes_(classes),
        chunk_rows_(chunk_rows) {}
  void chunk_partials(const Scalar* W, double* out) override {
    if (rows_ == 0) return;
    logreg_range_partials(X_, labels_, rows_, features_, classes_, W, chunk_rows_, out, ws_, row_weights_);
  }
  // The chunks' records summed to the nodes here too (the GPU's path, so the CPU tests it).
  const double* node_partials(const Scalar* W, std::int64_t first_chunk, std::int64_t global_chunks) override {
    if (rows_ == 0) return nullptr;
    const std::int64_t chunks = (rows_ + chunk_rows_ - 1) / chunk_rows_;
    const auto record = logreg_partials_size(features_, classes_);
    if (plan_first_ != first_chunk || plan_global_ != global_chunks) {
      plan_ = in_place_tree_plan(first_chunk, first_chunk + chunks, global_chunks);
      plan_first_ = first_chunk;
      plan_global_ = global_chunks;
      records_.assign(static_cast<std::size_t>(chunks) * record, 0.0);
      nodes_.assign(plan_.nodes.size() * record, 0.0);
    }
    chunk_partials(W, records_.data());
    run_in_place_tree_plan(plan_, records_.data(), record, nodes_.data());
    return nodes_.data();
  }

 private:
  const float* X_;
  const std::int32_t* labels_;
  const double* row_weights_;  // nullptr: unweighted
  std::int64_t rows_;
  int features_, classes_;
  std::int64_t chunk_rows_;
  LogregWorkspace ws_;
  InPlaceTreePlan plan_;
  std::int64_t plan_first_ = -1, plan_global_ = -1;
  std::vector<double> records_, nodes_;  // [chunks][record], [nodes][record]
};

// CSR rows: each chunk's record is F x C (large for wide sparse data), so the chunks stream
// through a PartialSumTree (a few records live at once) instead of one record per chunk.
template <class Base, class Scalar>
class CpuLogregSparseShard final : public Base {
 public:
  CpuLogregSparseShard(const CsrRows& X, const std::int32_t* labels, std::int64_t rows, int features, int classes,
                       std::int64_t chunk_rows, const double* row_weights)
      : X_(X), labels_(labels), row_weights_(row_weights), rows_(rows), features_(features), classes_(classes),
        chunk_rows_(chunk_rows) {}
  void chunk_partials(const Scalar* W, double* out) override {
    const auto record = logreg_partials_size(features_, classes_);
    for (std::int64_t first = 0, k = 0; first < rows_; first += chunk_rows_, ++k) chunk(W, first, out + k * record);
  }
  const double* node_partials(const Scalar* W, std::int64_t first_chunk, std::int64_t global_chunks) override {
    if (rows_ == 0) return nullptr;
    if (!tree_ || tree_chunks_ != global_chunks) {
      tree_.emplace(global_chunks, logreg_partials_size(features_, classes_));
      tree_chunks_ = global_chunks;
    }
    tree_->reset(first_chunk);
    for (std::int64_t first = 0; first < rows_; first += chunk_rows_) {
      chunk(W, first, tree_->leaf_slot());
      tree_->commit_leaf();
    }
    return tree_->data();
  }

 private:
  void chunk(const Scalar* W, std::int64_t first, double* out) {
    logreg_sparse_chunk_partials(X_.from(first), labels_ + first, std::min(chunk_rows_, rows_ - first), features_,
                                 classes_, W, out, ws_, row_weights_ ? row_weights_ + first : nullptr);
  }
  CsrRows X_;
  const std::int32_t* labels_;
  const double* row_weights_;
  std::int64_t rows_;
  int features_, classes_;
  std::int64_t chunk_rows_;
  LogregSparseWorkspace ws_;
  std::optional<PartialSumTree> tree_;
  std::int64_t tree_chunks_ = -1;
};

class CpuLogregPredictor final : public DevicePredictor {
 public:
  explicit CpuLogregPredictor(const LogregParameters& p)
      : kernel_(p.W.data(), p.has_intercept() ? p.bias.data() : nullptr, p.features, p.classes) {}
  void predict(const float* samples, std::int64_t rows, std::int32_t* classes_out, float* probs_out) override {
    non_finite_rows_ += kernel_.predict(samples, rows, classes_out, probs_out);
  }

 private:
  LogregFixedPredictor kernel_;  // a copy of W per device: each device owns its parameters
};

class CpuBackend final : public Backend {
 public:
  const runtime::DevicePlatform& platform() const override { return runtime::host_platform(); }
  std::vector<std::pair<std::string, std::string>> library_versions() const override {
    return {};  // OpenBLAS is the runtime's (runtime::library_versions)
  }
  CpuBackend() {
    provide<CnnMemberKind>([](const runtime::DeviceInfo&, const CnnConfig& config, int max_batch,
                              int max_train_batch) -> std::unique_ptr<CnnMember> {
      return std::make_unique<CpuCnnMember>(config, max_batch, max_train_batch);
    });
    provide<LogregShardKind>([](const runtime::DeviceInfo&, const float* X, const std::int32_t* labels,
                                std::int64_t rows, int features, int classes,
                                std::int64_t chunk_rows, const double* row_weights) -> std::unique_ptr<LogregShard> {
      return std::make_unique<CpuLogregShard<LogregShard, float>>(X, labels, rows, features, classes, chunk_rows,
                                                                  row_weights);
    });
    provide<LogregShard64Kind>([](const runtime::DeviceInfo&, const float* X, const std::int32_t* labels,
                                  std::int64_t rows, int features, int classes,
                                  std::int64_t chunk_rows, const double* row_weights) -> std::unique_ptr<LogregShard64> {
      return std::make_unique<CpuLogregShard<LogregShard64, double>>(X, labels, rows, features, classes, chunk_rows,
                                                                     row_weights);
    });
    provide<LogregSparseShardKind>([](const runtime::DeviceInfo&, const CsrRows& X, const std::int32_t* labels,
                                      std::int64_t rows, int features, int classes, std::int64_t chunk_rows,
                                      const double* row_weights) -> std::unique_ptr<LogregShard> {
      return std::make_unique<CpuLogregSparseShard<LogregShard, float>>(X, labels, rows, features, classes, chunk_rows,
                                                                        row_weights);
    });
    provide<LogregSparseShard64Kind>([](const runtime::DeviceInfo&, const CsrRows& X, const std::int32_t* labels,
                                        std::int64_t rows, int features, int classes, std::int64_t chunk_rows,
                                        const double* row_weights) -> std::unique_ptr<LogregShard64> {
      return std::make_unique<CpuLogregSparseShard<LogregShard64, double>>(X, labels, rows, features, classes,
                                                                           chunk_rows, row_weights);
    });
    provide<LogregPredictorKind>([](const runtime::DeviceInfo&, const LogregParameters& parameters,
                                    std::int64_t) -> std::unique_ptr<DevicePredictor> {
      return std::make_unique<CpuLogregPredictor>(parameters);
    });
  }
};

}  // namespace

const Backend& backend() {
  static const CpuBackend instance;
  return instance;
}

}  // namespace spmd::backends::cpu
