#include "spmd/workloads/logreg_objective.hpp"

#include <limits>

#include "spmd/runtime/check.hpp"
#include "spmd/runtime/watchdog.hpp"

namespace spmd::workloads {

namespace {
std::int64_t chunk_count(std::int64_t rows) { return (rows + models::kLogregChunkRows - 1) / models::kLogregChunkRows; }
}  // namespace

sharding::RowRange logreg_rank_rows(std::int64_t global_rows, int rank, int ranks) {
  const auto chunks = sharding::split_for_process(chunk_count(global_rows), rank, ranks);
  const std::int64_t first = std::min(global_rows, chunks.first * models::kLogregChunkRows);
  const std::int64_t end = std::min(global_rows, chunks.end() * models::kLogregChunkRows);
  return {first, end - first};
}

DataParallelLogreg::DataParallelLogreg(const runtime::Context& ctx, const data::LoadedShard& shard, int classes, double l2)
    : ctx_(ctx), shard_(shard), features_(static_cast<int>(shard.sample_size)), classes_(classes), l2_(l2) {
  global_chunks_ = chunk_count(shard.global_rows);
  partial_size_ = models::logreg_partials_size(features_, classes_);
  const std::int64_t my_chunks = chunk_count(shard.rows);
  const int d = ctx.devices_per_rank();
  const std::int64_t R = models::kLogregChunkRows;
  for (int i = 0; i < d; ++i) device_chunks_.push_back(sharding::split_for_process(my_chunks, i, d));
  devices_.resize(static_cast<size_t>(d));
  ctx.pool().run([&](int i) {
    const auto& c = device_chunks_[static_cast<size_t>(i)];
    const std::int64_t first_row = std::min(shard.rows, c.first * R);
    const std::int64_t rows = std::min(shard.rows, c.end() * R) - first_row;
    devices_[static_cast<size_t>(i)] =
        models::make_logreg_shard(ctx.devices()[static_cast<size_t>(i)], shard.features.data() + first_row * features_,
                                  shard.labels.data() + first_row, rows, features_, classes_, R);
  });
  all_partials_.assign(static_cast<size_t>(global_chunks_) * partial_size_, 0.0);
  // One rank owns every chunk: its devices write straight into the gathered layout.
  if (ctx.size() > 1) local_partials_.assign(static_cast<size_t>(my_chunks) * partial_size_, 0.0);
  for (int r = 0; r < ctx.size(); ++r) {
    const auto c = sharding::split_for_process(global_chunks_, r, ctx.size());
    const double count = static_cast<double>(c.size) * static_cast<double>(partial_size_);
    if (count > std::numeric_limits<int>::max())
      throw CollectiveError("logreg: rank " + std::to_string(r) + " would send " + std::to_string(count) +
                            " partial values per evaluation, more than MPI's int count; use more ranks");
    counts_.push_back(static_cast<int>(count));
    displs_.push_back(static_cast<int>(static_cast<double>(c.first) * static_cast<double>(partial_size_)));
  }
  total_.assign(partial_size_, 0.0);
  W_.assign(static_cast<size_t>(features_) * static_cast<size_t>(classes_), 0.0f);
}

double DataParallelLogreg::value_and_grad(std::span<const double> x, std::span<double> grad) {
  for (size_t i = 0; i < W_.size(); ++i) W_[i] = static_cast<float>(x[i]);
  double* local = ctx_.size() > 1 ? local_partials_.data() : all_partials_.data();
  ctx_.pool().run([&](int i) {
    const auto& c = device_chunks_[static_cast<size_t>(i)];
    if (c.size == 0) return;
    devices_[static_cast<size_t>(i)]->chunk_partials(W_.data(), local + static_cast<size_t>(c.first) * partial_size_);
  });
  if (ctx_.size() > 1) {
    runtime::Watchdog::Armed armed(ctx_.watchdog(), "MPI_Allgatherv(logreg partials)");
    SPMD_CHECK_MPI(MPI_Allgatherv(local_partials_.data(), counts_[static_cast<size_t>(ctx_.rank())], MPI_DOUBLE,
                                  all_partials_.data(), counts_.data(), displs_.data(), MPI_DOUBLE, ctx_.comm()),
                   "gathering the per-chunk loss and gradient partials");
  }
  models::logreg_sum_partials(all_partials_.data(), global_chunks_, features_, classes_, total_.data());
  const double value = models::logreg_finalize(total_.data(), shard_.global_rows, features_, classes_, W_.data(), l2_,
                                               grad.data());
  ++evaluations_;
  return value;
}

}  // namespace spmd::workloads
