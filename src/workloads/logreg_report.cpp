#include "spmd/workloads/logreg_report.hpp"

#include <cstdio>

#include "spmd/runtime/stop_request.hpp"
#include "spmd/workloads/report.hpp"

namespace spmd::workloads {

std::string summary_text(const LogregResult& r, const LogregOptions& o, const runtime::Context& ctx) {
  Table summary({{"status", "", 18}, {"iterations", "", 10}, {"value", "", 14}, {"error", "", 11},
                 {"evals", "", 6}, {"setup", "s", 8}, {"solve", "s", 8}, {"per eval", "ms", 9}});
  std::string out = summary.header() +
                    summary.row({optim::to_string(r.status), std::to_string(r.iterations), format("%.8f", r.value),
                                 format("%.3e", r.error), std::to_string(r.evaluations),
                                 format("%.3f", r.setup_seconds), format("%.3f", r.solve_seconds),
                                 format("%.2f", r.seconds_per_evaluation * 1e3)}) +
                    format("# %lld rows x %d features%s, %d classes, over %d rank(s) x %d device(s)\n",
                           static_cast<long long>(r.rows), r.features, o.fit_intercept ? " + intercept" : "", r.classes,
                           ctx.size(), ctx.devices_per_rank()) +
                    (r.sparse.empty() ? std::string()
                                      : format("# sparse features %s; labels %s; chunks of %lld rows\n",
                                               r.sparse.c_str(), r.labels.c_str(),
                                               static_cast<long long>(r.chunk_rows))) +
                    (r.weighting.empty() ? std::string()
                                         : format("# rows weighted by %s (weights sum to %.6g over %lld rows)\n",
                                                  r.weighting.c_str(), r.weight_total, static_cast<long long>(r.rows)));
  if (r.path.size() > 1) {
    Table path({{"point", "", 5}, {"reg", "", 11}, {"status", "", 18}, {"iterations", "", 10}, {"value", "", 14},
                {"non-zero W", "", 10}, {"solve", "s", 8}});
    out += "# regularisation path (each point from the last one's weights):\n" + path.header();
    for (std::size_t k = 0; k < r.path.size(); ++k) {
      const auto& p = r.path[k];
      out += path.row({std::to_string(k + 1), format("%.4g", p.reg), optim::to_string(p.status),
                       std::to_string(p.iterations), format("%.8f", p.value), std::to_string(p.nonzero_weights),
                       format("%.3f", p.solve_seconds)});
    }
    if (r.path.size() < o.reg_path.size())
      out += format("# the path ended after point %zu of %zu (%s)\n", r.path.size(), o.reg_path.size(),
                    optim::to_string(r.status));
  }
  if (r.status == optim::LBFGSStatus::precision_limit && o.precision == models::LogregPrecision::float32)
    out += format(
        "# precision_limit: no step can lower the objective by an amount float32 represents at this value "
        "(%.8g): the gradient norm reached, %.3e, is as small as this arithmetic allows here (--tol asked %.3e). "
        "The objective and gradient are computed in float32 with double accumulation; loosen --tol to about "
        "the error reached, or use --precision float64 (double arithmetic, about twice the time per "
        "evaluation) to go further.\n",
        r.value, r.error, static_cast<double>(o.solver.tol));
  else if (r.status == optim::LBFGSStatus::precision_limit)
    out += format(
        "# precision_limit: no step can lower the objective by an amount float64 represents at this value "
        "(%.17g): the gradient norm reached, %.3e, is as small as double arithmetic allows here (--tol asked "
        "%.3e); loosen --tol to about the error reached.\n",
        r.value, r.error, static_cast<double>(o.solver.tol));
  else if (r.status == optim::LBFGSStatus::stopped)
    out += format("# stopped by %s after iteration %d of at most %d: the weights and results are that "
                  "iterate's (status stopped)\n",
                  runtime::signal_name(r.stop_signal).c_str(), r.iterations, o.solver.maxiter);
  else if (r.status == optim::LBFGSStatus::linesearch_failed && o.l1_strength() > 0)
    out += format(
        "# linesearch_failed: no step along OWL-QN's projected path lowered the objective within "
        "--max-linesearch %d evaluations (pseudo-gradient norm %.3e); try a larger --max-linesearch.\n",
        o.solver.max_linesearch, r.error);
  else if (r.status == optim::LBFGSStatus::linesearch_failed)
    out += format(
        "# linesearch_failed: no step along the search direction met the Wolfe conditions within "
        "--max-linesearch %d evaluations (gradient norm %.3e); try --linesearch backtracking or a larger "
        "--max-linesearch.\n",
        o.solver.max_linesearch, r.error);
  return out;
}

nlohmann::json to_json(const LogregResult& r, const LogregOptions& o) {
  nlohmann::json j;
  j["status"] = optim::to_string(r.status);
  if (r.status == optim::LBFGSStatus::stopped) j["stopped_by"] = runtime::signal_name(r.stop_signal);
  j["iterations"] = r.iterations;
  j["value"] = r.value;
  j["error"] = r.error;
  j["evaluations"] = r.evaluations;
  j["load_seconds"] = r.load_seconds;
  j["setup_seconds"] = r.setup_seconds;
  j["solve_seconds"] = r.solve_seconds;
  j["seconds_per_evaluation"] = r.seconds_per_evaluation;
  j["rows"] = r.rows;
  j["features"] = r.features;
  j["classes"] = r.classes;
  j["rows_per_rank"] = r.rows_per_rank;
  j["chunk_rows"] = r.chunk_rows;
  if (!r.sparse.empty()) {
    j["sparse"] = r.sparse;
    j["nonzeros"] = r.nonzeros;
    j["labels"] = r.labels;
    if (!r.class_names.empty()) j["class_names"] = r.class_names;
  }
  j["linesearch"] = optim::to_string(o.solver.linesearch);
  j["history_size"] = o.solver.history;
  j["maxiter"] = o.solver.maxiter;
  j["tol"] = o.solver.tol;
  j["solver"] = (r.path.empty() ? o.l1_strength() : r.path.back().l1) > 0 ? "owlqn" : "lbfgs";
  j["penalty"] = to_string(o.penalty);
  j["reg"] = o.penalty == LogregPenalty::l2 && o.reg == 0 ? o.l2 : o.reg;
  if (o.penalty == LogregPenalty::elasticnet) j["l1_ratio"] = o.l1_ratio;
  // What the objective adds, l1 ||W||_1 + l2/2 ||W||^2 (a path: its last point's).
  j["l1"] = r.path.empty() ? o.l1_strength() : r.path.back().l1;
  j["l2"] = r.path.empty() ? o.l2_strength() : r.path.back().l2;
  if (!o.init_weights.empty()) j["init_weights"] = o.init_weights;
  if (!o.sample_weight_key.empty()) j["sample_weight_key"] = o.sample_weight_key;
  if (!r.class_weights.empty()) j["class_weights"] = r.class_weights;
  j["weight_total"] = r.weight_total;
  j["fit_intercept"] = o.fit_intercept;
  j["standardize"] = o.standardize;
  if (!o.reg_path.empty()) {
    j["reg_path"] = o.reg_path;
    j["path"] = nlohmann::json::array();
    for (std::size_t k = 0; k < r.path.size(); ++k) {
      const auto& p = r.path[k];
      j["path"].push_back({{"reg", p.reg}, {"l1", p.l1}, {"l2", p.l2}, {"status", optim::to_string(p.status)},
                           {"iterations", p.iterations}, {"value", p.value}, {"error", p.error},
                           {"evaluations", p.evaluations}, {"solve_seconds", p.solve_seconds},
                           {"nonzero_weights", p.nonzero_weights},
                           {"weights_out", o.weights_out.empty() ? std::string()
                                                                 : logreg_path_file(o.weights_out, k, r.path.size())}});
    }
  }
  if (o.standardize) j["constant_features"] = r.constant_features;
  j["precision"] = models::to_string(o.precision);
  nlohmann::json h = nlohmann::json::array();
  for (const auto& it : r.history)
    h.push_back({{"point", it.point}, {"iteration", it.iteration}, {"value", it.value}, {"error", it.error},
                 {"stepsize", it.stepsize}, {"evaluations", it.evaluations}, {"seconds", it.seconds}});
  j["history"] = h;
  return j;
}

// A regularisation path's rows start with the solve they belong to (point, 1-based, and its
// strength): its iterations are counted from 1 in each.
std::string metrics_csv(const LogregResult& r) {
  const bool path = r.path.size() > 1;
  std::string out = std::string(path ? "point,reg," : "") + "iteration,value,error,stepsize,evaluations,seconds\n";
  for (const auto& it : r.history) {
    if (path) {
      const auto k = static_cast<std::size_t>(it.point - 1);
      out += format("%d,%.17g,", it.point, k < r.path.size() ? r.path[k].reg : 0.0);
    }
    out += format("%d,%.17g,%.17g,%.17g,%lld,%.9f\n", it.iteration, it.value, it.error, it.stepsize, it.evaluations,
                  it.seconds);
  }
  return out;
}

namespace {
std::string penalty_text(const LogregOptions& o) {
  if (!o.reg_path.empty()) {
    std::string values;
    for (std::size_t k = 0; k < o.reg_path.size(); ++k) values += (k ? "," : "") + format("%g", o.reg_path[k]);
    return std::string(to_string(o.penalty)) + " path " + values +
           (o.penalty == LogregPenalty::elasticnet ? format(" (l1_ratio %g)", o.l1_ratio) : std::string());
  }
  switch (o.penalty) {
    case LogregPenalty::l2: return format("l2 %g", o.l2_strength());
    case LogregPenalty::l1: return format("l1 %g", o.l1_strength());
    case LogregPenalty::elasticnet:
      return format("elasticnet reg %g, l1_ratio %g (l1 %g, l2 %g)", o.reg, o.l1_ratio, o.l1_strength(),
                    o.l2_strength());
  }
  return "?";
}
}  // namespace

std::string run_header(const LogregOptions& o) {
  const bool owlqn = o.reg_path.empty() ? o.l1_strength() > 0 : o.penalty != LogregPenalty::l2;
  const char* search = owlqn ? "projected backtracking"
                       : o.solver.stepsize > 0 ? "none (fixed step)"
                                               : optim::to_string(o.solver.linesearch);
  return format("# data %s  solver %s history %d, line search %s, maxiter %d, tol %g, penalty %s, intercept %s, "
                "precision %s%s%s\n",
                o.data.c_str(), owlqn ? "OWL-QN" : "L-BFGS", o.solver.history, search, o.solver.maxiter, o.solver.tol,
                penalty_text(o).c_str(), o.fit_intercept ? "fitted (not penalised)" : "none",
                models::to_string(o.precision), o.standardize ? ", standardized features" : "",
                o.init_weights.empty() ? "" : (", from " + o.init_weights).c_str()) +
         (o.sample_weight_key.empty() && o.class_weight.empty()
              ? std::string()
              : "# weights  rows" + (o.sample_weight_key.empty() ? "" : " x sample weight '" + o.sample_weight_key + "'") +
                    (o.class_weight.empty() ? "" : " x class weight " + o.class_weight) + "\n");
}

LogregProgressDisplay::LogregProgressDisplay(const runtime::Context& ctx, const LogregOptions& o)
    : shown_(ctx.is_root() && !o.quiet),
      maxiter_(o.solver.maxiter),
      table_({{"iter", "", 5}, {"value", "", 14}, {"error", "|grad|", 12}, {"step", "", 10}, {"evals", "", 6},
              {"time", "ms", 9}}),
      line_(shown_) {
  if (shown_ && !line_.live()) {
    std::fputs(table_.header().c_str(), stdout);
    std::fflush(stdout);
  }
}

std::function<void(const LogregIterationRecord&)> LogregProgressDisplay::iteration() {
  return [this](const LogregIterationRecord& it) {
    if (!shown_) return;
    if (line_.live()) {
      line_.update("iter", it.iteration, maxiter_, format("value %.6f  error %.3e", it.value, it.error));
      return;
    }
    std::fputs(table_.row({std::to_string(it.iteration), format("%.8f", it.value), format("%.4e", it.error),
                           format("%.3e", it.stepsize), std::to_string(it.evaluations), format("%.2f", it.seconds * 1e3)})
                   .c_str(),
               stdout);
    std::fflush(stdout);
  };
}

}  // namespace spmd::workloads
