#include "spmd/workloads/logreg_standardize.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "spmd/models/partial_sum_tree.hpp"
#include "spmd/runtime/collectives.hpp"
#include "spmd/workloads/logreg_objective.hpp"
#include "spmd/workloads/tree_sum_exchange.hpp"

namespace spmd::workloads {

namespace {

// A chunk's record: [S_w, S_ww, S_wx (F), S_wxx (F)], rows in order.
// each_row(r, add) calls add(feature, value) for row r's stored values.
template <class EachRow>
std::vector<double> inverse_scales(const runtime::Context& ctx, std::int64_t global_rows, std::int64_t first_row,
                                   std::int64_t rows, std::int64_t features, bool ones_column,
                                   std::int64_t chunk_rows, std::span<const double> row_weights, EachRow&& each_row) {
  const auto F = static_cast<std::size_t>(features);
  const std::size_t record = 2 + 2 * F;
  const std::int64_t global_chunks = (global_rows + chunk_rows - 1) / chunk_rows;
  std::vector<std::int64_t> bounds;
  for (int r = 0; r < ctx.size(); ++r) bounds.push_back(balanced_chunk_range(global_rows, chunk_rows, r, ctx.size()).first);
  bounds.push_back(global_chunks);
  models::PartialSumTree tree(global_chunks, record);
  // A constant column is found exactly by its range (min and max are the same bits whatever
  // the order), not by a variance that cancellation leaves at a few ulps. A row without an
  // entry for a column (sparse) holds 0 there.
  std::vector<double> highest(F, -std::numeric_limits<double>::infinity()), negated_lowest = highest;
  std::vector<std::int64_t> seen(F, 0);
  tree.reset(first_row / chunk_rows);
  for (std::int64_t first = 0; first < rows; first += chunk_rows) {
    double* out = tree.leaf_slot();
    std::fill(out, out + record, 0.0);
    double* sx = out + 2;
    double* sxx = out + 2 + F;
    for (std::int64_t r = first; r < std::min(rows, first + chunk_rows); ++r) {
      const double w = row_weights.empty() ? 1.0 : row_weights[static_cast<std::size_t>(r)];
      out[0] += w;
      out[1] += w * w;
      each_row(r, [&](std::int64_t f, float value) {
        const double wx = w * static_cast<double>(value);
        sx[f] += wx;
        sxx[f] += wx * static_cast<double>(value);
        const auto k = static_cast<std::size_t>(f);
        highest[k] = std::max(highest[k], static_cast<double>(value));
        negated_lowest[k] = std::max(negated_lowest[k], -static_cast<double>(value));
        ++seen[k];
      });
    }
    tree.commit_leaf();
  }
  for (std::size_t f = 0; f < F; ++f)
    if (seen[f] < rows) {
      highest[f] = std::max(highest[f], 0.0);
      negated_lowest[f] = std::max(negated_lowest[f], 0.0);
    }
  runtime::allreduce_max(ctx, std::span<double>(highest));
  runtime::allreduce_max(ctx, std::span<double>(negated_lowest));
  TreeSumExchange exchange(ctx, global_chunks, bounds, record);
  const double* total = exchange.total(tree);
  const double sw = total[0], sww = total[1];
  const double denominator = sw - (sw > 0 ? sww / sw : 0.0);
  std::vector<double> inv(F + (ones_column ? 1 : 0), 1.0);
  for (std::size_t f = 0; f < F; ++f) {
    const double var = denominator > 0 ? (total[2 + F + f] - total[2 + f] * total[2 + f] / sw) / denominator : 0.0;
    const bool constant = highest[f] == -negated_lowest[f];
    inv[f] = constant || !(var > 0) ? 0.0 : 1.0 / std::sqrt(var);
  }
  return inv;
}

}  // namespace

std::vector<double> logreg_inverse_scales(const runtime::Context& ctx, const data::LoadedShard& shard,
                                          std::int64_t chunk_rows, std::span<const double> row_weights) {
  const std::int64_t stride = shard.row_size(), F = shard.sample_size;
  return inverse_scales(ctx, shard.global_rows, shard.first_row, shard.rows, F, shard.ones_column, chunk_rows,
                        row_weights, [&](std::int64_t r, auto&& add) {
                          const float* x = shard.features.data() + r * stride;
                          for (std::int64_t f = 0; f < F; ++f) add(f, x[f]);
                        });
}

std::vector<double> logreg_inverse_scales(const runtime::Context& ctx, const data::SparseShard& shard,
                                          std::int64_t chunk_rows, std::span<const double> row_weights) {
  const std::int64_t F = shard.sample_size();
  return inverse_scales(ctx, shard.global_rows, shard.first_row, shard.rows, F, shard.ones_column, chunk_rows,
                        row_weights, [&](std::int64_t r, auto&& add) {
                          for (std::int64_t k = shard.row_start[static_cast<std::size_t>(r)];
                               k < shard.row_start[static_cast<std::size_t>(r + 1)]; ++k) {
                            const std::int32_t f = shard.columns[static_cast<std::size_t>(k)];
                            if (f < F) add(f, shard.values[static_cast<std::size_t>(k)]);  // not the intercept's
                          }
                        });
}

}  // namespace spmd::workloads
