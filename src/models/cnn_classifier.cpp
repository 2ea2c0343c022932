#include "spmd/models/cnn_classifier.hpp"

#include <algorithm>

#include "spmd/models/device_models.hpp"
#include "spmd/runtime/error.hpp"

namespace spmd::models {

namespace {
constexpr int kC = cnn::kClasses;

class CnnPredictor final : public DevicePredictor {
 public:
  CnnPredictor(const runtime::DeviceInfo& device, const std::vector<std::vector<float>>& members, std::int64_t max_rows)
      : probs_(static_cast<size_t>(max_rows) * kC), sum_(static_cast<size_t>(max_rows) * kC) {
    CnnParams params, zero;
    zero.set_zero();
    for (const auto& m : members) {
      std::copy(m.begin(), m.end(), params.data());
      members_.push_back(make_cnn_member(device, static_cast<int>(max_rows), 1));
      members_.back()->set_state(params, zero);
    }
  }
  void predict(const float* samples, std::int64_t rows, std::int32_t* out) override {
    std::fill(sum_.begin(), sum_.begin() + rows * kC, 0.0);
    for (const auto& m : members_) {
      m->forward(samples, static_cast<int>(rows), probs_.data());
      for (std::int64_t i = 0; i < rows * kC; ++i) sum_[static_cast<size_t>(i)] += probs_[static_cast<size_t>(i)];
    }
    for (std::int64_t r = 0; r < rows; ++r) {
      const double* s = sum_.data() + r * kC;
      out[r] = static_cast<std::int32_t>(std::max_element(s, s + kC) - s);
    }
  }

 private:
  std::vector<std::unique_ptr<CnnMember>> members_;  // every member, on this device
  std::vector<float> probs_;
  std::vector<double> sum_;
};

class CnnClassifier final : public Classifier {
 public:
  CnnClassifier(std::vector<std::vector<float>> members, std::string source)
      : members_(std::move(members)), source_(std::move(source)) {}
  std::string describe() const override {
    return "cnn ensemble of " + std::to_string(members_.size()) + " member(s) from " + source_;
  }
  int classes() const override { return kC; }
  void check_sample_shape(const std::vector<std::int64_t>& s, const std::string& data_path) const override {
    if (s != std::vector<std::int64_t>{28, 28, 1} && s != std::vector<std::int64_t>{28, 28}) {
      std::string t;
      for (auto e : s) t += (t.empty() ? "" : ",") + std::to_string(e);
      throw CollectiveError("--model cnn needs 28x28x1 images, but '" + data_path + "' has samples of shape [" + t + "]");
    }
  }
  std::unique_ptr<DevicePredictor> make_predictor(const runtime::DeviceInfo& device, std::int64_t max_rows) const override {
    return std::make_unique<CnnPredictor>(device, members_, max_rows);
  }
  std::int64_t parameter_bytes() const override {
    return static_cast<std::int64_t>(members_.size() * kCnnParamCount * sizeof(float));
  }
  std::int64_t workspace_bytes(std::int64_t rows) const override {
    // Activations of the forward pass (conv1 + pool1 + conv2 + pool2 + dense) per row.
    return rows * (30 * 30 + 28 * 28 * 32 + 16 * 16 * 32 + 14 * 14 * 64 + 3136 + 256 + 10) * 4;
  }

 private:
  std::vector<std::vector<float>> members_;
  std::string source_;
};
}  // namespace

std::unique_ptr<Classifier> make_cnn_classifier(std::vector<std::vector<float>> members, std::string source) {
  if (members.empty()) throw Error("cnn checkpoint '" + source + "' holds no members");
  for (const auto& m : members)
    if (m.size() != kCnnParamCount)
      throw Error("cnn checkpoint '" + source + "': a member has " + std::to_string(m.size()) + " parameters, expected " +
                  std::to_string(kCnnParamCount));
  return std::make_unique<CnnClassifier>(std::move(members), std::move(source));
}

}  // namespace spmd::models
