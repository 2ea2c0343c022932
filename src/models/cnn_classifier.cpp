#include "spmd/models/cnn_classifier.hpp"

#include <algorithm>

#include "spmd/models/argmax.hpp"
#include "spmd/models/cnn_params.hpp"
#include "spmd/models/device_models.hpp"
#include "spmd/runtime/error.hpp"

namespace spmd::models {

namespace {

class CnnPredictor final : public DevicePredictor {
 public:
  CnnPredictor(const runtime::DeviceInfo& device, const std::shared_ptr<const CnnLayout>& layout,
               const std::vector<std::vector<float>>& members, std::int64_t max_rows)
      : classes_(layout->classes()),
        probs_(static_cast<size_t>(max_rows) * static_cast<size_t>(classes_)),
        sum_(static_cast<size_t>(max_rows) * static_cast<size_t>(classes_)) {
    CnnParams params(layout), zero(layout);
    for (const auto& m : members) {
      std::copy(m.begin(), m.end(), params.data());
      members_.push_back(make_cnn_member(device, layout->config(), static_cast<int>(max_rows), 1));
      members_.back()->set_state(params, zero);
    }
  }
  void predict(const float* samples, std::int64_t rows, std::int32_t* out, float* probs_out) override {
    predict_with([&](CnnMember& m, float* probs) { m.forward(samples, static_cast<int>(rows), probs); }, rows, out,
                 probs_out);
  }

  // Every member decodes where it computes, or none does (one backend per device).
  bool decodes_bytes() const override { return !members_.empty() && members_.front()->decodes_bytes(); }

  void predict_bytes(const std::uint8_t* samples, std::int64_t rows, const ByteTable& table, std::int32_t* out,
                     float* probs_out) override {
    if (!decodes_bytes()) DevicePredictor::predict_bytes(samples, rows, table, out, probs_out);
    predict_with([&](CnnMember& m, float* probs) { m.forward_bytes(samples, static_cast<int>(rows), table, probs); },
                 rows, out, probs_out);
  }

 private:
  // forward(member, probs) runs one member's forward pass on the batch into probs.
  template <class Forward>
  void predict_with(Forward forward, std::int64_t rows, std::int32_t* out, float* probs_out) {
    std::fill(sum_.begin(), sum_.begin() + rows * classes_, 0.0);
    for (const auto& m : members_) {
      forward(*m, probs_.data());
      for (std::int64_t i = 0; i < rows * classes_; ++i) sum_[static_cast<size_t>(i)] += probs_[static_cast<size_t>(i)];
    }
    for (std::int64_t r = 0; r < rows; ++r) {
      const double* s = sum_.data() + r * classes_;
      bool finite = true;
      out[r] = argmax(s, classes_, finite);
      non_finite_rows_ += !finite;
    }
    if (!probs_out) return;
    // The ensemble's prediction: the mean of the members' probabilities (summed in member
    // order in double, as the class above is chosen from).
    const double members = static_cast<double>(members_.size());
    for (std::int64_t i = 0; i < rows * classes_; ++i)
      probs_out[i] = static_cast<float>(sum_[static_cast<size_t>(i)] / members);
  }

  const int classes_;
  std::vector<std::unique_ptr<CnnMember>> members_;  // every member, on this device
  std::vector<float> probs_;
  std::vector<double> sum_;
};

class CnnClassifier final : public Classifier {
 public:
  CnnClassifier(std::shared_ptr<const CnnLayout> layout, std::vector<std::vector<float>> members, std::string source)
      : layout_(std::move(layout)), members_(std::move(members)), source_(std::move(source)) {}
  std::string describe() const override {
    return "cnn ensemble of " + std::to_string(members_.size()) + " member(s) (" + layout_->config().describe() +
           ") from " + source_;
  }
  int classes() const override { return layout_->classes(); }
  void check_sample_shape(const std::vector<std::int64_t>& s, const std::string& data_path) const override {
    if (!layout_->config().accepts_sample_shape(s)) {
      std::string t;
      for (auto e : s) t += (t.empty() ? "" : ",") + std::to_string(e);
      throw CollectiveError("--model cnn needs " + layout_->config().image_text() + " images, but '" + data_path +
                            "' has samples of shape [" + t + "]");
    }
  }
  std::unique_ptr<DevicePredictor> make_predictor(const runtime::DeviceInfo& device, std::int64_t max_rows) const override {
    return std::make_unique<CnnPredictor>(device, layout_, members_, max_rows);
  }
  std::int64_t parameter_bytes() const override {
    return static_cast<std::int64_t>(members_.size() * layout_->param_count() * sizeof(float));
  }
  std::int64_t workspace_bytes(std::int64_t rows) const override {
    // Activations of the forward pass per row: each conv layer's zero-bordered input and
    // output, the flattened features and every dense layer's output.
    return rows * layout_->forward_floats_per_row() * 4;
  }

 private:
  std::shared_ptr<const CnnLayout> layout_;
  std::vector<std::vector<float>> members_;
  std::string source_;
};
}  // namespace

std::unique_ptr<Classifier> make_cnn_classifier(const CnnConfig& config, std::vector<std::vector<float>> members,
                                                std::string source) {
  std::shared_ptr<const CnnLayout> layout;
  try {
    layout = CnnLayout::make(config);
  } catch (const Error& e) {
    throw Error("cnn checkpoint '" + source + "': " + e.what());
  }
  if (members.empty()) throw Error("cnn checkpoint '" + source + "' holds no members");
  for (const auto& m : members)
    if (m.size() != layout->param_count())
      throw Error("cnn checkpoint '" + source + "': a member has " + std::to_string(m.size()) + " parameters, expected " +
                  std::to_string(layout->param_count()) + " for its " + config.describe() + " CNN");
  return std::make_unique<CnnClassifier>(std::move(layout), std::move(members), std::move(source));
}

}  // namespace spmd::models
