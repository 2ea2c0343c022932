#include "spmd/workloads/eval_report.hpp"

#include <algorithm>
#include <map>

#include "spmd/data/dataset.hpp"
#include "spmd/data/feature_source.hpp"
#include "spmd/sharding/step_plan.hpp"
#include "spmd/sharding/host_array.hpp"
#include "spmd/sharding/split.hpp"
#include "spmd/runtime/stop_request.hpp"
#include "spmd/workloads/report.hpp"

namespace spmd::workloads {

using runtime::Context;

namespace {

constexpr int kPrintedClasses = 20;

std::string shapes_text(const std::map<std::int64_t, std::int64_t>& shapes) {
  std::string s;
  for (auto it = shapes.rbegin(); it != shapes.rend(); ++it)
    s += (s.empty() ? "" : " + ") + std::to_string(it->second) + "x" + std::to_string(it->first);
  return s.empty() ? "-" : s;
}

}  // namespace

// A model that predicts without computing (EvalModel::computes false, as zero): its time and
// throughput measure reading, converting, padding and counting only, and the columns say so
// (same places, so scripts that read the row by position keep working).
std::string result_table(const EvalResult& r, const EvalOptions& o,
                         const EvalModel& model) {
  const bool model_computes = model.computes;
  Table table({{"strategy", "", 15}, {"correct", "", 9}, {"total", "", 9}, {"accuracy", "", 9},
                          {"steps", "", 6}, {"batch shapes", "steps x rows/device", 22}, {"padded", "rows", 9},
                          {model_computes ? "time" : "data time", "s", 9},
                          {model_computes ? "throughput" : "data rate", "examples/s", 12}});
  std::string out = table.header();
  out += table.row({to_string(o.strategy), std::to_string(r.correct), std::to_string(r.total),
                    format("%.6f", r.accuracy()), std::to_string(r.steps), shapes_text(r.batch_shapes),
                    std::to_string(r.padded_rows), format("%.4g", r.seconds), format("%.0f", r.examples_per_second())});
  std::string per_rank;
  for (auto n : r.examples_per_rank) per_rank += (per_rank.empty() ? "" : ", ") + std::to_string(n);
  out += "# examples per rank: [" + per_rank + "]\n";
  if (!model_computes)
    out += "# --model " + model.name +
           " computes nothing: data time and data rate are data movement only (reading, converting, "
           "padding, counting), not a model's speed\n";
  if (r.non_finite_rows > 0)
    out += format("# WARNING: %lld of %lld examples had a NaN or an infinity among the model's outputs (its class "
                  "is the highest of the others, or class 0); they are counted as predicted. Overflowing inputs "
                  "(see --input-scale) or a diverged model are the usual causes.\n",
                  static_cast<long long>(r.non_finite_rows), static_cast<long long>(r.total));
  const std::int64_t expected = r.dataset_rows - r.filtered_rows;
  if (r.dropped > 0 || r.total != expected)
    out += format("# WARNING: %lld of %lld examples were not evaluated (%s drops what does not fill a whole step); "
                  "the accuracy above is over the wrong total. Use --strategy pad or infinite-pad.\n",
                  static_cast<long long>(expected - r.total), static_cast<long long>(expected),
                  to_string(o.strategy));
  else
    out += format("# every example counted exactly once: total %lld = %lld in the file%s\n", static_cast<long long>(r.total),
                  static_cast<long long>(r.dataset_rows),
                  r.filtered_rows ? format(" - %lld with the dropped label", static_cast<long long>(r.filtered_rows)).c_str()
                                  : "");
  return out;
}

// The confusion matrix as a fixed-width table (rows: label, columns: predicted), for up
// to kPrintedClasses classes; --json has it whatever the size.
std::string confusion_table(const ConfusionMatrix& m) {
  if (!m.kept() || m.classes() > kPrintedClasses) return "";
  std::int64_t largest = 1;
  for (int l = 0; l < m.classes(); ++l)
    for (int p = 0; p < m.classes(); ++p) largest = std::max(largest, m.at(l, p));
  const int width = std::max(5, static_cast<int>(std::to_string(largest).size()) + 1);
  std::string out = "# confusion matrix (rows: label, columns: predicted class)\n" + format("%7s", "label");
  for (int p = 0; p < m.classes(); ++p) out += format("%*d", width, p);
  out += "\n";
  for (int l = 0; l < m.classes(); ++l) {
    out += format("%7d", l);
    for (int p = 0; p < m.classes(); ++p) out += format("%*lld", width, static_cast<long long>(m.at(l, p)));
    out += "\n";
  }
  return out;
}


std::string eval_dry_run(const Context& ctx, const EvalOptions& o, const models::Classifier& model, nlohmann::json* json) {
  const auto shape = data::probe_feature_source(ctx, o.data, o.keys).shape;
  model.check_sample_shape(shape.sample_shape, o.data);
  const int d = ctx.devices_per_rank();
  const sharding::BatchGeometry geometry{d, o.per_device_batch};
  const std::int64_t bdev = o.device_batch();
  const std::int64_t bytes = bdev * shape.sample_size * 4 + bdev * 4 + model.parameter_bytes() + model.workspace_bytes(bdev);
  std::string shape_text = "[" + std::to_string(d) + ", " + std::to_string(bdev);
  for (auto e : shape.sample_shape) shape_text += ", " + std::to_string(e);
  shape_text += "]";
  std::string out = format("# dry run: %s  N=%lld  sample %s  model %s  strategy %s\n", o.data.c_str(),
                           static_cast<long long>(shape.rows), sharding::to_string(shape.sample_shape).c_str(),
                           model.describe().c_str(), to_string(o.strategy));
  Table table({{"rank", "", 6}, {"first", "row", 10}, {"examples", "", 10}, {"steps", "", 7},
               {"padded batch", "shape", 22}, {"memory", "MiB/device", 12}});
  out += table.header();
  nlohmann::json ranks = nlohmann::json::array();
  for (int r = 0; r < ctx.size(); ++r) {
    const auto range = sharding::split_for_process(shape.rows, r, ctx.size());
    std::int64_t steps = 0;
    switch (o.strategy) {
      case EvalStrategy::Pad:
      case EvalStrategy::PadMetrics:
        steps = o.drop_label ? -1 : sharding::pad_step_count(shape.rows, ctx.size(), geometry);
        break;
      case EvalStrategy::DropRemainder:
        steps = sharding::local_step_count(sharding::BatchMode::DropRemainder,
                                           sharding::split_for_process(shape.rows, ctx.size() - 1, ctx.size()).size,
                                           geometry);
        break;
      default:
        steps = o.drop_label ? -1 : sharding::local_step_count(sharding::BatchMode::PadWithMask, range.size, geometry);
    }
    const std::string steps_text = steps < 0 ? "data-dep." : std::to_string(steps);
    out += table.row({std::to_string(r), std::to_string(range.first), std::to_string(range.size), steps_text, shape_text,
                      format("%.2f", static_cast<double>(bytes) / (1 << 20))});
    ranks.push_back({{"rank", r}, {"first", range.first}, {"examples", range.size}, {"steps", steps},
                     {"device_bytes", bytes}});
  }
  if (json) {
    (*json)["dry_run"] = true;
    (*json)["rows"] = shape.rows;
    (*json)["sample_shape"] = shape.sample_shape;
    (*json)["padded_batch_shape"] = shape_text;
    (*json)["per_rank"] = ranks;
  }
  return out;
}

nlohmann::json to_json(const EvalResult& r, const EvalOptions& o) {
  nlohmann::json j;
  j["correct"] = r.correct;
  j["total"] = r.total;
  j["accuracy"] = r.accuracy();
  j["steps"] = r.steps;
  nlohmann::json shapes = nlohmann::json::object();
  for (const auto& [rows, n] : r.batch_shapes) shapes[std::to_string(rows)] = n;
  j["batch_shapes"] = shapes;
  j["examples_per_rank"] = r.examples_per_rank;
  j["padded_rows"] = r.padded_rows;
  j["non_finite_rows"] = r.non_finite_rows;
  // Rows: the label; columns: the predicted class (null past ConfusionMatrix::kMaxClasses).
  j["confusion_matrix"] = r.confusion.to_json();
  j["dropped"] = r.dropped;
  j["filtered"] = r.filtered_rows;
  j["dataset_rows"] = r.dataset_rows;
  j["strategy"] = to_string(o.strategy);
  j["per_device_batch"] = o.per_device_batch;
  if (o.strategy == EvalStrategy::InfinitePad) j["count_window"] = o.count_window;
  j["seconds"] = r.seconds;
  j["examples_per_second"] = r.examples_per_second();
  return j;
}

std::string eval_header(const EvalOptions& o, const EvalShard& shard, const models::Classifier& model) {
  return format("# data %s: %lld examples, model %s, per-device batch %lld, strategy %s\n", o.data.c_str(),
                static_cast<long long>(shard.shard.global_rows), model.describe().c_str(),
                static_cast<long long>(o.per_device_batch), to_string(o.strategy)) +
         (shard.sparse ? "# features " + shard.sparse->describe() + ", streamed as dense float32 rows\n" : std::string());
}

// Rank 0 shows progress from what it knows locally (run_eval's estimate: no communication).
EvalProgressDisplay::EvalProgressDisplay(const runtime::Context& ctx, const EvalOptions& o)
    : shown_(ctx.is_root() && !o.quiet), seconds_(o.progress_seconds), line_(shown_) {}

EvalProgress EvalProgressDisplay::progress() {
  if (!shown_) return {};
  return [this](std::int64_t done, std::int64_t total, double seconds) {
    if (!line_.due(seconds_)) return;
    line_.update("eval rows", done, total,
                 format("%5.1f%%  %.0f examples/s  %.1f s elapsed",
                        total > 0 ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100.0,
                        seconds > 0 ? static_cast<double>(done) / seconds : 0.0, seconds),
                 1);
  };
}

std::string stopped_text(const EvalResult& r) {
  const std::int64_t to_evaluate = r.dataset_rows - r.filtered_rows - r.dropped;
  return format("# stopped by %s at step %lld%s: %lld of %lld rows evaluated; no results, predictions or JSON written (a "
                "partial pass is not an evaluation)\n",
                runtime::signal_name(r.stop_signal).c_str(), static_cast<long long>(r.steps),
                r.planned_steps >= 0 ? format(" of %lld", static_cast<long long>(r.planned_steps)).c_str() : "",
                static_cast<long long>(r.total), static_cast<long long>(to_evaluate));
}

std::string predictions_line(const EvalResult& r, const std::string& path) {
  const std::int64_t missing = r.dataset_rows - r.total;
  return format("# predictions: %s (%lld rows%s)\n", path.c_str(), static_cast<long long>(r.dataset_rows),
                missing ? format("; %lld not evaluated: predicted = -1", static_cast<long long>(missing)).c_str() : "");
}

}  // namespace spmd::workloads
