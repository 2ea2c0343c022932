// spmd logreg: data-parallel multiclass logistic regression with L-BFGS (JAXopt's LBFGS).
#include "command.hpp"
#include "commands.hpp"
#include "dataset_key_options.hpp"
#include "spmd/data/dataset.hpp"
#include "spmd/data/output_set.hpp"
#include "spmd/runtime/error.hpp"
#include "spmd/runtime/stop_request.hpp"
#include "spmd/workloads/logreg.hpp"
#include "spmd/workloads/logreg_report.hpp"
#include "spmd/workloads/logreg_weights.hpp"
#include "spmd/workloads/report.hpp"
#include "spmd/workloads/time_breakdown.hpp"

namespace spmd::cli {

namespace {
optim::LBFGSParams<double> solver_params(const po::variables_map& vm) {
  optim::LBFGSParams<double> p;
  p.maxiter = vm["maxiter"].as<int>();
  p.tol = vm["tol"].as<double>();
  p.history = vm["history"].as<int>();
  p.stepsize = vm["stepsize"].as<double>();
  p.linesearch = optim::parse_line_search(vm["linesearch"].as<std::string>());
  p.max_linesearch = vm["max-linesearch"].as<int>();
  return p;
}
}  // namespace

int cmd_logreg(const Args& args) {
  po::options_description options("spmd logreg options");
  options.add_options()("data", po::value<std::string>(), "HDF5 file with features [N, F...] and integer labels [N] (required)")(
      "classes", po::value<int>()->default_value(0), "number of classes C (0: max label + 1)")(
      "input-scale", po::value<std::string>()->default_value("auto"),
      "how stored features become float32: auto (uint8 / 255; other types as stored), none (as stored, uint8 too), or a factor such as 1/255")(
      "maxiter", po::value<int>()->default_value(100), "L-BFGS iterations at most (>= 1)")(
      "tol", real_value(1e-3), "stop when the gradient's L2 norm is <= tol (JAXopt's state.error)")(
      "history", po::value<int>()->default_value(10), "L-BFGS history size m (>= 1)")(
      "stepsize", real_value(0.0), "> 0: fixed step size; 0: line search")(
      "linesearch", po::value<std::string>()->default_value("zoom"),
      "zoom (strong Wolfe, c1 1e-4, c2 0.9) or backtracking (Armijo, factor 0.5)")(
      "max-linesearch", po::value<int>()->default_value(30), "objective evaluations per line search at most (>= 1)")(
      "l2", real_value(0.0),
      "L2 regularisation: adds l2/2 * ||W||^2 (>= 0; never the intercept). sklearn's C is 1 / (l2 * N)")(
      "fit-intercept", po::bool_switch(),
      "logits x W + b with an intercept b [C] fitted too (sklearn's fit_intercept=True): b starts at 0 and is not "
      "penalised by --l2")(
      "weights-out", po::value<std::string>(),
      "write W [F, C] (and b [C] with --fit-intercept) here (HDF5, atomic) for spmd eval --model logreg")(
      "metrics-csv", po::value<std::string>(), "per-iteration CSV: iteration,value,error,stepsize,evaluations,seconds")(
      "verify-replicas", po::bool_switch(), "check every evaluation that all ranks hold the same iterate (one extra allreduce)")(
      "quiet", po::bool_switch(), "no per-iteration lines, only the summary")(
      "precision", po::value<std::string>()->default_value("float32"),
      "the objective's and gradient's arithmetic: float32 (fastest) or float64 (float64's optimum, ~2x the time per "
      "evaluation; the features are still read as float32)");
  options.add(dataset_key_options());
  options.add(common_options());
  const auto cl = parse_validated("logreg", "--data FILE [options]", options, args,
                                  {.inputs = {"data"}, .outputs = {"weights-out", "metrics-csv"}, .mpi_io = {"data"}},
                                  [](const po::variables_map& vm) {
    require_present(vm, "data");
    require_readable_file(vm, "data");
    require_non_negative(vm, "classes");
    data::FeatureScale::parse(vm["input-scale"].as<std::string>(), false);
    require_at_most(vm, "classes", data::kMaxClasses, "labels are class indices below it");
    require_non_negative(vm, "l2");
    models::parse_logreg_precision(vm["precision"].as<std::string>(), "precision");
    optim::validate(solver_params(vm));
    require_writable_destination(vm, "weights-out");
    require_writable_destination(vm, "metrics-csv");
  });
  if (cl.help) {
    print_root(cl.help_text);
    return 0;
  }
  const auto& vm = cl.vm;
  runtime::Context ctx(MPI_COMM_WORLD, context_options(vm));
  // The workload from here to its results: the time breakdown (workloads/time_breakdown.hpp).
  runtime::TimeAccount account;
  // Signals from here on end the solve at the current iterate (status stopped).
  const runtime::StopPolling stop_polling;
  workloads::LogregOptions o;
  o.data = vm["data"].as<std::string>();
  o.classes = vm["classes"].as<int>();
  o.input_scale = data::FeatureScale::parse(vm["input-scale"].as<std::string>(), false);
  o.solver = solver_params(vm);
  o.l2 = vm["l2"].as<double>();
  o.fit_intercept = vm["fit-intercept"].as<bool>();
  o.precision = models::parse_logreg_precision(vm["precision"].as<std::string>(), "precision");
#ifndef NDEBUG
  o.verify_replicas = true;
#else
  o.verify_replicas = vm["verify-replicas"].as<bool>();
#endif
  const auto keys = data::resolve_dataset_keys(ctx, o.data, key_request(vm));
  o.keys = keys.keys;
  print_root(workloads::startup_table(ctx, "logreg") + keys_line("data", o.data, keys));
  print_root(workloads::format(
      "# data %s  solver L-BFGS history %d, line search %s, maxiter %d, tol %g, l2 %g, intercept %s, precision %s\n",
      o.data.c_str(), o.solver.history, o.solver.stepsize > 0 ? "none (fixed step)" : optim::to_string(o.solver.linesearch),
      o.solver.maxiter, o.solver.tol, o.l2, o.fit_intercept ? "fitted (not penalised)" : "none",
      models::to_string(o.precision)));
  workloads::Table table({{"iter", "", 5}, {"value", "", 14}, {"error", "|grad|", 12}, {"step", "", 10},
                          {"evals", "", 6}, {"time", "ms", 9}});
  const bool quiet = vm["quiet"].as<bool>();
  workloads::ProgressLine progress(ctx.is_root() && !quiet);
  if (!quiet && !progress.live()) print_root(table.header());
  auto on_iteration = [&](const workloads::LogregIterationRecord& it) {
    if (!ctx.is_root() || quiet) return;
    if (progress.live()) {
      progress.update("iter", it.iteration, o.solver.maxiter,
                      workloads::format("value %.6f  error %.3e", it.value, it.error));
      return;
    }
    print_root(table.row({std::to_string(it.iteration), workloads::format("%.8f", it.value),
                          workloads::format("%.4e", it.error), workloads::format("%.3e", it.stepsize),
                          std::to_string(it.evaluations), workloads::format("%.2f", it.seconds * 1e3)}));
  };
  auto on_warning = [&](const std::string& warning) { print_root("# WARNING: " + warning + "\n"); };
  const auto r = workloads::run_logreg(ctx, o, on_iteration, on_warning);
  require_inputs_unchanged(cl, "at the end of the solve");
  progress.close();
  print_root(workloads::summary_text(r, o, ctx));
  // The weights, the CSV and the JSON appear together at the end, or none of them does.
  data::OutputSet outputs(ctx);
  if (vm.count("weights-out"))
    workloads::write_logreg_weights(ctx, vm["weights-out"].as<std::string>(), {r.W, r.bias, r.features, r.classes},
                                    {optim::to_string(r.status), r.iterations, r.value, o.data,
                                     models::to_string(o.precision), r.W64, r.bias64},
                                    outputs);
  const auto breakdown = workloads::reduce_time_breakdown(ctx, account.stop());
  print_root(workloads::time_breakdown_table(breakdown));
  auto j = workloads::startup_json(ctx);  // collective: every rank
  if (vm.count("metrics-csv")) outputs.write_text(vm["metrics-csv"].as<std::string>(), workloads::metrics_csv(r));
  if (!json_path(vm).empty()) {
    if (ctx.is_root()) {
      j.update(workloads::to_json(r, o, ctx));
      j["time_breakdown"] = workloads::to_json(breakdown);
      j["data"] = o.data;
      j["keys"] = data::to_json(keys);
    }
    outputs.write_text(json_path(vm), workloads::json_text(j));
  }
  outputs.publish();
  // A solver that did not converge is a result, not a failure: exit 0 unless non-finite.
  return r.status == optim::LBFGSStatus::non_finite ? 3 : 0;
}

}  // namespace spmd::cli
