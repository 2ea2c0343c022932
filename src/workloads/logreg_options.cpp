#include "spmd/data/dataset.hpp"
#include "spmd/workloads/logreg.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>

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
std::vector<double> parse_reg_path(const std::string& text) {
  std::vector<double> values;
  if (text.empty()) return values;  // the default: no path
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (item.empty() || end == item.c_str() || *end != '\0' || !(v >= 0) || !std::isfinite(v))
      throw Error("--reg-path must be a comma-separated list of strengths >= 0, such as 1e-2,1e-3,1e-4 (got '" + text +
                  "': '" + item + "')");
    values.push_back(v);
    at = comma + 1;
  }
  return values;
}
std::string reg_path_text(const std::vector<double>& values) {
  std::string text;
  for (std::size_t k = 0; k < values.size(); ++k) {
    char number[32];
    std::snprintf(number, sizeof number, "%.17g", values[k]);
    text += (k ? "," : "") + std::string(number);
  }
  return text;
}
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
      {"reg-path", SPMD_TEXT(reg_path, reg_path_text, parse_reg_path),
       "a regularisation path: --reg's strengths a,b,c solved in this order, each warm-started from the last "
       "(largest first is fastest); --weights-out FILE.h5 writes FILE-1.h5, FILE-2.h5, ..."},
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
      {"metrics-csv", SPMD_MEMBER(metrics_csv),
       "per-iteration CSV: iteration,value,error,stepsize,evaluations,seconds (with --reg-path each row starts with "
       "point,reg: its solve, from 1, and that strength)",
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
  if (!reg_path.empty() && (l2 > 0 || reg > 0))
    throw Error("--reg-path gives the strengths; leave --reg and --l2 out");
  if (l2 > 0 && reg > 0)
    throw Error("--l2 and --reg both set: --l2 L is --penalty l2 --reg L; give the strength once");
  if (l2 > 0 && penalty != LogregPenalty::l2)
    throw Error(std::string("--l2 is the strength of --penalty l2; with --penalty ") + to_string(penalty) +
                " give the strength as --reg");
  if (l1_ratio != 0.5 && penalty != LogregPenalty::elasticnet)
    throw Error(std::string("--l1-ratio applies to --penalty elasticnet only (the penalty is ") + to_string(penalty) +
                ")");
  if ((l1_strength() > 0 || (!reg_path.empty() && penalty != LogregPenalty::l2)) && solver.stepsize > 0)
    throw Error("--stepsize (a fixed step) and an L1 penalty: OWL-QN needs its projected line search; leave --stepsize 0");
}

std::string logreg_path_file(const std::string& weights_out, std::size_t k, std::size_t n) {
  if (n <= 1) return weights_out;
  const auto slash = weights_out.rfind('/');
  const auto dot = weights_out.rfind('.');
  const bool has_extension = dot != std::string::npos && (slash == std::string::npos || dot > slash + 1);
  const std::string suffix = "-" + std::to_string(k + 1);
  return has_extension ? weights_out.substr(0, dot) + suffix + weights_out.substr(dot) : weights_out + suffix;
}

}  // namespace spmd::workloads
