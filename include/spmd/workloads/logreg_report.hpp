#pragma once
// What spmd logreg prints and writes about a solve: the summary table with the status and what
// it means, the JSON summary and the per-iteration CSV.
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "spmd/runtime/context.hpp"
#include "spmd/workloads/logreg.hpp"
#include "spmd/workloads/report.hpp"

namespace spmd::workloads {

// "# data F  solver L-BFGS history m, line search ..., maxiter, tol, l2, intercept".
std::string run_header(const LogregOptions& o);

// Rank 0's per-iteration display (nothing elsewhere, or with --quiet): a table on a log, a
// progress bar on a terminal. iteration() is run_logreg's on_iteration.
class LogregProgressDisplay {
 public:
  LogregProgressDisplay(const runtime::Context& ctx, const LogregOptions& o);
  std::function<void(const LogregIterationRecord&)> iteration();
  void close() { line_.close(); }

 private:
  bool shown_;
  int maxiter_;
  Table table_;
  ProgressLine line_;
};

// The status, iterations, value, error, evaluations and times as a fixed-width table, the
// problem's size, and for precision_limit, stopped and linesearch_failed what happened and
// what to change. For rank 0 to print.
std::string summary_text(const LogregResult& r, const LogregOptions& o, const runtime::Context& ctx);

// The solve's fields; the layout (ranks, devices per rank) is startup_json's.
nlohmann::json to_json(const LogregResult& r, const LogregOptions& o);
std::string metrics_csv(const LogregResult& r);

}  // namespace spmd::workloads
