#pragma once
// What spmd ensemble prints and writes about a training: the run's header line, where it
// starts (warnings, a resume), a fixed-width row per epoch, the summary, the JSON and the
// per-epoch CSV. Rank 0 prints the returned text.
#include <string>

#include <nlohmann/json.hpp>

#include "spmd/runtime/context.hpp"
#include "spmd/workloads/ensemble.hpp"
#include "spmd/workloads/report.hpp"

namespace spmd::workloads {

// "# 4 members (ranks x devices), batch 32, SGD lr 0.1 momentum 0.9, seed 0, train FILE".
std::string run_header(const runtime::Context& ctx, const EnsembleOptions& o);
// One epoch's row: losses, accuracies (the members' min..max), seconds, images/s per member.
std::string epoch_row(const EpochMetrics& e);
// Rank 0's display of a run (nothing elsewhere; progress lines not with --quiet): where it
// starts (a resumed run says so before it trains), then a progress line every
// --progress-every steps (0: 10 per epoch). events() fills start and progress.
class EnsembleDisplay {
 public:
  EnsembleDisplay(const runtime::Context& ctx, const EnsembleOptions& o);
  EnsembleEvents events();
  void close() { line_.close(); }

 private:
  const runtime::Context& ctx_;
  const EnsembleOptions& o_;
  ProgressLine line_;
};

// The model and data used, how a stopped run ended (and how to resume it), the speed and the
// parameters' digest.
std::string summary_text(const EnsembleResult& r, const EnsembleOptions& o);

// The run's fields; the layout (ranks, devices per rank) is startup_json's.
nlohmann::json to_json(const EnsembleResult& r, const EnsembleOptions& o);
std::string metrics_csv(const EnsembleResult& r);

}  // namespace spmd::workloads
