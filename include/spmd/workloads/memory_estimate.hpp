#pragma once
// Each workload's memory per rank, computed from the datasets' shapes (metadata only) and
// the options before anything is allocated, and checked against the limits
// (runtime/memory_limits.hpp). An estimate is the sum of named parts, so a refusal says what
// the memory is for.
#include <string>
#include <utility>
#include <vector>

#include "spmd/data/dataset.hpp"
#include "spmd/models/classifier.hpp"
#include "spmd/runtime/context.hpp"
#include "spmd/workloads/eval.hpp"

namespace spmd::workloads {

struct MemoryEstimate {
  std::vector<std::pair<std::string, double>> parts;  // (what, bytes)
  double total() const;
  std::string describe() const;  // "labels 9.2 GiB + batches 4.0 MiB"
};

// The per-device batch eval uses: --per-device-batch and --min-device-batch capped at the
// most rows a device can get in one step (ceil(ceil(N / P) / d)): a larger batch only adds
// padding, which changes no count. drop-remainder is refused instead when its batch exceeds
// the smallest rank's rows per device (it would evaluate nothing). Returns a note for the
// log when it capped (empty otherwise). Same on every rank (from N, P, d).
std::string fit_eval_batch(const runtime::Context& ctx, EvalOptions& o, std::int64_t rows);

// eval on this rank's rows: labels, the prefetched blocks, each device's batch, model and
// workspace, and the predictions' columns when `predictions`.
MemoryEstimate eval_memory(const runtime::Context& ctx, const EvalOptions& o, const data::DatasetShape& shape,
                           const models::Classifier& model, bool predictions, bool benchmark);

// logreg's shard (float32 features, + 1 with the intercept; labels) when `with_data`, and the
// solver's vectors over F x C weights (history pairs, iterate, gradients, chunk partials).
MemoryEstimate logreg_memory(std::int64_t rank_rows, std::int64_t features, int classes, int history, bool with_data);

// The ensemble's sets as every rank holds them (stored type, labels), each member's
// parameters, momentum and gradient, and one training and one test batch decoded per device.
MemoryEstimate ensemble_memory(const data::DatasetShape& train, std::int64_t train_rows, const data::DatasetShape& test,
                               std::int64_t test_rows, double member_parameters, int devices, int batch, int eval_batch);

// Collective: refuses (CollectiveError on every rank) what does not fit, naming `hint`;
// returns the dry-run line.
std::string require_memory_fits(const runtime::Context& ctx, const MemoryEstimate& e, const std::string& hint);

}  // namespace spmd::workloads
