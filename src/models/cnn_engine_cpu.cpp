#include <string>

#include "spmd/models/cnn_engine.hpp"

namespace spmd::models {
namespace {

class CnnCpuEngine final : public CnnMemberEngine {
 public:
  CnnCpuEngine(int max_batch, int max_train_batch, cnn_cpu::Isa isa) : workspace_(max_batch, max_train_batch, isa) {}

  std::string describe() const override {
    return std::string("cpu (") + cnn_cpu::to_string(workspace_.isa()) + " kernels)";
  }
  int max_batch() const override { return workspace_.max_batch(); }
  int max_train_batch() const override { return workspace_.max_train_batch(); }
  std::int64_t device_bytes() const override {
    return static_cast<std::int64_t>(workspace_.bytes() + 2 * CnnParams::size() * sizeof(float));
  }

  void set_state(const CnnParams& params, const CnnParams& trace) override {
    params_ = params;
    trace_ = trace;
  }
  void get_state(CnnParams* params, CnnParams* trace) const override {
    if (params != nullptr) *params = params_;
    if (trace != nullptr) *trace = trace_;
  }

  float train_step(const float* images, const std::int32_t* labels, int batch, const optim::SgdMomentum& opt,
                   float* probs_out) override {
    return cnn_train_step(params_, trace_, opt, images, labels, batch, probs_out, workspace_);
  }

  CnnLossSum evaluate(const float* images, const std::int32_t* labels, const std::uint8_t* mask, int batch,
                      float* probs_out) override {
    return cnn_evaluate(params_, images, labels, mask, batch, probs_out, workspace_);
  }

 private:
  CnnWorkspace workspace_;
  CnnParams params_;
  CnnParams trace_;
};

}  // namespace

std::unique_ptr<CnnMemberEngine> make_cnn_cpu_engine(int max_batch, int max_train_batch, cnn_cpu::Isa isa) {
  return std::make_unique<CnnCpuEngine>(max_batch, max_train_batch, isa);
}

}  // namespace spmd::models
