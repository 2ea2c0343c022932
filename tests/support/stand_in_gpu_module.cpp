// A stand-in for the CUDA backend module (libspmd_cuda.so), for machines without a GPU (CI):
// a "cuda" platform whose devices are CPU threads, and models that meet the workloads at the
// GPU's interfaces. Like a GPU they take uint8 samples as bytes (decodes_bytes) and decode
// them where they "compute" (here, through the table, on the host), then run the CPU
// backend's models. So the host side of a GPU run (the module loaded, devices assigned by
// node-local rank, the ensemble trainer's and eval's byte paths) runs in CI and must give the
// CPU run's bits (tests/cli/stand_in_gpu.sh, with a stand-in driver for the probe).
//   SPMD_STAND_IN_GPUS         the devices the platform reports (default 2)
//   SPMD_STAND_IN_BYTES_ONLY   when set, a float batch given to a CNN member or logreg
//                              predictor is an error: the test's data is uint8, so the
//                              workloads must hand the bytes over
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "spmd/backends/backend.hpp"
#include "spmd/backends/cpu/cpu_backend.hpp"
#include "spmd/models/classifier.hpp"
#include "spmd/models/device_models.hpp"
#include "spmd/runtime/devices.hpp"
#include "spmd/runtime/error.hpp"

namespace {

using namespace spmd;
using models::ByteTable;

class StandInPlatform final : public runtime::DevicePlatform {
 public:
  std::string_view name() const override { return "cuda"; }
  std::string_view device_kind() const override { return "GPU"; }
  int device_count(std::string* why_none) const override {
    const char* text = std::getenv("SPMD_STAND_IN_GPUS");
    const int n = text != nullptr ? std::atoi(text) : 2;
    if (n <= 0 && why_none != nullptr) *why_none = "the stand-in reports no device (SPMD_STAND_IN_GPUS)";
    return n;
  }
  std::string device_name(int ordinal) const override { return "cuda:" + std::to_string(ordinal) + " stand-in"; }
  void bind_thread(int ordinal) const override { runtime::host_platform().bind_thread(ordinal); }
};

const StandInPlatform& stand_in_platform() {
  static const StandInPlatform p;
  return p;
}

void refuse_floats(const char* what) {
  if (std::getenv("SPMD_STAND_IN_BYTES_ONLY") != nullptr)
    throw Error(std::string("stand-in GPU: ") + what + " was given floats, but this run's data is uint8: bytes expected");
}

// The CPU backend's implementation of Kind (a host device: the CPU's factories ignore it).
template <class Kind, class... Args>
auto cpu_model(Args&&... args) {
  return backends::cpu::backend().factory<Kind>("cpu")(runtime::DeviceInfo{}, std::forward<Args>(args)...);
}

void decode(const std::uint8_t* bytes, std::int64_t n, const ByteTable& table, std::vector<float>& out) {
  out.resize(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) out[static_cast<std::size_t>(i)] = table[bytes[i]];
}

class StandInMember final : public models::CnnMember {
 public:
  StandInMember(const models::CnnConfig& config, int max_batch, int max_train_batch)
      : pixels_(config.input_size()), cpu_(cpu_model<models::CnnMemberKind>(config, max_batch, max_train_batch)) {}
  void set_state(const models::CnnParams& p, const models::CnnParams& m) override { cpu_->set_state(p, m); }
  void get_state(models::CnnParams& p, models::CnnParams& m) const override { cpu_->get_state(p, m); }
  float train_step(const float* images, const std::int32_t* labels, int batch, const optim::SgdMomentum& sgd,
                   float* probs_out) override {
    refuse_floats("a CNN training step");
    return cpu_->train_step(images, labels, batch, sgd, probs_out);
  }
  void forward(const float* images, int batch, float* probs_out) override {
    refuse_floats("a CNN forward pass");
    cpu_->forward(images, batch, probs_out);
  }
  bool decodes_bytes() const override { return true; }
  void forward_bytes(const std::uint8_t* images, int batch, const ByteTable& table, float* probs_out) override {
    decode(images, batch * pixels_, table, decoded_);
    cpu_->forward(decoded_.data(), batch, probs_out);
  }
  float train_step_bytes(const std::uint8_t* images, const std::int32_t* labels, int batch, const ByteTable& table,
                         const optim::SgdMomentum& sgd, float* probs_out) override {
    decode(images, batch * pixels_, table, decoded_);
    return cpu_->train_step(decoded_.data(), labels, batch, sgd, probs_out);
  }

 private:
  std::int64_t pixels_;
  std::unique_ptr<models::CnnMember> cpu_;
  std::vector<float> decoded_;
};

class StandInLogregPredictor final : public models::DevicePredictor {
 public:
  explicit StandInLogregPredictor(const models::LogregParameters& p, std::int64_t max_rows)
      : features_(p.features), cpu_(cpu_model<models::LogregPredictorKind>(p, max_rows)) {}
  void predict(const float* samples, std::int64_t rows, std::int32_t* classes_out, float* probs_out) override {
    refuse_floats("the logreg predictor");
    cpu_->predict(samples, rows, classes_out, probs_out);
    non_finite_rows_ = cpu_->non_finite_rows();
  }
  bool decodes_bytes() const override { return true; }
  void predict_bytes(const std::uint8_t* samples, std::int64_t rows, const ByteTable& table, std::int32_t* classes_out,
                     float* probs_out) override {
    decode(samples, rows * features_, table, decoded_);
    cpu_->predict(decoded_.data(), rows, classes_out, probs_out);
    non_finite_rows_ = cpu_->non_finite_rows();
  }

 private:
  std::int64_t features_;
  std::unique_ptr<models::DevicePredictor> cpu_;
  std::vector<float> decoded_;
};

class StandInBackend final : public backends::Backend {
 public:
  StandInBackend() {
    provide<models::CnnMemberKind>([](const runtime::DeviceInfo&, const models::CnnConfig& config, int max_batch,
                                      int max_train_batch) -> std::unique_ptr<models::CnnMember> {
      return std::make_unique<StandInMember>(config, max_batch, max_train_batch);
    });
    // The shards see no samples as bytes: the CPU's own factories (they ignore the device).
    provide<models::LogregShardKind>(backends::cpu::backend().factory<models::LogregShardKind>("cpu"));
    provide<models::LogregShard64Kind>(backends::cpu::backend().factory<models::LogregShard64Kind>("cpu"));
    provide<models::LogregPredictorKind>([](const runtime::DeviceInfo&, const models::LogregParameters& p,
                                            std::int64_t max_rows) -> std::unique_ptr<models::DevicePredictor> {
      return std::make_unique<StandInLogregPredictor>(p, max_rows);
    });
  }
  const runtime::DevicePlatform& platform() const override { return stand_in_platform(); }
  std::vector<std::pair<std::string, std::string>> library_versions() const override {
    return {{"cuda", "stand-in (tests/support/stand_in_gpu_module.cpp): CPU threads"}};
  }
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const spmd::backends::Backend* spmd_cuda_backend_v1() {
  static const StandInBackend backend;
  return &backend;
}
