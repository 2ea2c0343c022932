#include "spmd/models/logreg_classifier.hpp"

#include "spmd/models/device_models.hpp"
#include "spmd/runtime/error.hpp"

namespace spmd::models {

namespace {

class LogregClassifier final : public Classifier {
 public:
  LogregClassifier(std::vector<float> W, int features, int classes, std::string source)
      : W_(std::move(W)), features_(features), classes_(classes), source_(std::move(source)) {}
  std::string describe() const override {
    return "logreg W[" + std::to_string(features_) + "," + std::to_string(classes_) + "] from " + source_;
  }
  int classes() const override { return classes_; }
  void check_sample_shape(const std::vector<std::int64_t>& sample_shape, const std::string& data_path) const override {
    std::int64_t f = 1;
    for (auto e : sample_shape) f *= e;
    if (f != features_)
      throw CollectiveError("logreg weights '" + source_ + "' expect " + std::to_string(features_) +
                            " features per example, but '" + data_path + "' has " + std::to_string(f) +
                            " (weights trained on other data?)");
  }
  std::unique_ptr<DevicePredictor> make_predictor(const runtime::DeviceInfo& device, std::int64_t max_rows) const override {
    return make_logreg_predictor(device, W_, features_, classes_, max_rows);
  }
  std::int64_t parameter_bytes() const override { return static_cast<std::int64_t>(W_.size()) * 4; }
  std::int64_t workspace_bytes(std::int64_t rows) const override { return rows * 16 * 4; }

 private:
  std::vector<float> W_;
  int features_, classes_;
  std::string source_;
};

}  // namespace

std::unique_ptr<Classifier> make_logreg_classifier(std::vector<float> W, int features, int classes, std::string source) {
  if (features < 1 || classes < 2 || W.size() != static_cast<size_t>(features) * static_cast<size_t>(classes))
    throw Error("logreg weights '" + source + "': expected W of shape [features >= 1, classes >= 2], got " +
                std::to_string(W.size()) + " values for [" + std::to_string(features) + "," + std::to_string(classes) + "]");
  return std::make_unique<LogregClassifier>(std::move(W), features, classes, std::move(source));
}

}  // namespace spmd::models
