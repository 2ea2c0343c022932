#include "spmd/models/device_models.hpp"

#include <algorithm>

#include "spmd/models/cnn_cpu.hpp"
#include "spmd/models/logreg.hpp"
#include "spmd/runtime/error.hpp"

namespace spmd::models {

namespace {

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

class CpuLogregShard final : public LogregShard {
 public:
  CpuLogregShard(const float* X, const std::int32_t* labels, std::int64_t rows, int features, int classes,
                 std::int64_t chunk_rows)
      : X_(X), labels_(labels), rows_(rows), features_(features), classes_(classes), chunk_rows_(chunk_rows) {}
  void chunk_partials(const float* W, double* out) override {
    if (rows_ == 0) return;
    logreg_range_partials(X_, labels_, rows_, features_, classes_, W, chunk_rows_, out, ws_);
  }

 private:
  const float* X_;
  const std::int32_t* labels_;
  std::int64_t rows_;
  int features_, classes_;
  std::int64_t chunk_rows_;
  LogregWorkspace ws_;
};

}  // namespace

std::unique_ptr<CnnMember> make_cnn_member(const runtime::DeviceInfo& device, const CnnConfig& config, int max_batch,
                                           int max_train_batch) {
#ifdef SPMD_HAVE_CUDA
  if (device.backend == runtime::Backend::Cuda) return make_cnn_member_cuda(device, config, max_batch, max_train_batch);
#endif
  if (device.backend != runtime::Backend::Cpu) throw Error("make_cnn_member: this build has no CUDA backend");
  return std::make_unique<CpuCnnMember>(config, max_batch, max_train_batch);
}

std::unique_ptr<LogregShard> make_logreg_shard(const runtime::DeviceInfo& device, const float* X, const std::int32_t* labels,
                                               std::int64_t rows, int features, int classes, std::int64_t chunk_rows) {
#ifdef SPMD_HAVE_CUDA
  if (device.backend == runtime::Backend::Cuda)
    return make_logreg_shard_cuda(device, X, labels, rows, features, classes, chunk_rows);
#endif
  if (device.backend != runtime::Backend::Cpu) throw Error("make_logreg_shard: this build has no CUDA backend");
  return std::make_unique<CpuLogregShard>(X, labels, rows, features, classes, chunk_rows);
}

}  // namespace spmd::models
