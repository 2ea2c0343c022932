#pragma once
// --standardize, with Spark MLlib's meaning (LogisticRegression standardization=true): the
// solver works on features divided by their standard deviation, never centred (sparse data
// stays sparse), so that the penalty treats every feature alike whatever its units; the
// weights are reported in the original scale (W_f = W'_f / std_f), and a feature of
// standard deviation 0 gets weight 0. The std is the weighted sample one, as Spark's
// summarizer computes it: var_f = (S_wxx - S_wx^2 / S_w) / (S_w - S_ww / S_w), with S_w = sum
// of the row weights w_i (1 unweighted), S_ww of their squares, S_wx = sum w_i x_if, S_wxx =
// sum w_i x_if^2.
//
// Nothing is copied: x' W' = x (W' / std), so the objective runs its kernels on W = W' * inv
// (inv_f = 1 / std_f, 0 for std 0) and maps the gradient back (dW' = dW * inv); the penalty
// is on W'. The sums are per global chunk, added in the objective's fixed tree order, so the
// scales have the same bits on every layout.
#include <cstdint>
#include <span>
#include <vector>

#include "spmd/data/dataset.hpp"
#include "spmd/data/sparse_matrix.hpp"
#include "spmd/runtime/context.hpp"

namespace spmd::workloads {

// Collective. inv [row_size]: 1 / std of each stored feature (0 where the std is 0, or is
// the column is constant: its min and max agree), 1 for the intercept's column. The rank's rows are
// whole chunks of chunk_rows (logreg_rank_rows); row_weights empty or [rows].
std::vector<double> logreg_inverse_scales(const runtime::Context& ctx, const data::LoadedShard& shard,
                                          std::int64_t chunk_rows, std::span<const double> row_weights);
std::vector<double> logreg_inverse_scales(const runtime::Context& ctx, const data::SparseShard& shard,
                                          std::int64_t chunk_rows, std::span<const double> row_weights);

}  // namespace spmd::workloads
