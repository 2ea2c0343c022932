#pragma once
// What spmd eval prints and writes about a run: the start-up dry run, the result table, the
// confusion matrix and the JSON summary. Rank 0 prints the returned text.
#include <string>

#include <nlohmann/json.hpp>

#include "spmd/models/classifier.hpp"
#include "spmd/runtime/context.hpp"
#include "spmd/workloads/eval.hpp"
#include "spmd/workloads/eval_models.hpp"
#include "spmd/workloads/report.hpp"

namespace spmd::workloads {

// --dry-run: from shapes alone, what each rank would do. Returned text is for rank 0.
std::string eval_dry_run(const runtime::Context& ctx, const EvalOptions& options, const models::Classifier& model,
                         nlohmann::json* json);

// The result's fields; the layout (ranks, devices per rank) is startup_json's.
nlohmann::json to_json(const EvalResult& r, const EvalOptions& options);

// The result as a fixed-width table with units, the examples per rank, and whether every
// example was counted once (or a warning with the number missed). For a model that computes
// nothing (EvalModel::computes false) the time columns are labelled as data movement.
std::string result_table(const EvalResult& r, const EvalOptions& options, const EvalModel& model);

// "# data F: N examples, model M, per-device batch B, strategy S".
std::string eval_header(const EvalOptions& options, const EvalShard& shard, const models::Classifier& model);

// Rank 0's progress display for run_eval (nothing elsewhere, or with --quiet): lines every
// --progress-seconds on a log, a bar on a terminal. progress() is what run_eval calls.
class EvalProgressDisplay {
 public:
  EvalProgressDisplay(const runtime::Context& ctx, const EvalOptions& options);
  EvalProgress progress();
  void close() { line_.close(); }

 private:
  bool shown_;
  double seconds_;
  ProgressLine line_;
};

// A pass stopped by a signal: where, and that nothing was written.
std::string stopped_text(const EvalResult& r);
// "# predictions: PATH (N rows; M not evaluated: predicted = -1)".
std::string predictions_line(const EvalResult& r, const std::string& path);

// The confusion matrix (rows: label, columns: predicted class) for up to 20 classes; "" for
// more (the JSON has it whatever the size).
std::string confusion_table(const ConfusionMatrix& m);

}  // namespace spmd::workloads
