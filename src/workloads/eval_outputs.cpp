#include "spmd/workloads/eval_outputs.hpp"

#include <algorithm>

#include "spmd/data/h5_parallel_writer.hpp"
#include "spmd/runtime/collectives.hpp"
#include "spmd/runtime/error.hpp"
#include "spmd/workloads/eval.hpp"

namespace spmd::workloads {

ConfusionMatrix::ConfusionMatrix(int classes) : classes_(classes) {
  if (classes > 0 && classes <= kMaxClasses)
    counts_.assign(static_cast<std::size_t>(classes) * static_cast<std::size_t>(classes), 0);
}

void ConfusionMatrix::add(const std::int32_t* predicted, const std::int32_t* labels, std::int64_t rows) {
  for (std::int64_t r = 0; r < rows; ++r) {
    correct_ += predicted[r] == labels[r];
    // A predictor's class always lies in [0, classes); labels were checked when loaded.
    if (!counts_.empty())
      ++counts_[static_cast<std::size_t>(labels[r]) * static_cast<std::size_t>(classes_) +
                static_cast<std::size_t>(predicted[r])];
  }
}

void ConfusionMatrix::sum_over_ranks(const runtime::Context& ctx) {
  runtime::allreduce_sum(ctx, std::span<std::int64_t>(&correct_, 1));
  if (!counts_.empty()) runtime::allreduce_sum(ctx, std::span<std::int64_t>(counts_));
}

nlohmann::json ConfusionMatrix::to_json() const {
  if (counts_.empty()) return nullptr;
  nlohmann::json rows = nlohmann::json::array();
  for (int label = 0; label < classes_; ++label) {
    const auto first = counts_.begin() + static_cast<std::ptrdiff_t>(label) * classes_;
    rows.push_back(std::vector<std::int64_t>(first, first + classes_));
  }
  return rows;
}

PredictionRecorder::PredictionRecorder(const EvalShard& shard, int classes)
    : shard_(shard),
      classes_(classes),
      predicted_(static_cast<std::size_t>(shard.file_rows), -1),
      probabilities_(static_cast<std::size_t>(shard.file_rows) * static_cast<std::size_t>(classes), 0.0f) {}

void PredictionRecorder::record(std::int64_t first, std::int64_t rows, const std::int32_t* predicted,
                                const float* probabilities) {
  const auto c = static_cast<std::size_t>(classes_);
  for (std::int64_t i = 0; i < rows; ++i) {
    const auto at = static_cast<std::size_t>(shard_.file_row_of(first + i));
    predicted_[at] = predicted[i];
    std::copy_n(probabilities + static_cast<std::size_t>(i) * c, c, probabilities_.begin() + static_cast<std::ptrdiff_t>(at * c));
  }
}

void PredictionRecorder::write(const runtime::Context& ctx, const std::string& path, const FileInfo& info,
                               data::OutputSet& outputs) const {
  const std::int64_t n = shard_.shard.global_rows;
  const std::int64_t first = shard_.shard.first_row, rows = shard_.file_rows;
  const auto& labels = shard_.file_labels.empty() ? shard_.shard.labels : shard_.file_labels;
  std::int64_t evaluated = std::count_if(predicted_.begin(), predicted_.end(), [](std::int32_t p) { return p >= 0; });
  runtime::allreduce_sum(ctx, std::span<std::int64_t>(&evaluated, 1));
  const std::uint64_t bytes = static_cast<std::uint64_t>(n) * (static_cast<std::uint64_t>(classes_) * sizeof(float) + 8);
  data::ParallelH5Writer out(ctx, path, bytes);
  out.write_rows<std::int32_t>("predicted", {n}, first, rows, predicted_);
  out.write_rows<float>("probabilities", {n, classes_}, first, rows, probabilities_);
  out.write_rows<std::int32_t>("label", {n}, first, rows, labels);
  out.set_attribute_string("/", "model", info.model);
  out.set_attribute_string("/", "data", info.data);
  out.set_attribute_string("/", "features_key", info.features_key);
  out.set_attribute_string("/", "labels_key", info.labels_key);
  out.set_attribute_int("/", "classes", classes_);
  out.set_attribute_int("/", "evaluated", evaluated);
  out.commit(&outputs);
}

}  // namespace spmd::workloads
