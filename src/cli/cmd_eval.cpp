// spmd eval: padded full-dataset evaluation (see workloads/eval.hpp for the strategies).
#include <optional>

#include "commands.hpp"
#include "dataset_key_options.hpp"
#include "option_binder.hpp"
#include "session.hpp"
#include "spmd/data/dataset.hpp"
#include "spmd/data/feature_source.hpp"
#include "spmd/data/output_set.hpp"
#include "spmd/workloads/eval.hpp"
#include "spmd/workloads/eval_benchmark.hpp"
#include "spmd/workloads/eval_models.hpp"
#include "spmd/workloads/eval_report.hpp"
#include "spmd/workloads/memory_estimate.hpp"
#include "spmd/workloads/report.hpp"

namespace spmd::cli {

int cmd_eval(const Args& args) {
  auto bound = bind<workloads::EvalOptions>("eval", "--data FILE [options]", args, {dataset_key_options()});
  if (!bound) return 0;
  auto& o = bound->options;
  const auto& eval_model = workloads::eval_model(o.model);
  // A model the GPU backend auto would take cannot run (an ONNX op it lacks): auto takes the CPU.
  runtime::ContextOptions backend = context_options(bound->cl.vm);
  std::string backend_line;
  if (eval_model.cpu_only_under_auto && backend.backend == "auto") {
    if (const std::string why = eval_model.cpu_only_under_auto(o); !why.empty()) {
      backend.backend = "cpu";
      backend_line = "# --backend auto: --model " + o.model + " runs on the CPU (" + why + ")\n";
    }
  }
  Session s(bound->cl, backend);
  const auto& ctx = s.ctx;
  o.input_scale.images = eval_model.images;
  workloads::require_layout_fits(ctx, o);
  const auto keys = data::resolve_dataset_keys(ctx, o.data, key_request(s.cl.vm));
  o.keys = keys.keys;
  s.startup(backend_line + keys_line("data", o.data, keys));
  const auto model = eval_model.load(ctx, o);
  nlohmann::json j = workloads::startup_json(ctx);
  j["data"] = o.data;
  j["keys"] = data::to_json(keys);
  // Before anything is allocated: the batch within the data, the memory within the node's.
  const auto shape = data::probe_feature_source(ctx, o.data, o.keys).shape;
  workloads::fit_input_scale_to_model(o, *model, shape);
  print_root(workloads::fit_eval_batch(ctx, o, shape.rows));
  const std::string memory = workloads::require_memory_fits(
      ctx, workloads::eval_memory(ctx, o, shape, *model, !o.predictions.empty(), o.benchmark),
      "lower --per-device-batch or --min-device-batch, or spread the rows over more ranks or nodes");
  if (o.dry_run) {
    print_root(workloads::eval_dry_run(ctx, o, *model, &j) + memory);
    j["model"] = model->describe();  // with the input mapping, decided by the data's sample shape
    if (ctx.is_root() && !s.json.empty()) workloads::write_json(s.json, j);
    return 0;
  }
  const auto shard = workloads::load_eval_shard(ctx, o, *model);
  j["model"] = model->describe();
  if (shard.sparse) j["sparse"] = shard.sparse->describe();
  print_root(workloads::eval_header(o, shard, *model));
  std::optional<workloads::PredictionRecorder> predictions;
  if (!o.predictions.empty()) predictions.emplace(shard, model->classes());
  workloads::EvalProgressDisplay progress(ctx, o);
  const auto result = workloads::run_eval(ctx, o, *model, shard, predictions ? &*predictions : nullptr, progress.progress());
  // Signals until here stopped the pass; later ones (writing results) end the run, removing
  // what it was writing (runtime/stop_request.hpp).
  s.stop_polling.reset();
  progress.close();
  if (result.stop_signal) {
    print_root(workloads::stopped_text(result));
    return 0;
  }
  require_inputs_unchanged(s.cl, "at the end of the evaluation");
  print_root(workloads::result_table(result, o, eval_model));
  print_root(workloads::confusion_table(result.confusion));
  j.update(workloads::to_json(result, o));
  // seconds and examples_per_second stay (tools/scaling_report.py reads them); this says
  // whether they include a model's compute (false for --model zero: data movement only).
  j["timing_includes_compute"] = eval_model.computes;
  // The predictions file and the JSON appear together at the end, or neither does.
  data::OutputSet outputs(ctx);
  if (predictions) {
    predictions->write(ctx, o.predictions, {model->describe(), o.data, o.keys.features, o.keys.labels}, outputs);
    j["predictions"] = o.predictions;
  }
  // Before --benchmark: its extra passes are a measurement of their own, not the workload.
  j["time_breakdown"] = s.time_breakdown();
  if (o.benchmark) {
    const auto b = workloads::run_eval_benchmark(ctx, o, *model, shard, {o.repeat, o.passes}, result.seconds);
    print_root(workloads::benchmark_table(b, model->describe(), o.per_device_batch));
    j["benchmark"] = workloads::to_json(b);
  }
  if (!s.json.empty()) outputs.write_text(s.json, workloads::json_text(j));
  outputs.publish();
  if (predictions) print_root(workloads::predictions_line(result, o.predictions));
  return 0;
}

}  // namespace spmd::cli
