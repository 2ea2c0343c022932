// spmd ensemble: CNN ensemble training, one member per device (workloads/ensemble.hpp).
#include <optional>
#include <string>

#include "commands.hpp"
#include "dataset_key_options.hpp"
#include "option_binder.hpp"
#include "session.hpp"
#include "spmd/data/dataset.hpp"
#include "spmd/data/output_lock.hpp"
#include "spmd/data/output_set.hpp"
#include "spmd/workloads/ensemble.hpp"
#include "spmd/workloads/ensemble_report.hpp"
#include "spmd/workloads/report.hpp"

namespace spmd::cli {

int cmd_ensemble(const Args& args) {
  auto bound = bind<workloads::EnsembleOptions>("ensemble", "--train FILE --test FILE [options]", args,
                                                {dataset_key_options(), test_key_options()});
  if (!bound) return 0;
  auto& o = bound->options;
  // Signals from here on stop the run after the step in progress, with a checkpoint.
  Session s(bound->cl);
  const auto& ctx = s.ctx;
  // One job per checkpoint, for the whole run (a second job is refused now, not after it
  // has overwritten this one's epochs).
  std::optional<data::OutputLock> checkpoint_lock;
  if (!o.checkpoint.empty()) checkpoint_lock.emplace(ctx, o.checkpoint, "checkpoint");
  const auto train_keys = data::resolve_dataset_keys(ctx, o.train, key_request(s.cl.vm));
  const auto test_keys = data::resolve_dataset_keys(ctx, o.test, test_key_request(s.cl.vm));
  o.keys = train_keys.keys;
  o.test_keys = test_keys.keys;
  s.startup(keys_line("train", o.train, train_keys) + keys_line("test ", o.test, test_keys));
  print_root(workloads::run_header(ctx, o));
  if (checkpoint_lock) print_root(checkpoint_lock->takeover_line());
  workloads::EnsembleDisplay display(ctx, o);
  auto events = display.events();
  events.epoch = [&](const workloads::EpochMetrics& e) {
    print_root(workloads::epoch_row(e));
    require_inputs_unchanged(s.cl, "after epoch " + std::to_string(e.epoch));
  };
  const auto r = workloads::run_ensemble(ctx, o, events);
  display.close();
  print_root(workloads::summary_text(r, o));
  const auto breakdown = s.time_breakdown();
  // The CSV and the JSON appear together, or neither does (the checkpoint is published
  // after every epoch: it is what a stopped run resumes from).
  data::OutputSet outputs(ctx);
  if (!o.metrics_csv.empty()) outputs.write_text(o.metrics_csv, workloads::metrics_csv(r));
  auto j = workloads::startup_json(ctx);
  if (ctx.is_root() && !s.json.empty()) {
    j.update(workloads::to_json(r, o));
    j["time_breakdown"] = breakdown;
    // The keys as eval's JSON has them (`keys`), and flat in each set as before.
    j["train"].update(data::to_json(train_keys));
    j["test"].update(data::to_json(test_keys));
    j["train"]["keys"] = data::to_json(train_keys);
    j["test"]["keys"] = data::to_json(test_keys);
  }
  if (!s.json.empty()) outputs.write_text(s.json, workloads::json_text(j));
  outputs.publish();
  return 0;
}

}  // namespace spmd::cli
