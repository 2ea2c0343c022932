#include "spmd/workloads/ensemble_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "spmd/models/cnn_params.hpp"
#include "spmd/runtime/stop_request.hpp"
#include "spmd/workloads/report.hpp"

namespace spmd::workloads {

namespace {
Table epoch_table() {
  return Table({{"epoch", "", 5}, {"train loss", "", 10}, {"train acc", "", 9}, {"test loss", "", 10},
                {"test acc", "", 9}, {"members acc", "min..max", 15}, {"time", "s", 8}, {"speed", "img/s/member", 13}});
}

// "640 examples", or "640 of 60000 examples" when a limit took the first rows only.
std::string examples_text(std::int64_t used, std::int64_t in_file, const char* unit) {
  return used == in_file ? format("%lld%s", static_cast<long long>(used), unit)
                         : format("%lld of %lld%s", static_cast<long long>(used), static_cast<long long>(in_file), unit);
}

// At EnsembleEvents::start: the data's warnings, the position a --resume continues from, and
// the epoch table's header.
std::string start_text(const EnsembleResult& start, const EnsembleOptions& o) {
  std::string out;
  for (const auto& warning : start.warnings) out += "# WARNING: " + warning + "\n";
  if (start.resumed_from_epoch >= 0)
    out += format("# resumed from %s at epoch %d step %lld\n", o.checkpoint.c_str(), start.resumed_from_epoch + 1,
                  static_cast<long long>(start.resumed_from_step));
  return out + epoch_table().header();
}
}  // namespace

std::string run_header(const runtime::Context& ctx, const EnsembleOptions& o) {
  return format("# %d members (ranks x devices), batch %d, SGD lr %g momentum %g, seed %llu, train %s%s\n",
                ctx.total_devices(), o.batch_size, o.sgd.learning_rate, o.sgd.momentum,
                static_cast<unsigned long long>(o.seed), o.train.c_str(),
                o.train_limit ? format(" (first %lld)", static_cast<long long>(o.train_limit)).c_str() : "");
}

// A loss in the column's width: a diverging run's (1e16) in exponent form.
std::string loss_text(double loss) { return format(std::abs(loss) < 1e4 ? "%.5f" : "%.4e", loss); }

std::string epoch_row(const EpochMetrics& e) {
  double lo = 1, hi = 0;
  for (double a : e.member_test_accuracy) {
    lo = std::min(lo, a);
    hi = std::max(hi, a);
  }
  return epoch_table().row({std::to_string(e.epoch), loss_text(e.train_loss), format("%.4f", e.train_accuracy),
                            loss_text(e.test_loss), format("%.4f", e.test_accuracy), format("%.4f..%.4f", lo, hi),
                            format("%.2f", e.seconds), format("%.0f", e.images_per_second)});
}

std::string summary_text(const EnsembleResult& r, const EnsembleOptions& o) {
  std::string out = format("# model %s, %lld parameters per member\n# train %s %s/%s (%s), test %s %s/%s (%s)\n",
                           r.model.describe().c_str(), static_cast<long long>(models::CnnLayout(r.model).param_count()),
                           o.train.c_str(), o.keys.features.c_str(), o.keys.labels.c_str(),
                           examples_text(r.train_examples, r.train_dataset_rows, " examples").c_str(), o.test.c_str(),
                           o.test_keys.features.c_str(), o.test_keys.labels.c_str(),
                           examples_text(r.test_examples, r.test_dataset_rows, "").c_str());
  if (r.interrupted)
    out += format("# stopped by %s at epoch %d step %lld of %lld: ", runtime::signal_name(r.stop_signal).c_str(),
                  r.stopped_epoch, static_cast<long long>(r.stopped_step), static_cast<long long>(r.steps_per_epoch)) +
           (o.checkpoint.empty() ? std::string("no checkpoint written (no --checkpoint)\n")
                                 : "checkpoint written to " + o.checkpoint + "; continue with the same command plus --resume\n");
  return out + format("# %d members, %.0f training images/s per member (%.0f for the ensemble), parameters digest %016llx\n",
                      r.members, r.images_per_second, r.images_per_second * r.members,
                      static_cast<unsigned long long>(r.params_digest));
}

nlohmann::json to_json(const EnsembleResult& r, const EnsembleOptions& o) {
  nlohmann::json j;
  j["members"] = r.members;
  nlohmann::json epochs = nlohmann::json::array();
  for (const auto& e : r.epochs) epochs.push_back(e);
  j["epochs"] = epochs;
  j["images_per_second"] = r.images_per_second;
  j["images_per_second_all_members"] = r.images_per_second * r.members;
  j["interrupted"] = r.interrupted;
  if (r.interrupted) j["stopped_by"] = runtime::signal_name(r.stop_signal);
  j["resumed_from_epoch"] = r.resumed_from_epoch;
  j["resumed_from_step"] = r.resumed_from_step;
  j["params_digest"] = format("%016llx", static_cast<unsigned long long>(r.params_digest));
  j["model"] = nlohmann::json::parse(r.model.to_json());
  j["parameters_per_member"] = models::CnnLayout(r.model).param_count();
  // Each set as eval's JSON names its data: `data` (the path), `dataset_rows` (N in the file);
  // `examples` is what the run used (after --train-limit / --test-limit). The CLI adds
  // `keys` (how they were resolved). path, features and labels are the older names, kept
  // for the readers that use them.
  const auto set_json = [](const std::string& path, const data::DatasetKeys& keys, std::int64_t examples,
                           std::int64_t dataset_rows) {
    return nlohmann::json{{"data", path},         {"path", path},           {"features", keys.features},
                          {"labels", keys.labels}, {"examples", examples},  {"dataset_rows", dataset_rows}};
  };
  j["train"] = set_json(o.train, o.keys, r.train_examples, r.train_dataset_rows);
  j["test"] = set_json(o.test, o.test_keys, r.test_examples, r.test_dataset_rows);
  j["batch_size"] = o.batch_size;
  j["learning_rate"] = o.sgd.learning_rate;
  j["momentum"] = o.sgd.momentum;
  j["seed"] = o.seed;
  j["warnings"] = r.warnings;
  return j;
}

std::string metrics_csv(const EnsembleResult& r) {
  std::string out = "epoch,train_loss,train_accuracy,test_loss,test_accuracy,seconds,images_per_second";
  for (int g = 0; g < r.members; ++g) out += ",member" + std::to_string(g) + "_test_accuracy";
  out += "\n";
  for (const auto& e : r.epochs) {
    out += format("%d,%.9g,%.9g,%.9g,%.9g,%.4f,%.1f", e.epoch, e.train_loss, e.train_accuracy, e.test_loss, e.test_accuracy,
                  e.seconds, e.images_per_second);
    for (double a : e.member_test_accuracy) out += format(",%.6f", a);
    out += "\n";
  }
  return out;
}

EnsembleDisplay::EnsembleDisplay(const runtime::Context& ctx, const EnsembleOptions& o)
    : ctx_(ctx), o_(o), line_(ctx.is_root() && !o.quiet) {}

EnsembleEvents EnsembleDisplay::events() {
  EnsembleEvents events;
  events.start = [this](const EnsembleResult& start) {
    if (!ctx_.is_root()) return;
    std::fputs(start_text(start, o_).c_str(), stdout);
    std::fflush(stdout);
  };
  events.progress = [this](int epoch, std::int64_t step, std::int64_t steps, double ips) {
    if (!ctx_.is_root() || o_.quiet) return;
    line_.update("epoch " + std::to_string(epoch) + " step", step, steps, format("%.0f images/s per member", ips),
                 o_.progress_every > 0 ? o_.progress_every : std::max<std::int64_t>(1, steps / 10));
  };
  return events;
}

}  // namespace spmd::workloads
