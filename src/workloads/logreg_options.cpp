#include "spmd/data/dataset.hpp"
#include "spmd/workloads/logreg.hpp"

namespace spmd::workloads {

const char* to_string(LogregPenalty penalty) {
  switch (penalty) {
    case LogregPenalty::l2: return "l2";
    case LogregPenalty::l1: return "l1";
    case LogregPenalty::elasticnet: return "elasticnet";
  }
  return "?";
}

LogregPenalty parse_logreg_penalty(const std::string& text) {
  for (auto p : {LogregPenalty::l2, LogregPenalty::l1, LogregPenalty::elasticnet})
    if (text == to_string(p)) return p;
  throw Error("--penalty must be l2, l1 or elasticnet (got '" + text + "')");
}

double LogregOptions::l1_strength() const {
  if (penalty == LogregPenalty::l1) return reg;
  if (penalty == LogregPenalty::elasticnet) return reg * l1_ratio;
  return 0.0;
}

double LogregOptions::l2_strength() const {
  if (penalty == LogregPenalty::l2) return reg > 0 ? reg : l2;
  if (penalty == LogregPenalty::elasticnet) return reg * (1.0 - l1_ratio);
  return 0.0;
}

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
      {"l2", SPMD_MEMBER(l2),
       "L2 regularisation: adds l2/2 * ||W||^2 (>= 0; never the intercept). sklearn's C is 1 / (l2 * N). The same as "
       "--penalty l2 --reg L2",
       non_negative},
      {"penalty", SPMD_TEXT(penalty, to_string, parse_logreg_penalty),
       "the penalty on W (never the intercept), of strength --reg: l2 (reg/2 ||W||^2), l1 (reg ||W||_1) or elasticnet "
       "(reg (l1_ratio ||W||_1 + (1 - l1_ratio)/2 ||W||^2)); an L1 part is solved by OWL-QN. sklearn's C = 1 / (reg * N)"},
      {"reg", SPMD_MEMBER(reg), "the penalty's strength (>= 0; Spark's regParam; sklearn's C = 1 / (reg * N))",
       non_negative},
      {"l1-ratio", SPMD_MEMBER(l1_ratio),
       "--penalty elasticnet: the L1 share in [0, 1] (sklearn's l1_ratio, Spark's elasticNetParam)"},
      {"sample-weight-key", SPMD_MEMBER(sample_weight_key),
       "weight each row by this dataset [N] of the data file (sklearn's sample_weight; finite, >= 0). The loss is "
       "still divided by N, so sklearn's C = 1 / (reg * N) holds"},
      {"class-weight", SPMD_MEMBER(class_weight),
       "weight each row by its class's weight: balanced (sklearn's: N / (K * count of the class)), a list W0,W1,... "
       "or a text file of one weight per class; multiplies --sample-weight-key's"},
      {"init-weights", SPMD_MEMBER(init_weights),
       "start from this weights file (a --weights-out of the same features, classes and intercept) instead of zeros "
       "(warm start)",
       input_file},
      {"fit-intercept", SPMD_MEMBER(fit_intercept),
       "logits x W + b with an intercept b [C] fitted too (sklearn's fit_intercept=True): b starts at 0 and is not "
       "penalised by --l2"},
      {"standardize", SPMD_MEMBER(standardize),
       "solve on each feature divided by its standard deviation (not centred: sparse stays sparse), so that the "
       "penalty treats features alike whatever their units, as Spark's standardization; W is reported in the "
       "original scale, 0 for a constant feature"},
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

void LogregOptions::validate() const {
  optim::validate(solver);
  if (!(l1_ratio >= 0 && l1_ratio <= 1))
    throw Error("--l1-ratio must be in [0, 1] (got " + std::to_string(l1_ratio) + ")");
  if (l2 > 0 && reg > 0)
    throw Error("--l2 and --reg both set: --l2 L is --penalty l2 --reg L; give the strength once");
  if (l2 > 0 && penalty != LogregPenalty::l2)
    throw Error(std::string("--l2 is the strength of --penalty l2; with --penalty ") + to_string(penalty) +
                " give the strength as --reg");
  if (l1_ratio != 0.5 && penalty != LogregPenalty::elasticnet)
    throw Error(std::string("--l1-ratio applies to --penalty elasticnet only (the penalty is ") + to_string(penalty) +
                ")");
  if (l1_strength() > 0 && solver.stepsize > 0)
    throw Error("--stepsize (a fixed step) and an L1 penalty: OWL-QN needs its projected line search; leave --stepsize 0");
}

}  // namespace spmd::workloads
