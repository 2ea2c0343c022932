#pragma once
// The data-parallel logistic-regression objective: value and gradient of the mean softmax
// cross-entropy over ALL rows of all ranks, computed from this rank's rows.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "spmd/data/dataset.hpp"
#include "spmd/data/sparse_matrix.hpp"
#include "spmd/models/device_models.hpp"
#include "spmd/models/logreg.hpp"
#include "spmd/models/partial_sum_tree.hpp"
#include "spmd/runtime/context.hpp"
#include "spmd/sharding/split.hpp"
#include "spmd/workloads/tree_sum_exchange.hpp"

namespace spmd::workloads {

// Part `part` of `parts` of `rows` rows cut in chunks of chunk_rows rows (the last one
// shorter), as a range of chunk indices: the parts' boundaries are the chunk boundaries
// nearest to i * rows / parts, so that the parts' row counts (not their chunk counts) are
// as even as whole chunks allow. Parts may be empty. Throws spmd::Error on bad arguments.
sharding::RowRange balanced_chunk_range(std::int64_t rows, std::int64_t chunk_rows, int part, int parts);

// Rows of this rank: whole global chunks (kLogregChunkRows, or a sparse problem's
// logreg_sparse_chunk_rows), balanced_chunk_range over ranks.
sharding::RowRange logreg_rank_rows(std::int64_t global_rows, int rank, int ranks,
                                    std::int64_t chunk_rows = models::kLogregChunkRows);

class DataParallelLogreg {
 public:
  // shard: this rank's rows, as given by logreg_rank_rows. Collective only in evaluation.
  // A shard with a column of ones (data::OnesColumn::append) fits an intercept: the
  // weights are W' = [W; b] with features() = sample_size + 1 rows, and l2 penalises
  // only W's sample_size rows, never b.
  // precision: the kernels' arithmetic (float32: x rounded to float for them; float64: x
  // as it is); the sums are in the same order, so either is the same bits on every layout.
  // row_weights: empty, or [shard.rows] weights of this rank's rows (sample x class weights;
  // they must outlive this object).
  DataParallelLogreg(const runtime::Context& ctx, const data::LoadedShard& shard, int classes, double l2,
                     models::LogregPrecision precision = models::LogregPrecision::float32,
                     std::span<const double> row_weights = {});
  // The same over CSR rows (logreg_rank_rows with chunk_rows = the problem's
  // models::logreg_sparse_chunk_rows, which every rank must pass alike).
  // labels: this rank's [shard.rows] (they and the shard must outlive this object).
  DataParallelLogreg(const runtime::Context& ctx, const data::SparseShard& shard, std::span<const std::int32_t> labels,
                     std::int64_t chunk_rows, int classes, double l2, models::LogregPrecision precision = models::LogregPrecision::float32,
                     std::span<const double> row_weights = {});

  // Objective for optim::lbfgs_minimize: x = W [features * classes] (double), grad same.
  // Collective: every rank must call it with the same x. Returns the same bits everywhere.
  double value_and_grad(std::span<const double> x, std::span<double> grad);

  long long evaluations() const { return evaluations_; }
  void set_l2(double l2) { l2_ = l2; }  // the next evaluations' L2 strength (a regularisation path)
  std::int64_t chunk_rows() const { return chunk_rows_; }
  int features() const { return features_; }  // rows of W: the sample's, + 1 for the intercept
  int classes() const { return classes_; }

 private:
  // What a device's shard is made from: its device, rows [first_row, first_row + rows) of
  // this rank's and their weights (nullptr: none), in float32 or float64.
  struct ShardMakers {
    std::function<std::unique_ptr<models::LogregShard>(const runtime::DeviceInfo&, std::int64_t, std::int64_t,
                                                       const double*)>
        make32;
    std::function<std::unique_ptr<models::LogregShard64>(const runtime::DeviceInfo&, std::int64_t, std::int64_t,
                                                         const double*)>
        make64;
  };
  DataParallelLogreg(const runtime::Context& ctx, std::int64_t global_rows, std::int64_t first_row, std::int64_t rows,
                     int features, int penalised_features, std::int64_t chunk_rows, int classes, double l2,
                     models::LogregPrecision precision, std::span<const double> row_weights, const ShardMakers& makers);

  const runtime::Context& ctx_;
  std::int64_t global_rows_;
  std::int64_t chunk_rows_;
  int features_, classes_;
  int penalised_features_;  // W's rows under the L2 penalty: all but the intercept's
  double l2_;
  std::int64_t global_chunks_ = 0;
  std::int64_t first_chunk_ = 0;  // this rank's first global chunk
  std::size_t partial_size_ = 0;
  std::vector<float> W_;
  models::LogregPrecision precision_;
  // One per device (its rows, where it computes): devices_ in float32, devices64_ in float64.
  std::vector<std::unique_ptr<models::LogregShard>> devices_;
  std::vector<std::unique_ptr<models::LogregShard64>> devices64_;
  std::vector<sharding::RowRange> device_chunks_;    // chunk ranges (relative to the rank's first chunk)
  std::vector<std::vector<models::TreeNode>> device_nodes_;  // each device's canonical nodes
  std::vector<const double*> device_records_;        // their records this evaluation (nullptr: no chunks)
  std::optional<models::PartialSumTree> rank_tree_;  // this rank's chunks -> its canonical nodes
  std::optional<TreeSumExchange> exchange_;          // every rank's canonical nodes -> the root, everywhere
  long long evaluations_ = 0;
};

}  // namespace spmd::workloads
