// spmd logreg: data-parallel multiclass logistic regression with L-BFGS (JAXopt's LBFGS).
#include "commands.hpp"
#include "dataset_key_options.hpp"
#include "option_binder.hpp"
#include "session.hpp"
#include "spmd/data/dataset.hpp"
#include "spmd/data/output_set.hpp"
#include "spmd/workloads/logreg.hpp"
#include "spmd/workloads/logreg_report.hpp"
#include "spmd/workloads/logreg_weights.hpp"
#include "spmd/workloads/report.hpp"

namespace spmd::cli {

int cmd_logreg(const Args& args) {
  auto bound = bind<workloads::LogregOptions>("logreg", "--data FILE [options]", args, {dataset_key_options()});
  if (!bound) return 0;
  auto& o = bound->options;
  // Signals from here on end the solve at the current iterate (status stopped).
  Session s(bound->cl);
  const auto& ctx = s.ctx;
  const auto keys = data::resolve_dataset_keys(ctx, o.data, key_request(s.cl.vm));
  o.keys = keys.keys;
  s.startup(keys_line("data", o.data, keys));
  print_root(workloads::run_header(o));
  workloads::LogregProgressDisplay progress(ctx, o);
  auto on_warning = [&](const std::string& warning) { print_root("# WARNING: " + warning + "\n"); };
  const auto r = workloads::run_logreg(ctx, o, progress.iteration(), on_warning);
  require_inputs_unchanged(s.cl, "at the end of the solve");
  progress.close();
  print_root(workloads::summary_text(r, o, ctx));
  // The weights, the CSV and the JSON appear together at the end, or none of them does.
  data::OutputSet outputs(ctx);
  // One file per solve of a regularisation path (the file itself without one).
  for (std::size_t k = 0; k < r.path.size() && !o.weights_out.empty(); ++k) {
    const auto& p = r.path[k];
    workloads::write_logreg_weights(ctx, workloads::logreg_path_file(o.weights_out, k, r.path.size()),
                                    {p.W, p.bias, r.features, r.classes},
                                    {optim::to_string(p.status), p.iterations, p.value, o.data, o.input_scale.text,
                                     models::to_string(o.precision), p.W64, p.bias64, workloads::to_string(o.penalty),
                                     p.l1, p.l2},
                                    outputs);
  }
  const auto breakdown = s.time_breakdown();
  auto j = workloads::startup_json(ctx);  // collective: every rank
  if (!o.metrics_csv.empty()) outputs.write_text(o.metrics_csv, workloads::metrics_csv(r));
  if (!s.json.empty()) {
    if (ctx.is_root()) {
      j.update(workloads::to_json(r, o));
      j["time_breakdown"] = breakdown;
      j["data"] = o.data;
      j["keys"] = data::to_json(keys);
    }
    outputs.write_text(s.json, workloads::json_text(j));
  }
  outputs.publish();
  // A solver that did not converge is a result, not a failure: exit 0 unless non-finite.
  return r.status == optim::LBFGSStatus::non_finite ? 3 : 0;
}

}  // namespace spmd::cli
