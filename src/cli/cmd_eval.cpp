// spmd eval: padded full-dataset evaluation (see workloads/eval.hpp for the strategies).
#include <optional>

#include "command.hpp"
#include "commands.hpp"
#include "dataset_key_options.hpp"
#include "spmd/data/dataset.hpp"
#include "spmd/data/output_set.hpp"
#include "spmd/runtime/error.hpp"
#include "spmd/runtime/stop_request.hpp"
#include "spmd/sharding/step_sync.hpp"
#include "spmd/workloads/eval.hpp"
#include "spmd/workloads/eval_benchmark.hpp"
#include "spmd/workloads/eval_models.hpp"
#include "spmd/workloads/eval_report.hpp"
#include "spmd/workloads/memory_estimate.hpp"
#include "spmd/workloads/report.hpp"
#include "spmd/workloads/time_breakdown.hpp"

namespace spmd::cli {

int cmd_eval(const Args& args) {
  po::options_description options("spmd eval options");
  options.add_options()("data", po::value<std::string>(), "HDF5 file with the examples (required)")(
      "model", po::value<std::string>()->default_value("zero"), workloads::eval_models_help().c_str())(
      "weights", po::value<std::string>(), "the model's file (what each --model takes: above)")(
      "classes", po::value<int>()->default_value(10), "number of classes for --model zero (labels must lie in [0, classes))")(
      "per-device-batch", po::value<std::int64_t>()->default_value(512), "rows per device per step (B)")(
      "strategy", po::value<std::string>()->default_value("pad"),
      "keep-remainder | drop-remainder | pad | pad-metrics | infinite-pad")(
      "min-device-batch", po::value<std::int64_t>()->default_value(0),
      "pad/pad-metrics: pad every device to at least this many rows (0: the per-device batch, one shape)")(
      "count-window", po::value<int>()->default_value(16),
      "infinite-pad: steps whose real rows one count-barrier allreduce sums (1: a barrier on every step, as in Flax's "
      "full-dataset evaluation guide; the stopping step is the same for every value)")(
      "drop-label", po::value<int>(), "drop the examples with this label after loading (per-rank counts become data dependent)")(
      "input-scale", po::value<std::string>()->default_value("auto"),
      "how stored features become float32: auto (uint8 / 255; other types as stored; with an image model (cnn), "
      "images of another type beyond [0, 1] are refused), none (as stored, uint8 too), or a factor such as 1/255")(
      "predictions", po::value<std::string>(),
      "write every example's predicted class (int32 [N], -1 = not evaluated), class probabilities (float32 [N, C]) "
      "and label to this HDF5 file, rows in the input's order (each rank writes its rows; atomic)")(
      "dry-run", po::bool_switch(), "read only shapes; print each rank's split, padded batch shape, steps and memory")(
      "benchmark", po::bool_switch(),
      "also time pad and infinite-pad against the plain forward over the same examples and print the ratios")(
      "repeat", po::value<int>()->default_value(1001), "--benchmark: rounds (each times every strategy once; the median ratio counts; at least 5, then up to 30 s)")(
      "passes", po::value<int>()->default_value(0),
      "--benchmark: passes over the data per sample (0: enough for about 2 ms)")(
      "progress-seconds", real_value(5.0),
      "seconds between progress lines on stdout when stderr is not a terminal (a log; on a terminal a bar on stderr is "
      "redrawn instead, as logreg and ensemble do)")(
      "quiet", po::bool_switch(), "no progress lines, only the start-up table, the results and the warnings");
  options.add(dataset_key_options());
  options.add(common_options());
  const auto cl = parse_validated(
      "eval", "--data FILE [options]", options, args,
      {.inputs = {"data", "weights"}, .outputs = {"predictions"}, .mpi_io = {"data", "weights", "predictions"}},
      [](const po::variables_map& vm) {
        require_present(vm, "data");
        require_readable_file(vm, "data");
        require_positive(vm, "per-device-batch");
        require_non_negative(vm, "min-device-batch");
        require_positive(vm, "classes");
        require_at_most(vm, "classes", data::kMaxClasses, "labels are class indices below it");
        require_positive(vm, "repeat");
        if (const int w = vm["count-window"].as<int>(); w < 1 || w > sharding::WindowedCountBarrier::kMaxWindow)
          throw Error("--count-window must be between 1 and " + std::to_string(sharding::WindowedCountBarrier::kMaxWindow) +
                      " steps (got " + std::to_string(w) + ")");
        require_non_negative(vm, "passes");
        require_positive(vm, "progress-seconds");
        const auto& model = workloads::eval_model(vm["model"].as<std::string>());
        workloads::parse_eval_strategy(vm["strategy"].as<std::string>());
        if (!model.weights.empty()) {
          require_present(vm, "weights", "--model " + model.name + " needs " + model.weights);
          require_readable_file(vm, "weights");
        }
        if (vm.count("drop-label") && vm["drop-label"].as<int>() < 0) throw Error("--drop-label must be >= 0");
        data::FeatureScale::parse(vm["input-scale"].as<std::string>(), false);
        if (vm.count("predictions")) {
          if (vm["dry-run"].as<bool>()) throw Error("--predictions: a --dry-run evaluates nothing to write");
          require_writable_destination(vm, "predictions");
        }
      });
  if (cl.help) {
    print_root(cl.help_text);
    return 0;
  }
  const auto& vm = cl.vm;
  runtime::Context ctx(MPI_COMM_WORLD, context_options(vm));
  // The workload from here to its results: the time breakdown (workloads/time_breakdown.hpp).
  runtime::TimeAccount account;
  // Signals until the pass ends stop it at the next agreement; later ones (writing results)
  // end the run, removing what it was writing (runtime/stop_request.hpp).
  std::optional<runtime::StopPolling> stop_polling(std::in_place);
  workloads::EvalOptions o;
  o.data = vm["data"].as<std::string>();
  o.per_device_batch = vm["per-device-batch"].as<std::int64_t>();
  o.strategy = workloads::parse_eval_strategy(vm["strategy"].as<std::string>());
  o.min_device_batch = vm["min-device-batch"].as<std::int64_t>();
  if (vm.count("drop-label")) o.drop_label = vm["drop-label"].as<int>();
  o.count_window = vm["count-window"].as<int>();
  const auto& eval_model = workloads::eval_model(vm["model"].as<std::string>());
  o.input_scale = data::FeatureScale::parse(vm["input-scale"].as<std::string>(), eval_model.images);
  workloads::require_layout_fits(ctx, o);
  const auto keys = data::resolve_dataset_keys(ctx, o.data, key_request(vm));
  o.keys = keys.keys;

  print_root(workloads::startup_table(ctx, "eval") + keys_line("data", o.data, keys));
  const auto model = eval_model.load(ctx, vm.count("weights") ? vm["weights"].as<std::string>() : "", vm["classes"].as<int>());
  const std::string json = json_path(vm);
  nlohmann::json j = workloads::startup_json(ctx);
  j["model"] = model->describe();
  j["data"] = o.data;
  j["keys"] = data::to_json(keys);
  // Before anything is allocated: the batch within the data, the memory within the node's.
  const auto shape = data::probe_shape(ctx, o.data, o.keys);
  print_root(workloads::fit_eval_batch(ctx, o, shape.rows));
  const std::string memory = workloads::require_memory_fits(
      ctx, workloads::eval_memory(ctx, o, shape, *model, vm.count("predictions") > 0, vm["benchmark"].as<bool>()),
      "lower --per-device-batch or --min-device-batch, or spread the rows over more ranks or nodes");
  if (vm["dry-run"].as<bool>()) {
    print_root(workloads::eval_dry_run(ctx, o, *model, &j) + memory);
    if (ctx.is_root() && !json.empty()) workloads::write_json(json, j);
    return 0;
  }
  const auto shard = workloads::load_eval_shard(ctx, o, *model);
  print_root(workloads::format("# data %s: %lld examples, model %s, per-device batch %lld, strategy %s\n", o.data.c_str(),
                               static_cast<long long>(shard.shard.global_rows), model->describe().c_str(),
                               static_cast<long long>(o.per_device_batch), workloads::to_string(o.strategy)));
  std::optional<workloads::PredictionRecorder> predictions;
  if (vm.count("predictions")) predictions.emplace(shard, model->classes());
  // Rank 0 shows progress from what it knows locally (run_eval's estimate: no communication).
  const bool show_progress = ctx.is_root() && !vm["quiet"].as<bool>();
  const double progress_seconds = vm["progress-seconds"].as<double>();
  workloads::ProgressLine progress(show_progress);
  workloads::EvalProgress on_progress;
  if (show_progress)
    on_progress = [&](std::int64_t done, std::int64_t total, double seconds) {
      if (!progress.due(progress_seconds)) return;
      progress.update("eval rows", done, total,
                      workloads::format("%5.1f%%  %.0f examples/s  %.1f s elapsed",
                                        total > 0 ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100.0,
                                        seconds > 0 ? static_cast<double>(done) / seconds : 0.0, seconds),
                      1);
    };
  const auto result = workloads::run_eval(ctx, o, *model, shard, predictions ? &*predictions : nullptr, on_progress);
  stop_polling.reset();
  progress.close();
  if (result.stop_signal) {
    const std::int64_t to_evaluate = result.dataset_rows - result.filtered_rows - result.dropped;
    print_root(workloads::format("# stopped by %s at step %lld%s: %lld of %lld rows evaluated; no results, predictions or "
                                 "JSON written (a partial pass is not an evaluation)\n",
                                 runtime::signal_name(result.stop_signal).c_str(), static_cast<long long>(result.steps),
                                 result.planned_steps >= 0
                                     ? workloads::format(" of %lld", static_cast<long long>(result.planned_steps)).c_str()
                                     : "",
                                 static_cast<long long>(result.total), static_cast<long long>(to_evaluate)));
    return 0;
  }
  require_inputs_unchanged(cl, "at the end of the evaluation");
  const bool model_computes = eval_model.computes;
  print_root(workloads::result_table(result, o, eval_model));
  print_root(workloads::confusion_table(result.confusion));
  j.update(workloads::to_json(result, o, ctx));
  // seconds and examples_per_second stay (tools/scaling_report.py reads them); this says
  // whether they include a model's compute (false for --model zero: data movement only).
  j["timing_includes_compute"] = model_computes;
  // The predictions file and the JSON appear together at the end, or neither does.
  data::OutputSet outputs(ctx);
  std::string predictions_line;
  if (predictions) {
    const std::string path = vm["predictions"].as<std::string>();
    predictions->write(ctx, path, {model->describe(), o.data, o.keys.features, o.keys.labels}, outputs);
    const std::int64_t missing = result.dataset_rows - result.total;
    predictions_line = workloads::format("# predictions: %s (%lld rows%s)\n", path.c_str(), static_cast<long long>(result.dataset_rows),
                                         missing ? workloads::format("; %lld not evaluated: predicted = -1", static_cast<long long>(missing)).c_str()
                                                 : "");
    j["predictions"] = path;
  }
  // Before --benchmark: its extra passes are a measurement of their own, not the workload.
  const auto breakdown = workloads::reduce_time_breakdown(ctx, account.stop());
  print_root(workloads::time_breakdown_table(breakdown));
  j["time_breakdown"] = workloads::to_json(breakdown);

  if (vm["benchmark"].as<bool>()) {
    const auto b = workloads::run_eval_benchmark(ctx, o, *model, shard, {vm["repeat"].as<int>(), vm["passes"].as<int>()},
                                                 result.seconds);
    print_root(workloads::benchmark_table(b, model->describe(), o.per_device_batch));
    j["benchmark"] = workloads::to_json(b);
  }
  if (!json.empty()) outputs.write_text(json, workloads::json_text(j));
  outputs.publish();
  print_root(predictions_line);
  return 0;
}

}  // namespace spmd::cli
