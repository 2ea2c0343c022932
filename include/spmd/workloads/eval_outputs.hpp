#pragma once
// What an evaluation produces besides correct / total: the confusion matrix (exact integer
// counts, summed over ranks once at the end) and, with `spmd eval --predictions FILE`, the
// per-example outputs of pad_shard_unpad written to HDF5 in the input file's row order.
//
// The predictions file (every rank writes its own rows, collectively, atomically):
//   predicted      int32 [N]     the predicted class; -1 for a row that was not evaluated
//                                (removed by --drop-label, or left out by drop-remainder)
//   probabilities  float32 [N,C] the model's class probabilities (the ensemble's mean of its
//                                members'); all 0 for a row that was not evaluated
//   label          int32 [N]     the row's label as read (also for rows not evaluated)
//   attributes     model, data, features_key, labels_key, evaluated (rows), classes
// Each row's outputs depend only on that row and the model, so the file's bytes are the
// same on every layout of ranks x devices x batch size, and for every exact strategy.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "spmd/runtime/context.hpp"

namespace spmd::data {
class OutputSet;
}

namespace spmd::workloads {

struct EvalShard;

// Counts of (label, predicted class) pairs. Past kMaxClasses the matrix is not kept (it
// would be classes^2 integers on every rank); correct() is counted either way.
class ConfusionMatrix {
 public:
  static constexpr int kMaxClasses = 1024;

  ConfusionMatrix() = default;
  explicit ConfusionMatrix(int classes);
  void add(const std::int32_t* predicted, const std::int32_t* labels, std::int64_t rows);
  // Collective: sums every rank's counts (exact). Call once, at the end.
  void sum_over_ranks(const runtime::Context& ctx);

  int classes() const { return classes_; }
  bool kept() const { return !counts_.empty(); }
  std::int64_t correct() const { return correct_; }
  std::int64_t at(int label, int predicted) const {
    return counts_[static_cast<std::size_t>(label) * static_cast<std::size_t>(classes_) + static_cast<std::size_t>(predicted)];
  }
  // [[...], ...]: row = label, column = predicted class; null when not kept.
  nlohmann::json to_json() const;

 private:
  int classes_ = 0;
  std::int64_t correct_ = 0;
  std::vector<std::int64_t> counts_;  // [classes][classes], or empty
};

// This rank's per-example outputs, by its rows of the file (before --drop-label), until
// they are written.
class PredictionRecorder {
 public:
  PredictionRecorder(const EvalShard& shard, int classes);

  // Outputs of `rows` consecutive evaluated rows, the first being row `first` of the
  // rank's evaluated rows (after --drop-label). Thread-safe for disjoint rows.
  void record(std::int64_t first, std::int64_t rows, const std::int32_t* predicted, const float* probabilities);

  struct FileInfo {
    std::string model, data, features_key, labels_key;
  };
  // Collective: writes the file described at the top to its temporary and hands it to
  // `outputs`, which publishes it with the run's other outputs.
  void write(const runtime::Context& ctx, const std::string& path, const FileInfo& info, data::OutputSet& outputs) const;

 private:
  const EvalShard& shard_;
  int classes_;
  std::vector<std::int32_t> predicted_;  // [file rows of this rank]
  std::vector<float> probabilities_;     // [file rows of this rank, classes]
};

}  // namespace spmd::workloads
