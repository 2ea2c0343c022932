#pragma once
// spmd logreg: data-parallel multiclass logistic regression with L-BFGS.
//
// Rows are split over ranks and devices in whole chunks of models::kLogregChunkRows global
// rows, with part boundaries at the chunk boundaries nearest to even row shares. Each
// evaluation computes one partial (loss sum, gradient sum; double) per chunk on the device
// that owns it; a rank adds its chunks into the few nodes of a fixed binary tree over all
// chunks (models/partial_sum_tree.hpp); the nodes that straddle ranks are added on one rank
// each, with point-to-point messages of one record (loss and gradient packed together)
// along rank boundaries, and the total is broadcast (workloads/tree_sum_exchange.hpp): a
// rank moves O(log) records per evaluation, not O(P). The sum therefore never depends on
// the number of ranks or devices: the iterates are bitwise identical on every layout. The
// solver (optim/lbfgs.hpp) knows nothing of this; it sees an objective.
//
// With fit_intercept the model is logits = x W + b, with the semantics of sklearn's
// LogisticRegression(fit_intercept=True) and JAXopt's multiclass_logreg_with_intercept: b
// starts at 0 and is not penalised by l2. It is fitted as one more row of weights over a
// column of ones that the loader appends to every row (data::OnesColumn), so the kernels,
// the chunked sums and their layout independence are those of the model without it.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "spmd/data/dataset.hpp"
#include "spmd/models/logreg.hpp"
#include "spmd/optim/lbfgs.hpp"
#include "spmd/runtime/context.hpp"
#include "spmd/workloads/option_list.hpp"

namespace spmd::workloads {

// The penalty on W (never on the intercept b), with strength reg (Spark's regParam and
// elasticNetParam; sklearn's C = 1 / (reg * N), l1_ratio = l1_ratio):
//   l2          reg / 2 ||W||^2
//   l1          reg ||W||_1                                     (solved by OWL-QN)
//   elasticnet  reg (l1_ratio ||W||_1 + (1 - l1_ratio) / 2 ||W||^2)   (OWL-QN when l1_ratio > 0)
enum class LogregPenalty { l2, l1, elasticnet };
const char* to_string(LogregPenalty penalty);
LogregPenalty parse_logreg_penalty(const std::string& text);  // throws spmd::Error naming --penalty

// Defaults are the member initializers (the solver's: optim::LBFGSParams); constraints and
// help are in the declarations (logreg_options.cpp, workloads/option_list.hpp).
struct LogregOptions {
  std::string data;
  data::DatasetKeys keys{"X", "y"};  // resolved from the file and the key options
  int classes = 0;  // 0: max label + 1 over the whole file
  data::FeatureScale input_scale;  // auto: uint8 / 255, other types as stored (not images)
  optim::LBFGSParams<double> solver;
  double l2 = 0.0;  // adds l2/2 * ||W||^2 (never b: sklearn's C = 1 / (l2 * rows)); = --penalty l2 --reg l2
  LogregPenalty penalty = LogregPenalty::l2;
  double reg = 0.0;       // the penalty's strength (0: none)
  double l1_ratio = 0.5;  // elasticnet's share of L1 (sklearn's l1_ratio, Spark's elasticNetParam)
  // A regularisation path: one solve per strength in this order, each from the last one's
  // weights; --weights-out FILE then writes FILE-1.h5, FILE-2.h5, ... (logreg_path_file).
  std::vector<double> reg_path;
  std::string init_weights;  // "": start from zeros; else a --weights-out file of the same shape
  std::string sample_weight_key;  // "": unweighted; else a dataset [N] of the data file (logreg_row_weights.hpp)
  std::string class_weight;       // "": none; "balanced", "W0,W1,..." or a text file of them
  bool fit_intercept = false;  // logits x W + b with b fitted too
  bool standardize = false;    // solve on features / their std (Spark's standardization; logreg_standardize.hpp)
  std::string weights_out;     // "": not written
  std::string metrics_csv;     // "": not written
  bool verify_replicas = false;  // compare the iterate's hash over ranks every iteration (always in debug builds)
  bool quiet = false;
  // The objective's arithmetic; float64 reaches float64's optimum (the features are still
  // read as float32) at about twice the time per evaluation.
  models::LogregPrecision precision = models::LogregPrecision::float32;

  // The strengths the objective adds: l1 ||W||_1 + l2/2 ||W||^2.
  double l1_strength() const;
  double l2_strength() const;

  static const std::vector<Option<LogregOptions>>& declared();
  void validate() const;  // the rules between members; throws spmd::Error naming the option
};

struct LogregIterationRecord {
  int point = 1;  // the solve of a regularisation path it belongs to (1-based; 1 without --reg-path)
  int iteration = 0;
  double value = 0, error = 0, stepsize = 0;
  long long evaluations = 0;
  double seconds = 0;  // wall time of this iteration (all its evaluations)
};

// One solve of a regularisation path (--reg-path).
struct LogregPathPoint {
  double reg = 0, l1 = 0, l2 = 0;  // the strength given, and what the objective adds
  optim::LBFGSStatus status = optim::LBFGSStatus::max_iterations;
  int iterations = 0;
  double value = 0, error = 0;
  long long evaluations = 0;
  double solve_seconds = 0;
  std::int64_t nonzero_weights = 0;  // entries of W that are not 0
  std::vector<float> W, bias;
  std::vector<double> W64, bias64;
};

// The weights file of path point k (0-based) of n: FILE itself when n == 1, else FILE with
// "-<k+1>" before its extension (w.h5 -> w-1.h5, w-2.h5, ...).
std::string logreg_path_file(const std::string& weights_out, std::size_t k, std::size_t n);

struct LogregResult {
  optim::LBFGSStatus status = optim::LBFGSStatus::max_iterations;
  int stop_signal = 0;  // status stopped: the signal agreed between iterations (runtime/stop_request.hpp)
  int iterations = 0;
  double value = 0, error = 0;
  long long evaluations = 0;
  double load_seconds = 0;   // reading this rank's rows (max over ranks)
  double setup_seconds = 0;  // start of the run to the end of iteration 1 (includes loading)
  double solve_seconds = 0;  // the solver loop
  double seconds_per_evaluation = 0;  // solve_seconds / evaluations
  std::int64_t rows = 0;
  int features = 0, classes = 0;
  std::vector<std::int64_t> rows_per_rank;
  std::vector<LogregIterationRecord> history;
  std::vector<float> W;     // [features, classes]
  std::vector<float> bias;  // [classes] with fit_intercept, else empty
  std::vector<double> W64, bias64;  // the same as solved, in double (what float64 writes)
  std::vector<std::string> warnings;  // about the data (data::LoadedShard::warnings)
  std::string weighting;              // how rows are weighted ("" unweighted)
  std::vector<double> class_weights;  // --class-weight's, as applied (empty: none)
  double weight_total = 0;            // sum of the row weights (N when unweighted)
  std::int64_t chunk_rows = 0;        // the rows' global chunk size (the sums' order)
  std::string sparse;                 // a sparse matrix's description ("" dense rows)
  std::int64_t nonzeros = 0;          // its stored entries
  std::string labels;                 // a sparse matrix's label column, described
  std::vector<std::string> class_names;  // an AnnData categorical column's categories
  std::int64_t constant_features = 0;    // --standardize: features of std 0 (their weights stay 0)
  // Every solve in order (one without --reg-path); the fields above (status ... bias64) are
  // the last one's. history holds every solve's iterations, each counted from 1.
  std::vector<LogregPathPoint> path;
};

// Collective. on_warning runs on every rank with each warning about the data as soon as it
// is loaded (before the solve; the same text on every rank, LogregResult::warnings keeps
// them too); on_iteration runs on every rank after each iteration (rank 0 prints).
LogregResult run_logreg(const runtime::Context& ctx, const LogregOptions& options,
                        const std::function<void(const LogregIterationRecord&)>& on_iteration = {},
                        const std::function<void(const std::string&)>& on_warning = {});


}  // namespace spmd::workloads
