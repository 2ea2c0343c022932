#include "spmd/workloads/memory_estimate.hpp"

#include <algorithm>

#include "spmd/data/element_type.hpp"
#include "spmd/models/logreg.hpp"
#include "spmd/runtime/error.hpp"
#include "spmd/runtime/memory_limits.hpp"
#include "spmd/sharding/split.hpp"
#include "spmd/workloads/report.hpp"
#include "spmd/workloads/row_blocks.hpp"

namespace spmd::workloads {

namespace {
// Rows of labels read at once, as stored then widened to int64 before they become int32.
constexpr double kLabelPieceRows = 1 << 20;
constexpr double kBlockBytes = 16 << 20;

// Labels as a shard holds them (int32) plus the piece they are read through.
double label_bytes(std::int64_t rows) {
  const double n = static_cast<double>(rows);
  return 4 * n + 8 * std::min(n, kLabelPieceRows);
}
}  // namespace

double MemoryEstimate::total() const {
  double sum = 0;
  for (const auto& [what, bytes] : parts) sum += bytes;
  return sum;
}

std::string MemoryEstimate::describe() const {
  std::string text;
  for (const auto& [what, bytes] : parts)
    if (bytes > 0) text += (text.empty() ? "" : " + ") + what + " " + runtime::format_bytes(bytes);
  return text.empty() ? "nothing" : text;
}

std::string fit_eval_batch(const runtime::Context& ctx, EvalOptions& o, std::int64_t rows) {
  const std::int64_t d = ctx.devices_per_rank(), p = ctx.size();
  if (o.strategy == EvalStrategy::DropRemainder) {
    const std::int64_t smallest = rows / p;  // split_for_process: the last ranks get floor(N / P)
    if (o.per_device_batch > smallest / d)
      throw CollectiveError(format("--per-device-batch %lld is more than the smallest rank's rows per device (%lld "
                                   "rows over %lld device(s)): drop-remainder would evaluate nothing",
                                   static_cast<long long>(o.per_device_batch), static_cast<long long>(smallest),
                                   static_cast<long long>(d)));
    return "";
  }
  const std::int64_t cap = std::max<std::int64_t>(1, ((rows + p - 1) / p + d - 1) / d);
  std::string note;
  if (o.per_device_batch > cap) {
    note = format("# --per-device-batch %lld is more than a device's rows (%lld): batches of %lld rows, which "
                  "changes no count (a larger batch would be padding only)\n",
                  static_cast<long long>(o.per_device_batch), static_cast<long long>(cap), static_cast<long long>(cap));
    o.per_device_batch = cap;
  }
  if (o.min_device_batch > cap) {
    note += format("# --min-device-batch %lld is more than a device's rows (%lld): padded to %lld rows\n",
                   static_cast<long long>(o.min_device_batch), static_cast<long long>(cap), static_cast<long long>(cap));
    o.min_device_batch = cap;
  }
  return note;
}

MemoryEstimate eval_memory(const runtime::Context& ctx, const EvalOptions& o, const data::DatasetShape& shape,
                           const models::Classifier& model, bool predictions, bool benchmark) {
  const std::int64_t rows = sharding::split_for_process(shape.rows, ctx.rank(), ctx.size()).size;
  const double d = ctx.devices_per_rank(), sample = static_cast<double>(shape.sample_size);
  const std::int64_t bdev = o.device_batch();
  const double step_bytes = d * static_cast<double>(o.per_device_batch) * (4 * sample + 4);
  MemoryEstimate e;
  e.parts.emplace_back("labels", label_bytes(rows));
  e.parts.emplace_back("prefetched blocks", (kBlockPrefetchDepth + 1) * std::max(kBlockBytes, step_bytes));
  // Each device's batch decoded to floats on the host, unless its model takes the bytes.
  const bool host_floats = !(shape.features_type == data::ElementType::UInt8 && model.host_decodes_bytes());
  e.parts.emplace_back("device batches", d * static_cast<double>(bdev) * ((host_floats ? 4 * sample : 0) + 4));
  e.parts.emplace_back("model", d * static_cast<double>(model.parameter_bytes() + model.workspace_bytes(bdev)));
  if (predictions) e.parts.emplace_back("predictions", static_cast<double>(rows) * (4.0 * model.classes() + 4));
  if (benchmark)
    e.parts.emplace_back("features held for --benchmark",
                         static_cast<double>(rows) * sample * static_cast<double>(data::size_of(shape.features_type)));
  return e;
}

MemoryEstimate logreg_memory(std::int64_t rank_rows, std::int64_t features, int classes, int history, bool with_data) {
  const double n = static_cast<double>(rank_rows), weights = static_cast<double>(features) * classes;
  MemoryEstimate e;
  if (with_data) {
    e.parts.emplace_back("features", 4 * n * static_cast<double>(features));
    e.parts.emplace_back("labels", label_bytes(rank_rows));
  }
  // Doubles: 2 m history vectors, iterate, gradient, direction, the line search's trial
  // point and gradient, the objective's sum; one record per chunk of rows.
  e.parts.emplace_back("solver", 8 * weights * (2.0 * history + 6));
  const double chunks = std::ceil(n / static_cast<double>(models::kLogregChunkRows));
  e.parts.emplace_back("chunk partials", 8 * (1 + weights) * std::max(1.0, chunks));
  return e;
}

MemoryEstimate ensemble_memory(const data::DatasetShape& train, std::int64_t train_rows, const data::DatasetShape& test,
                               std::int64_t test_rows, double member_parameters, int devices, int batch, int eval_batch) {
  const auto set_bytes = [](const data::DatasetShape& s, std::int64_t rows) {
    return static_cast<double>(rows) * static_cast<double>(s.sample_size) *
           static_cast<double>(data::size_of(s.features_type));
  };
  const double pixels = static_cast<double>(train.sample_size);
  MemoryEstimate e;
  e.parts.emplace_back("training set", set_bytes(train, train_rows) + label_bytes(train_rows));
  e.parts.emplace_back("test set", set_bytes(test, test_rows) + label_bytes(test_rows));
  e.parts.emplace_back("members", 3 * 4 * member_parameters * devices);
  e.parts.emplace_back("batches", 4 * pixels * (static_cast<double>(batch) * devices + eval_batch));
  return e;
}

std::string require_memory_fits(const runtime::Context& ctx, const MemoryEstimate& e, const std::string& hint) {
  return runtime::require_memory_fits(ctx.comm(), e.total(), e.describe(), hint);
}

}  // namespace spmd::workloads
