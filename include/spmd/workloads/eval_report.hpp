#pragma once
// What spmd eval prints and writes about a run: the start-up dry run, the result table, the
// confusion matrix and the JSON summary. Rank 0 prints the returned text.
#include <string>

#include <nlohmann/json.hpp>

#include "spmd/models/classifier.hpp"
#include "spmd/runtime/context.hpp"
#include "spmd/workloads/eval.hpp"
#include "spmd/workloads/eval_models.hpp"

namespace spmd::workloads {

// --dry-run: from shapes alone, what each rank would do. Returned text is for rank 0.
std::string eval_dry_run(const runtime::Context& ctx, const EvalOptions& options, const models::Classifier& model,
                         nlohmann::json* json);

nlohmann::json to_json(const EvalResult& r, const EvalOptions& options, const runtime::Context& ctx);

// The result as a fixed-width table with units, the examples per rank, and whether every
// example was counted once (or a warning with the number missed). For a model that computes
// nothing (EvalModel::computes false) the time columns are labelled as data movement.
std::string result_table(const EvalResult& r, const EvalOptions& options, const EvalModel& model);

// The confusion matrix (rows: label, columns: predicted class) for up to 20 classes; "" for
// more (the JSON has it whatever the size).
std::string confusion_table(const ConfusionMatrix& m);

}  // namespace spmd::workloads
