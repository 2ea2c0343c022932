#pragma once
// Weighted rows for spmd logreg, with scikit-learn's meaning: row i counts w_i =
// sample_weight[i] * class_weight[y_i] times in the loss (both default to 1). The objective
// stays the sum over rows divided by the row count N (not by the weights' sum), so sklearn's
// C = 1 / (reg * N) holds as without weights (Spark divides by the weights' sum instead:
// its regParam is reg * N / sum(w)).
//   --sample-weight-key DATASET  a dataset [N] (or [N, 1]) of the data file: finite, >= 0
//   --class-weight balanced      N / (K * count_c), K the classes that have rows (sklearn's)
//   --class-weight W0,W1,...     one weight per class (C of them), or a text file of them
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "spmd/data/dataset.hpp"
#include "spmd/runtime/context.hpp"

namespace spmd::workloads {

struct RowWeights {
  std::vector<double> rows;           // [shard rows], or empty: unweighted
  std::vector<double> class_weights;  // [classes], or empty: none given
  double total = 0;                   // sum of every rank's row weights (N when unweighted)
  std::string description;            // for the start-up lines ("" unweighted)
};

// The rows to weigh: this rank's labels (rows [first_row, first_row + labels.size()) of
// global_rows) and the classes' global counts.
struct WeightedRows {
  std::int64_t global_rows = 0, first_row = 0;
  std::span<const std::int32_t> labels;
  std::span<const std::int64_t> class_counts;
  int classes = 0;
};

// Collective. Reads this rank's sample weights (rows [first_row, first_row + rows) of
// sample_weight_key in data_path; "" none) and applies class_weight ("" none). A weight that
// is negative, NaN or infinite, a dataset of the wrong shape or type, a class-weight list of
// the wrong length and all-zero weights end every rank with an error naming the dataset and
// row, or the option.
RowWeights logreg_row_weights(const runtime::Context& ctx, const std::string& data_path,
                              const std::string& sample_weight_key, const std::string& class_weight,
                              const WeightedRows& rows);

// The class weights of --class-weight (balanced needs the classes' global counts). Throws
// spmd::Error naming the option.
std::vector<double> parse_class_weights(const std::string& text, std::span<const std::int64_t> class_counts,
                                        int classes);

}  // namespace spmd::workloads
