#include "spmd/workloads/logreg_objective.hpp"

#include <algorithm>

#include "spmd/runtime/error.hpp"

namespace spmd::workloads {

namespace {
std::int64_t chunk_count(std::int64_t rows, std::int64_t chunk_rows) { return (rows + chunk_rows - 1) / chunk_rows; }

// The chunk boundary nearest to part * rows / parts (rounding half up), as a chunk index.
std::int64_t part_boundary(std::int64_t rows, std::int64_t chunk_rows, int part, int parts) {
  const std::int64_t chunks = chunk_count(rows, chunk_rows);
  if (part >= parts) return chunks;
  const __int128 numerator = static_cast<__int128>(part) * rows + static_cast<__int128>(parts) * chunk_rows / 2;
  const auto boundary = static_cast<std::int64_t>(numerator / (static_cast<__int128>(parts) * chunk_rows));
  return std::min(boundary, chunks);
}
}  // namespace

sharding::RowRange balanced_chunk_range(std::int64_t rows, std::int64_t chunk_rows, int part, int parts) {
  if (rows < 0 || chunk_rows < 1 || parts < 1 || part < 0 || part >= parts)
    throw Error("balanced_chunk_range: needs rows >= 0, chunk_rows >= 1 and 0 <= part < parts (got rows " +
                std::to_string(rows) + ", chunk_rows " + std::to_string(chunk_rows) + ", part " +
                std::to_string(part) + " of " + std::to_string(parts) + ")");
  const std::int64_t first = part_boundary(rows, chunk_rows, part, parts);
  return {first, part_boundary(rows, chunk_rows, part + 1, parts) - first};
}

sharding::RowRange logreg_rank_rows(std::int64_t global_rows, int rank, int ranks, std::int64_t chunk_rows) {
  const auto chunks = balanced_chunk_range(global_rows, chunk_rows, rank, ranks);
  const std::int64_t first = std::min(global_rows, chunks.first * chunk_rows);
  const std::int64_t end = std::min(global_rows, chunks.end() * chunk_rows);
  return {first, end - first};
}

DataParallelLogreg::DataParallelLogreg(const runtime::Context& ctx, const data::LoadedShard& shard, int classes, double l2,
                                       models::LogregPrecision precision, std::span<const double> row_weights)
    : DataParallelLogreg(
          ctx, shard.global_rows, shard.first_row, shard.rows, static_cast<int>(shard.row_size()),
          static_cast<int>(shard.sample_size), models::kLogregChunkRows, classes, l2, precision, row_weights,
          ShardMakers{[&shard, classes](const runtime::DeviceInfo& device, std::int64_t first, std::int64_t rows,
                                        const double* weights) {
                        const auto F = shard.row_size();
                        return models::make_logreg_shard(device, shard.features.data() + first * F,
                                                         shard.labels.data() + first, rows, static_cast<int>(F),
                                                         classes, models::kLogregChunkRows, weights);
                      },
                      [&shard, classes](const runtime::DeviceInfo& device, std::int64_t first, std::int64_t rows,
                                        const double* weights) {
                        const auto F = shard.row_size();
                        return models::make_logreg_shard64(device, shard.features.data() + first * F,
                                                           shard.labels.data() + first, rows, static_cast<int>(F),
                                                           classes, models::kLogregChunkRows, weights);
                      }}) {}

DataParallelLogreg::DataParallelLogreg(const runtime::Context& ctx, const data::SparseShard& shard,
                                       std::span<const std::int32_t> labels, std::int64_t chunk_rows, int classes,
                                       double l2, models::LogregPrecision precision,
                                       std::span<const double> row_weights)
    : DataParallelLogreg(
          ctx, shard.global_rows, shard.first_row, shard.rows, static_cast<int>(shard.row_size()),
          static_cast<int>(shard.sample_size()), chunk_rows, classes, l2, precision, row_weights,
          ShardMakers{[&shard, labels, classes, chunk_rows](const runtime::DeviceInfo& device, std::int64_t first,
                                                            std::int64_t rows, const double* weights) {
                        const models::CsrRows X{shard.row_start.data(), shard.columns.data(), shard.values.data()};
                        return models::make_logreg_sparse_shard(device, X.from(first), labels.data() + first, rows,
                                                                static_cast<int>(shard.row_size()), classes,
                                                                chunk_rows, weights);
                      },
                      [&shard, labels, classes, chunk_rows](const runtime::DeviceInfo& device, std::int64_t first,
                                                            std::int64_t rows, const double* weights) {
                        const models::CsrRows X{shard.row_start.data(), shard.columns.data(), shard.values.data()};
                        return models::make_logreg_sparse_shard64(device, X.from(first), labels.data() + first, rows,
                                                                  static_cast<int>(shard.row_size()), classes,
                                                                  chunk_rows, weights);
                      }}) {}

DataParallelLogreg::DataParallelLogreg(const runtime::Context& ctx, std::int64_t global_rows, std::int64_t first_row,
                                       std::int64_t rank_rows, int features, int penalised_features,
                                       std::int64_t chunk_rows, int classes, double l2,
                                       models::LogregPrecision precision, std::span<const double> row_weights,
                                       const ShardMakers& makers)
    : ctx_(ctx), global_rows_(global_rows), chunk_rows_(chunk_rows), features_(features), classes_(classes),
      penalised_features_(penalised_features), l2_(l2), precision_(precision) {
  const std::int64_t R = chunk_rows;
  if (R < 1) throw Error("logreg: chunk rows must be >= 1 (got " + std::to_string(R) + ")");
  global_chunks_ = chunk_count(global_rows, R);
  if (global_chunks_ < 1) throw Error("logreg: the data has no rows (global rows = 0)");
  partial_size_ = models::logreg_partials_size(features_, classes_);
  first_chunk_ = first_row / R;
  if (first_row % R != 0 && rank_rows > 0)
    throw Error("logreg: rank " + std::to_string(ctx.rank()) + "'s rows start at row " +
                std::to_string(first_row) + ", not at a chunk boundary (a multiple of " + std::to_string(R) + ")");
  if (!row_weights.empty() && static_cast<std::int64_t>(row_weights.size()) != rank_rows)
    throw Error("logreg: " + std::to_string(row_weights.size()) + " row weights for rank " + std::to_string(ctx.rank()) +
                "'s " + std::to_string(rank_rows) + " rows");
  const std::int64_t my_chunks = chunk_count(rank_rows, R);
  const int d = ctx.devices_per_rank();
  for (int i = 0; i < d; ++i) device_chunks_.push_back(balanced_chunk_range(rank_rows, R, i, d));
  const bool f64 = precision == models::LogregPrecision::float64;
  if (f64)
    devices64_.resize(static_cast<size_t>(d));
  else
    devices_.resize(static_cast<size_t>(d));
  ctx.pool().run([&](int i) {
    const auto& c = device_chunks_[static_cast<size_t>(i)];
    const std::int64_t first = std::min(rank_rows, c.first * R);
    const std::int64_t rows = std::min(rank_rows, c.end() * R) - first;
    const auto& device = ctx.devices()[static_cast<size_t>(i)];
    const double* weights = row_weights.empty() ? nullptr : row_weights.data() + first;
    if (f64)
      devices64_[static_cast<size_t>(i)] = makers.make64(device, first, rows, weights);
    else
      devices_[static_cast<size_t>(i)] = makers.make32(device, first, rows, weights);
  });
  for (const auto& c : device_chunks_)
    device_nodes_.push_back(models::PartialSumTree::canonical_nodes(first_chunk_ + c.first, first_chunk_ + c.end(), global_chunks_));
  device_records_.assign(device_chunks_.size(), nullptr);
  rank_tree_.emplace(global_chunks_, partial_size_);

  // Every rank's chunk range, as logreg_rank_rows gives it: the tree sum's layout.
  std::vector<std::int64_t> rank_bounds;
  for (int r = 0; r < ctx.size(); ++r) rank_bounds.push_back(balanced_chunk_range(global_rows, R, r, ctx.size()).first);
  rank_bounds.push_back(global_chunks_);
  const auto rank = static_cast<std::size_t>(ctx.rank());
  if (my_chunks > 0 && (first_chunk_ != rank_bounds[rank] || first_chunk_ + my_chunks != rank_bounds[rank + 1]))
    throw Error("logreg: rank " + std::to_string(ctx.rank()) + " holds chunks [" + std::to_string(first_chunk_) + ", " +
                std::to_string(first_chunk_ + my_chunks) + "), not the range logreg_rank_rows gives it [" +
                std::to_string(rank_bounds[rank]) + ", " + std::to_string(rank_bounds[rank + 1]) + ")");
  exchange_.emplace(ctx, global_chunks_, rank_bounds, partial_size_);
  W_.assign(static_cast<size_t>(features_) * static_cast<size_t>(classes_), 0.0f);
}

double DataParallelLogreg::value_and_grad(std::span<const double> x, std::span<double> grad) {
  const bool f64 = precision_ == models::LogregPrecision::float64;
  if (!f64)
    for (size_t i = 0; i < W_.size(); ++i) W_[i] = static_cast<float>(x[i]);
  // Each device sums its chunks' records to its canonical nodes where it computed them (a GPU
  // sends those few records); pushed in device order, the rank's tree holds the same bits as
  // from every chunk's record.
  ctx_.pool().run([&](int i) {
    const auto k = static_cast<size_t>(i);
    const auto& c = device_chunks_[k];
    device_records_[k] = nullptr;
    if (c.size == 0) return;
    const std::int64_t first = first_chunk_ + c.first;
    device_records_[k] = f64 ? devices64_[k]->node_partials(x.data(), first, global_chunks_)
                             : devices_[k]->node_partials(W_.data(), first, global_chunks_);
  });
  models::PartialSumTree& mine = *rank_tree_;
  mine.reset(first_chunk_);
  for (std::size_t k = 0; k < device_chunks_.size(); ++k)
    for (std::size_t n = 0; device_records_[k] != nullptr && n < device_nodes_[k].size(); ++n)
      mine.push_node(device_nodes_[k][n], device_records_[k] + n * partial_size_);
  const double* total = exchange_->total(mine);
  if (total == nullptr) throw Error("logreg: internal error: the partial sums do not cover every chunk");
  const double value =
      f64 ? models::logreg_finalize(total, global_rows_, features_, classes_, x.data(), l2_, penalised_features_,
                                    grad.data())
          : models::logreg_finalize(total, global_rows_, features_, classes_, W_.data(), l2_, penalised_features_,
                                    grad.data());
  ++evaluations_;
  return value;
}

}  // namespace spmd::workloads
