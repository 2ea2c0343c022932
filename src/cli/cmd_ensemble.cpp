// spmd ensemble: CNN ensemble training, one member per device (workloads/ensemble.hpp).
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "command.hpp"
#include "commands.hpp"
#include "dataset_key_options.hpp"
#include "spmd/data/dataset.hpp"
#include "spmd/data/output_set.hpp"
#include "spmd/data/output_lock.hpp"
#include "spmd/runtime/error.hpp"
#include "spmd/runtime/stop_request.hpp"
#include "spmd/models/cnn_params.hpp"
#include "spmd/workloads/checkpoint.hpp"
#include "spmd/workloads/ensemble.hpp"
#include "spmd/workloads/ensemble_report.hpp"
#include "spmd/workloads/report.hpp"
#include "spmd/workloads/time_breakdown.hpp"

namespace spmd::cli {

namespace {
// "32,64" -> {32, 64}, as Flax's `features` of each layer; "none" (or "") -> {} when allowed.
std::vector<int> parse_widths(const po::variables_map& vm, const std::string& name, bool may_be_empty) {
  const std::string text = vm[name].as<std::string>();
  std::vector<int> widths;
  if (text.empty() || text == "none") {
    if (!may_be_empty) throw Error("--" + name + " needs at least one width (e.g. 32,64)");
    return widths;
  }
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    std::size_t used = 0;
    long value = 0;
    try {
      value = std::stol(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || value < 1 || value > 65536)
      throw Error("--" + name + " must be a comma-separated list of widths between 1 and 65536 (got '" + text + "')");
    widths.push_back(static_cast<int>(value));
    start = comma + 1;
  }
  return widths;
}
}  // namespace

int cmd_ensemble(const Args& args) {
  po::options_description options("spmd ensemble options");
  options.add_options()("train", po::value<std::string>(),
                        "HDF5 training set: images [N,H,W,C] or [N,H,W] (channels last), labels [N] (required)")(
      "test", po::value<std::string>(), "HDF5 test set, same layout (required)")(
      "epochs", po::value<int>()->default_value(1), "epochs to train in total (a resumed run continues up to this)")(
      "batch-size", po::value<int>()->default_value(32), "training batch, the same for every member")(
      "learning-rate", real_value(0.1f), "SGD learning rate (> 0)")(
      "momentum", real_value(0.9f), "SGD momentum in [0, 1)")(
      "seed", po::value<std::uint64_t>()->default_value(0), "root seed: member g uses the g-th key split from it")(
      "train-limit", po::value<std::int64_t>()->default_value(0), "use only the first N training examples (0: all)")(
      "test-limit", po::value<std::int64_t>()->default_value(0), "evaluate only the first N test examples (0: all)")(
      "eval-batch", po::value<int>()->default_value(512), "test-set batch per device")(
      "conv-features", po::value<std::string>()->default_value("32,64"),
      "output channels of each 3x3 conv layer (each followed by ReLU and 2x2 average pooling), input side first")(
      "dense-features", po::value<std::string>()->default_value("256"),
      "widths of the hidden dense layers (ReLU) before the classifier; 'none' for no hidden layer")(
      "classes", po::value<int>()->default_value(0), "number of classes (0: 1 + the largest training label)")(
      "input-scale", po::value<std::string>()->default_value("auto"),
      "how stored features become float32: auto (uint8 / 255; other types as stored; images of another type beyond [0, 1] are refused), none (as stored, uint8 too), or a factor such as 1/255")(
      "checkpoint", po::value<std::string>(), "HDF5 checkpoint written after every epoch and on SIGTERM/SIGINT (atomic)")(
      "resume", po::bool_switch(), "continue from --checkpoint (refused if it comes from other options)")(
      "overwrite", po::bool_switch(),
      "replace an existing --checkpoint with a new training (without it, or --resume, an existing file is refused)")(
      "metrics-csv", po::value<std::string>(), "per-epoch CSV of the metrics")(
      "progress-every", po::value<int>()->default_value(0), "print a progress line every N steps (0: 10 lines per epoch)")(
      "quiet", po::bool_switch(), "no progress lines, only the start-up table, the epoch rows and the summary");
  options.add(dataset_key_options());
  options.add(test_key_options());
  options.add(common_options());
  const auto cl = parse_validated(
      "ensemble", "--train FILE --test FILE [options]", options, args,
      // --checkpoint is no input here: it changes every epoch (the resume check reads it).
      {.inputs = {"train", "test"}, .outputs = {"checkpoint", "metrics-csv"}, .mpi_io = {"train", "test", "checkpoint"}},
      [](const po::variables_map& vm) {
        require_present(vm, "train");
        require_present(vm, "test");
        require_readable_file(vm, "train");
        require_readable_file(vm, "test");
        require_positive(vm, "epochs");
        require_positive(vm, "batch-size");
        require_positive(vm, "eval-batch");
        require_non_negative(vm, "train-limit");
        require_non_negative(vm, "test-limit");
        require_non_negative(vm, "progress-every");
        if (vm["quiet"].as<bool>() && !vm["progress-every"].defaulted())
          throw Error("--quiet and --progress-every contradict each other: give one of them");
        require_non_negative(vm, "classes");
        data::FeatureScale::parse(vm["input-scale"].as<std::string>(), true);
        require_at_most(vm, "classes", data::kMaxClasses, "labels are class indices below it");
        parse_widths(vm, "conv-features", false);
        parse_widths(vm, "dense-features", true);
        optim::validate(optim::SgdMomentum{vm["learning-rate"].as<float>(), vm["momentum"].as<float>()});
        if (vm["resume"].as<bool>()) {
          require_present(vm, "checkpoint", "--resume continues from it");
          require_readable_file(vm, "checkpoint");
          if (vm["overwrite"].as<bool>())
            throw Error("--resume and --overwrite contradict each other: continue the checkpoint, or replace it");
        } else if (vm.count("checkpoint") && !vm["overwrite"].as<bool>()) {
          workloads::refuse_existing_checkpoint(vm["checkpoint"].as<std::string>(), "checkpoint");
        }
        require_writable_destination(vm, "checkpoint");
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
  workloads::EnsembleOptions o;
  o.train = vm["train"].as<std::string>();
  o.test = vm["test"].as<std::string>();
  o.epochs = vm["epochs"].as<int>();
  o.batch_size = vm["batch-size"].as<int>();
  o.sgd = {vm["learning-rate"].as<float>(), vm["momentum"].as<float>()};
  o.seed = vm["seed"].as<std::uint64_t>();
  o.train_limit = vm["train-limit"].as<std::int64_t>();
  o.test_limit = vm["test-limit"].as<std::int64_t>();
  o.eval_batch = vm["eval-batch"].as<int>();
  if (vm.count("checkpoint")) o.checkpoint = vm["checkpoint"].as<std::string>();
  o.resume = vm["resume"].as<bool>();
  o.model.height = o.model.width = o.model.channels = 0;  // from the training images
  o.model.conv_features = parse_widths(vm, "conv-features", false);
  o.model.dense_features = parse_widths(vm, "dense-features", true);
  o.model.classes = vm["classes"].as<int>();
  o.input_scale = data::FeatureScale::parse(vm["input-scale"].as<std::string>(), true);
  // Signals from here on stop the run after the step in progress, with a checkpoint.
  const runtime::StopPolling stop_polling;
  // One job per checkpoint, for the whole run (a second job is refused now, not after it
  // has overwritten this one's epochs).
  std::optional<data::OutputLock> checkpoint_lock;
  if (!o.checkpoint.empty()) checkpoint_lock.emplace(ctx, o.checkpoint, "checkpoint");

  const auto train_keys = data::resolve_dataset_keys(ctx, o.train, key_request(vm));
  const auto test_keys = data::resolve_dataset_keys(ctx, o.test, test_key_request(vm));
  o.keys = train_keys.keys;
  o.test_keys = test_keys.keys;
  print_root(workloads::startup_table(ctx, "ensemble") + keys_line("train", o.train, train_keys) +
             keys_line("test ", o.test, test_keys));
  print_root(workloads::run_header(ctx, o));
  if (checkpoint_lock) print_root(checkpoint_lock->takeover_line());
  const int every = vm["progress-every"].as<int>();
  const bool quiet = vm["quiet"].as<bool>();
  workloads::ProgressLine progress(ctx.is_root() && !quiet);
  workloads::EnsembleEvents events;
  // Where the run starts is said before it trains (a resumed run is known as one at once,
  // not after its last epoch), then the epoch table's header.
  events.start = [&](const workloads::EnsembleResult& start) { print_root(workloads::start_text(start, o)); };
  events.progress = [&](int epoch, std::int64_t step, std::int64_t steps, double ips) {
    if (!ctx.is_root() || quiet) return;
    progress.update("epoch " + std::to_string(epoch) + " step", step, steps,
                    workloads::format("%.0f images/s per member", ips), every > 0 ? every : std::max<std::int64_t>(1, steps / 10));
  };
  events.epoch = [&](const workloads::EpochMetrics& e) {
    print_root(workloads::epoch_row(e));
    require_inputs_unchanged(cl, "after epoch " + std::to_string(e.epoch));
  };
  const auto r = workloads::run_ensemble(ctx, o, events);
  progress.close();
  print_root(workloads::summary_text(r, o));
  const auto breakdown = workloads::reduce_time_breakdown(ctx, account.stop());
  print_root(workloads::time_breakdown_table(breakdown));
  // The CSV and the JSON appear together, or neither does (the checkpoint is published
  // after every epoch: it is what a stopped run resumes from).
  data::OutputSet outputs(ctx);
  if (vm.count("metrics-csv")) outputs.write_text(vm["metrics-csv"].as<std::string>(), workloads::metrics_csv(r));
  auto j = workloads::startup_json(ctx);
  if (ctx.is_root() && !json_path(vm).empty()) {
    j.update(workloads::to_json(r, o, ctx));
    j["time_breakdown"] = workloads::to_json(breakdown);
    // The keys as eval's JSON has them (`keys`), and flat in each set as before.
    j["train"].update(data::to_json(train_keys));
    j["test"].update(data::to_json(test_keys));
    j["train"]["keys"] = data::to_json(train_keys);
    j["test"]["keys"] = data::to_json(test_keys);
  }
  if (!json_path(vm).empty()) outputs.write_text(json_path(vm), workloads::json_text(j));
  outputs.publish();
  return 0;
}

}  // namespace spmd::cli
