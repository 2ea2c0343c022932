#include "spmd/data/dataset.hpp"
#include "spmd/workloads/logreg.hpp"

namespace spmd::workloads {

namespace {
models::LogregPrecision parse_precision(const std::string& text) { return models::parse_logreg_precision(text, "precision"); }
}  // namespace

const std::vector<Option<LogregOptions>>& LogregOptions::declared() {
  using namespace rule;
  using data::FeatureScale;
  static const std::vector<Option<LogregOptions>> list{
      {"data", SPMD_MEMBER(data), "HDF5 file with features [N, F...] and integer labels [N] (required)",
       required | input_file | mpi_io},
      {"classes", SPMD_MEMBER(classes), "number of classes C (0: max label + 1)",
       non_negative | at_most(data::kMaxClasses, "labels are class indices below it")},
      {"input-scale", SPMD_TEXT(input_scale, FeatureScale::text_of, FeatureScale::parse_other),
       "how stored features become float32: auto (uint8 / 255; other types as stored), none (as stored, uint8 too), "
       "or a factor such as 1/255"},
      {"maxiter", SPMD_MEMBER(solver.maxiter), "L-BFGS iterations at most (>= 1)"},
      {"tol", SPMD_MEMBER(solver.tol), "stop when the gradient's L2 norm is <= tol (JAXopt's state.error)"},
      {"history", SPMD_MEMBER(solver.history), "L-BFGS history size m (>= 1)"},
      {"stepsize", SPMD_MEMBER(solver.stepsize), "> 0: fixed step size; 0: line search"},
      {"linesearch", SPMD_TEXT(solver.linesearch, optim::to_string, optim::parse_line_search),
       "zoom (strong Wolfe, c1 1e-4, c2 0.9) or backtracking (Armijo, factor 0.5)"},
      {"max-linesearch", SPMD_MEMBER(solver.max_linesearch), "objective evaluations per line search at most (>= 1)"},
      {"l2", SPMD_MEMBER(l2), "L2 regularisation: adds l2/2 * ||W||^2 (>= 0; never the intercept). sklearn's C is 1 / (l2 * N)",
       non_negative},
      {"fit-intercept", SPMD_MEMBER(fit_intercept),
       "logits x W + b with an intercept b [C] fitted too (sklearn's fit_intercept=True): b starts at 0 and is not "
       "penalised by --l2"},
      {"weights-out", SPMD_MEMBER(weights_out),
       "write W [F, C] (and b [C] with --fit-intercept) here (HDF5, atomic) for spmd eval --model logreg", output_file},
      {"metrics-csv", SPMD_MEMBER(metrics_csv), "per-iteration CSV: iteration,value,error,stepsize,evaluations,seconds",
       output_file},
      {"verify-replicas", SPMD_MEMBER(verify_replicas),
       "check every evaluation that all ranks hold the same iterate (one extra allreduce)"},
      {"quiet", SPMD_MEMBER(quiet), "no per-iteration lines, only the summary"},
      {"precision", SPMD_TEXT(precision, models::to_string, parse_precision),
       "the objective's and gradient's arithmetic: float32 (fastest) or float64 (float64's optimum, ~2x the time per "
       "evaluation; the features are still read as float32)"},
  };
  return list;
}

void LogregOptions::validate() const { optim::validate(solver); }

}  // namespace spmd::workloads
