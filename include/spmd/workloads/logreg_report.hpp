#pragma once
// What spmd logreg prints and writes about a solve: the summary table with the status and what
// it means, the JSON summary and the per-iteration CSV.
#include <string>

#include <nlohmann/json.hpp>

#include "spmd/runtime/context.hpp"
#include "spmd/workloads/logreg.hpp"

namespace spmd::workloads {

// The status, iterations, value, error, evaluations and times as a fixed-width table, the
// problem's size, and for precision_limit, stopped and linesearch_failed what happened and
// what to change. For rank 0 to print.
std::string summary_text(const LogregResult& r, const LogregOptions& o, const runtime::Context& ctx);

nlohmann::json to_json(const LogregResult& r, const LogregOptions& o, const runtime::Context& ctx);
std::string metrics_csv(const LogregResult& r);

}  // namespace spmd::workloads
