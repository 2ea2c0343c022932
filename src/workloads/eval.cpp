#include "spmd/workloads/eval.hpp"

#include <algorithm>
#include <chrono>
#include <ctime>

#include "spmd/data/feature_decoder.hpp"
#include "spmd/data/feature_source.hpp"
#include "spmd/data/label_column.hpp"
#include "spmd/runtime/agree.hpp"
#include "spmd/runtime/check.hpp"
#include "spmd/runtime/collectives.hpp"
#include "spmd/sharding/split.hpp"
#include "spmd/sharding/step_plan.hpp"
#include "spmd/sharding/step_sync.hpp"
#include "spmd/workloads/file_row_blocks.hpp"
#include "spmd/workloads/eval_loop.hpp"
#include "spmd/workloads/report.hpp"
#include "spmd/workloads/row_blocks.hpp"

namespace spmd::workloads {

using runtime::Context;
using sharding::ConstHostView;
using sharding::DType;

const char* to_string(EvalStrategy s) {
  switch (s) {
    case EvalStrategy::KeepRemainder: return "keep-remainder";
    case EvalStrategy::DropRemainder: return "drop-remainder";
    case EvalStrategy::Pad: return "pad";
    case EvalStrategy::PadMetrics: return "pad-metrics";
    case EvalStrategy::InfinitePad: return "infinite-pad";
  }
  return "?";
}

EvalStrategy parse_eval_strategy(const std::string& text) {
  for (auto s : {EvalStrategy::KeepRemainder, EvalStrategy::DropRemainder, EvalStrategy::Pad, EvalStrategy::PadMetrics,
                 EvalStrategy::InfinitePad})
    if (text == to_string(s)) return s;
  throw Error("--strategy must be one of keep-remainder|drop-remainder|pad|pad-metrics|infinite-pad (got '" + text + "')");
}

namespace {

using Clock = std::chrono::steady_clock;

// CPU time of the whole process (every device thread): unlike wall time it does not count
// the moments the VM's scheduler takes the core away, so benchmark ratios are steadier.
double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Timer {
  Clock::time_point wall = Clock::now();
  double cpu = process_cpu_seconds();
  double wall_seconds() const { return std::chrono::duration<double>(Clock::now() - wall).count(); }
  double cpu_seconds() const { return process_cpu_seconds() - cpu; }
};

// EvalProgress's estimate (eval.hpp) after a step that brought this rank's rows done to `done`.
void report_progress(const EvalProgress& progress, const EvalShard& es, std::int64_t done, const Timer& timer) {
  if (!progress) return;
  const auto& s = es.shard;
  const std::int64_t total = s.global_rows;
  // In 128 bits: exact (1536 of 10000 on one rank reads 1536, not 1535), and no overflow.
  const std::int64_t estimate =
      s.rows > 0 ? static_cast<std::int64_t>(static_cast<__int128>(done) * total / s.rows) : total;
  progress(std::min(estimate, total), total, timer.wall_seconds());
}

// The columns of an eval block (file_row_blocks.hpp): the features as stored and the labels
// of its rows. The features are passed unpadded (Padding::Unread: each device reads only its
// real rows, which lie in place in the block), so a padded step copies a few integers (the
// labels, the mask), never feature rows.
enum BlockColumn : std::size_t { kFeatures = 0, kLabels = 1 };

data::FeatureDecoder feature_decoder_of(const EvalShard& es) {
  return data::FeatureDecoder(es.features_shape.features_type, es.shard.scale,
                              "'" + es.path + "': features dataset '" + es.features_key + "'");
}

// Per-device predictors and input buffers, made once for the run (the outputs are the
// step's: StepOutputs).
struct Devices {
  std::vector<std::unique_ptr<models::DevicePredictor>> predictors;
  std::vector<std::vector<float>> inputs;  // [max_rows, sample_size] each; empty when no host decode is needed
  std::vector<char> bytes_on_device;       // per device: its predictor takes the uint8 rows (decided once)
  const data::FeatureDecoder* decoder = nullptr;
  std::int64_t sample_size = 0;

  // Device i predicts n rows as stored at `stored` into classes (and probs, or nullptr). The
  // rows go as they lie when stored as the models see them; as bytes to a model that decodes
  // them where it computes (a GPU: a quarter of the bytes cross PCIe); else decoded on the
  // device's thread into its buffer (each device converts its own rows).
  void predict(int i, const std::byte* stored, std::int64_t n, std::int32_t* classes, float* probs) {
    models::DevicePredictor& predictor = *predictors[static_cast<size_t>(i)];
    if (decoder->in_place()) return predictor.predict(reinterpret_cast<const float*>(stored), n, classes, probs);
    if (bytes_on_device[static_cast<size_t>(i)])
      return predictor.predict_bytes(reinterpret_cast<const std::uint8_t*>(stored), n, *decoder->byte_table(), classes,
                                     probs);
    float* out = inputs[static_cast<size_t>(i)].data();
    decoder->decode(stored, n * sample_size, out);
    predictor.predict(out, n, classes, probs);
  }
};

Devices make_devices(const Context& ctx, const models::Classifier& model, std::int64_t max_rows,
                     const data::FeatureDecoder& decoder, std::int64_t sample_size) {
  Devices d;
  const auto n = static_cast<size_t>(ctx.devices_per_rank());
  d.predictors.resize(n);
  d.inputs.resize(n);
  d.bytes_on_device.assign(n, 0);
  d.decoder = &decoder;
  d.sample_size = sample_size;
  ctx.pool().run([&](int i) {
    const auto k = static_cast<size_t>(i);
    d.predictors[k] = model.make_predictor(ctx.devices()[k], max_rows);
    d.bytes_on_device[k] = decoder.byte_table() != nullptr && d.predictors[k]->decodes_bytes();
    if (!decoder.in_place() && !d.bytes_on_device[k]) d.inputs[k].assign(static_cast<size_t>(max_rows * sample_size), 0.0f);
  });
  return d;
}

// A pass's rows of the file (file_row_blocks.hpp).
FileRows file_rows_of(const EvalShard& es) {
  FileRows rows;
  rows.path = es.path;
  rows.features_key = es.features_key;
  rows.shape = es.features_shape;
  rows.sparse = es.sparse;
  rows.scale = es.shard.scale;
  rows.first_file_row = es.shard.first_row;
  rows.file_rows = es.file_rows;
  rows.every_row = es.filtered == 0;  // --drop-label dropped nothing here: kept is every row
  rows.kept = es.kept;
  rows.labels = es.shard.labels;
  return rows;
}

std::int64_t stored_row_bytes(const EvalShard& es) {
  return es.features_shape.sample_size * static_cast<std::int64_t>(data::size_of(es.features_shape.features_type));
}

// The shard's rows in blocks through prefetch_to_device, read from the file (or viewed in
// memory: with_features_in_memory). Made before a loop's timer starts (as the predictors
// are): the thread's start and the file's opening are set-up, like loading. A block holds as
// many rows as 16 MiB of float32 rows would (block_rows_for): the steps between hand-overs
// are those of the in-memory blocks before, and an image stored as uint8 costs a quarter of
// that memory.
RowBlocks prefetch_blocks(const EvalShard& es, std::int64_t step_rows) {
  const std::int64_t float_row_bytes = es.features_shape.sample_size * static_cast<std::int64_t>(sizeof(float)) +
                                       static_cast<std::int64_t>(sizeof(std::int32_t));
  const std::int64_t block_rows = block_rows_for(step_rows, float_row_bytes);
  if (es.features_in_memory) {
    const auto& s = es.shard;
    return RowBlocks(in_memory_blocks({ConstHostView(DType::UInt8, {s.rows, stored_row_bytes(es)}, es.features.data()),
                                       ConstHostView(DType::Int32, {s.rows},
                                                     reinterpret_cast<const std::byte*>(s.labels.data()))},
                                      block_rows),
                     kBlockPrefetchDepth);
  }
  // The first block one step: the devices start once a step's rows are read, not a whole
  // block's (a 10000-image test set read 5120 rows, a quarter of a small model's run, first).
  return RowBlocks(file_blocks(file_rows_of(es), block_rows, kBlockPrefetchDepth, step_rows), kBlockPrefetchDepth);
}

// Local counters, reduced once at the end (integers: exact); correct is the confusion
// matrix's.
struct Tally {
  explicit Tally(int classes) : confusion(classes) {}
  ConfusionMatrix confusion;
  std::int64_t real = 0, padded = 0, steps = 0;
  std::int64_t non_finite = 0;  // real rows whose scores held a NaN or an infinity (the predictors')
  std::map<std::int64_t, std::int64_t> shapes;
};

EvalResult finish(const Context& ctx, const EvalShard& shard, Tally& t, double seconds, double cpu_seconds,
                  std::int64_t dropped) {
  EvalResult r;
  std::int64_t sums[6] = {t.confusion.correct(), t.real, t.padded, dropped, shard.filtered, t.non_finite};
  runtime::allreduce_sum(ctx, std::span<std::int64_t>(sums, 6));
  r.correct = sums[0];
  r.total = sums[1];
  r.padded_rows = sums[2];
  r.dropped = sums[3];
  r.filtered_rows = sums[4];
  r.non_finite_rows = sums[5];
  t.confusion.sum_over_ranks(ctx);
  r.confusion = std::move(t.confusion);
  r.dataset_rows = shard.shard.global_rows;
  r.steps = t.steps;
  r.batch_shapes = t.shapes;
  r.examples_per_rank.resize(static_cast<size_t>(ctx.size()));
  runtime::allgather_bytes(ctx, &t.real, sizeof t.real, r.examples_per_rank.data());
  double s[2] = {seconds, cpu_seconds};
  runtime::allreduce_max(ctx, std::span<double>(s, 2));
  r.seconds = s[0];
  r.cpu_seconds = s[1];
  return r;
}

// The step plan of a strategy (step_plan.hpp). Collective for drop-remainder and for pad
// after --drop-label, whose step counts need every rank's shard size.
sharding::StepPlan plan_of(const Context& ctx, const EvalOptions& o, const EvalShard& es) {
  using sharding::BatchMode;
  const auto& s = es.shard;
  const sharding::BatchGeometry geometry{ctx.devices_per_rank(), o.per_device_batch};
  switch (o.strategy) {
    case EvalStrategy::KeepRemainder: return {BatchMode::KeepRemainder, s.rows, geometry};
    case EvalStrategy::InfinitePad: return {BatchMode::InfinitePad, s.rows, geometry};
    case EvalStrategy::DropRemainder: {
      // Whole steps of the smallest shard, so every rank runs the same number of steps
      // (SPMD); everything past them is dropped and reported.
      std::int64_t neg = -sharding::local_step_count(BatchMode::DropRemainder, s.rows, geometry);
      runtime::allreduce_max(ctx, std::span<std::int64_t>(&neg, 1));
      return {BatchMode::DropRemainder, s.rows, geometry, -neg};
    }
    case EvalStrategy::Pad:
    case EvalStrategy::PadMetrics: break;
  }
  std::int64_t steps = 0;
  if (o.drop_label) {
    // Filtered shards have sizes nobody knows in advance: count locally and make sure
    // every rank agrees, or stop (never deadlock).
    steps = sharding::local_step_count(BatchMode::PadWithMask, s.rows, geometry);
    sharding::require_equal_step_counts(ctx, steps, std::string("--strategy ") + to_string(o.strategy));
  } else {
    steps = sharding::pad_step_count(s.global_rows, ctx.size(), geometry);
  }
  return {BatchMode::PadWithMask, s.rows, geometry, steps, o.min_device_batch};
}

// The per-example outputs of a step, [d, b_dev] classes (and [d, b_dev, C] probabilities when
// recorded), reused from step to step: a fresh allocation per step costs more than the
// padding itself on a fast model.
struct StepOutputs {
  sharding::HostArray classes, probabilities;
};

// pad-metrics' in-step metrics: each device counts its correct and real rows over the mask,
// and the pairs are psum-ed over every device of every rank inside the step (flax's
// static_return); the running totals are what the step returns.
struct InStepMetrics {
  std::vector<std::int64_t> per_device;  // (correct, count) per device
  std::int64_t correct = 0, count = 0;   // summed over ranks, so far

  void count_device(int i, const sharding::Shards& sh, std::span<const std::int32_t> predicted) {
    const auto y = sh[1].at(i).data<std::int32_t>();
    const auto m = sh[2].at(i).data<std::uint8_t>();
    std::int64_t c = 0, n = 0;
    for (std::size_t r = 0; r < m.size(); ++r) {
      n += m[r];
      c += m[r] && predicted[r] == y[r];
    }
    per_device[2 * static_cast<size_t>(i)] = c;
    per_device[2 * static_cast<size_t>(i) + 1] = n;
  }
  void psum(const Context& ctx) {
    runtime::PerDevice<std::span<const std::int64_t>> pairs;
    for (std::size_t i = 0; i < per_device.size(); i += 2) pairs.emplace_back(per_device.data() + i, 2);
    const auto both = runtime::psum(ctx, pairs);
    correct += both[0];
    count += both[1];
  }
};

// One pass over the shard along `plan`: the one evaluation loop (eval_loop.hpp) around the
// devices' predictions. agreements off: the plain forward (no collective inside the loop).
EvalResult run_pass(const Context& ctx, const EvalOptions& o, const models::Classifier& model, const EvalShard& es,
                    const sharding::StepPlan& plan, bool agreements, PredictionRecorder* recorder,
                    const EvalProgress& progress) {
  const int d = ctx.devices_per_rank();
  const std::int64_t classes = model.classes();
  const bool in_step = agreements && o.strategy == EvalStrategy::PadMetrics;
  const data::FeatureDecoder decoder = feature_decoder_of(es);
  RowBlocks blocks = prefetch_blocks(es, plan.geometry().step_rows());
  const std::int64_t max_rows = std::max(o.per_device_batch, plan.min_device_batch());
  Devices dev = make_devices(ctx, model, max_rows, decoder, es.shard.sample_size);
  EvalLoopOptions lo;
  lo.columns = {{kFeatures, sharding::Batched::Padding::Unread}, {kLabels}};
  lo.with_mask = in_step;
  lo.step_phase = agreements ? "eval step" : nullptr;
  lo.stop_on_request = true;
  lo.agreements = agreements;
  lo.count_window = o.count_window;
  EvalLoop loop(d, lo);
  StepOutputs out;
  InStepMetrics metrics{std::vector<std::int64_t>(2 * static_cast<size_t>(d))};
  Tally t(model.classes());
  const Timer timer;
  loop.run(ctx, blocks, plan, [&](const EvalStep& step) {
    const sharding::Shards& sh = step.shards;
    const std::int64_t bdev = sh.device_batch();
    out.classes.reset_for_overwrite(DType::Int32, {d, bdev});  // each device writes its rows below
    if (recorder) out.probabilities.reset_for_overwrite(DType::Float32, {d, bdev, classes});
    ctx.pool().run([&](int i) {
      const auto predicted = out.classes.view().at(i).data<std::int32_t>();
      // Padding rows keep the step's shape but are never computed: their result is masked
      // out anyway (on CPU nothing is compiled per shape, so skipping them is free).
      const std::int64_t real = sh.real_rows(i);
      std::fill(predicted.begin() + real, predicted.end(), 0);
      float* p = nullptr;
      if (recorder) {
        const auto probs = out.probabilities.view().at(i).data<float>();
        std::fill(probs.begin() + real * classes, probs.end(), 0.0f);
        p = probs.data();
      }
      if (real > 0) dev.predict(i, sh[0].at(i).bytes(), real, predicted.data(), p);
      if (in_step) metrics.count_device(i, sh, predicted);
    });
    if (in_step) metrics.psum(ctx);
    t.shapes[bdev] += 1;
    t.padded += static_cast<std::int64_t>(d) * bdev - step.rows();
    ++t.steps;
    if (!step.readable) return;
    // The real rows, unpadded: the labels' first b rows are those of the predictions.
    loop.unpad(out.classes);
    if (recorder) loop.unpad(out.probabilities);
    const std::int32_t* predicted = out.classes.data<std::int32_t>().data();
    t.confusion.add(predicted, sh[1].data<std::int32_t>().data(), step.rows());
    if (recorder) recorder->record(step.first, step.rows(), predicted, out.probabilities.data<float>().data());
    t.real += step.rows();
    report_progress(progress, es, t.real, timer);
  });
  const double seconds = timer.wall_seconds(), cpu_seconds = timer.cpu_seconds();
  for (const auto& predictor : dev.predictors) t.non_finite += predictor->non_finite_rows();
  EvalResult r = finish(ctx, es, t, seconds, cpu_seconds, plan.dropped_rows());
  r.planned_steps = plan.steps().value_or(-1);
  r.stop_signal = loop.stop_signal();
  if (in_step && (metrics.count != r.total || metrics.correct != r.correct))  // the in-step psum is the result
    throw Error(runtime::rank_tag() + ": internal: in-step counts (correct " + std::to_string(metrics.correct) +
                ", total " + std::to_string(metrics.count) + ") differ from the host's (" + std::to_string(r.correct) +
                ", " + std::to_string(r.total) + ")");
  return r;
}
}  // namespace

EvalShard load_eval_shard(const Context& ctx, const EvalOptions& o, const models::Classifier& model) {
  const auto source = data::probe_feature_source(ctx, o.data, o.keys);
  const auto& shape = source.shape;
  model.check_sample_shape(shape.sample_shape, o.data);
  const auto range = sharding::split_for_process(shape.rows, ctx.rank(), ctx.size());
  EvalShard es;
  es.path = o.data;
  es.features_key = o.keys.features;
  es.features_shape = shape;
  es.sparse = source.sparse;
  if (source.sparse) {
    auto column = data::load_label_column(ctx, o.data, o.keys.labels, shape.rows, range.first, range.size,
                                          model.classes());
    auto& s = es.shard;
    s.labels = std::move(column.labels);
    s.classes = column.classes;
    s.class_counts = std::move(column.class_counts);
    s.warnings = std::move(column.warnings);
    s.sample_shape = shape.sample_shape;
    s.sample_size = shape.sample_size;
    s.global_rows = shape.rows;
    s.first_row = range.first;
    s.rows = range.size;
  } else {
    es.shard = data::load_shard(ctx, o.data, o.keys, range.first, range.size, model.classes(), o.input_scale,
                                data::FeatureForm::LeftInFile);
  }
  es.file_rows = es.shard.rows;
  if (o.drop_label) {
    auto& s = es.shard;
    es.file_labels = s.labels;
    std::int64_t kept = 0;
    for (std::int64_t i = 0; i < s.rows; ++i) {
      if (s.labels[static_cast<size_t>(i)] == *o.drop_label) continue;
      es.kept.push_back(i);
      s.labels[static_cast<size_t>(kept)] = s.labels[static_cast<size_t>(i)];
      ++kept;
    }
    es.filtered = s.rows - kept;
    s.rows = kept;
    s.labels.resize(static_cast<size_t>(kept));
  }
  return es;
}

EvalShard with_features_in_memory(const Context& ctx, const EvalShard& es) {
  EvalShard held = es;
  held.features_in_memory = true;
  const std::int64_t row_bytes = stored_row_bytes(es);
  // The pass's own producer, run here on the main thread (no prefetch thread reads HDF5
  // meanwhile): the same reads, compaction and checks, agreed over ranks.
  runtime::agree_on(ctx.comm(), [&] {
    held.features.resize(static_cast<std::size_t>(es.shard.rows * row_bytes));
    const BlockSource source = file_blocks(file_rows_of(es), block_rows_for(1, row_bytes), 1);  // 16 MiB reads
    while (const auto b = source.producer())
      std::copy_n(b->columns[kFeatures].bytes(), b->rows * row_bytes, held.features.data() + b->first * row_bytes);
  });
  return held;
}

void require_layout_fits(const Context& ctx, const EvalOptions& o) {
  if (o.strategy == EvalStrategy::KeepRemainder && ctx.total_devices() != 1)
    throw CollectiveError("--strategy keep-remainder needs exactly one device in total (this run has " +
                          std::to_string(ctx.size()) + " rank(s) x " + std::to_string(ctx.devices_per_rank()) +
                          " device(s)): its last batch has another size, which several devices cannot share "
                          "evenly and several ranks would reach at different steps. Use --strategy pad or infinite-pad.");
}

EvalResult run_eval(const Context& ctx, const EvalOptions& o, const models::Classifier& model, const EvalShard& shard,
                    PredictionRecorder* predictions, const EvalProgress& progress) {
  require_layout_fits(ctx, o);
  return run_pass(ctx, o, model, shard, plan_of(ctx, o, shard), true, predictions, progress);
}

EvalResult run_plain_forward(const Context& ctx, const EvalOptions& o, const models::Classifier& model,
                             const EvalShard& es) {
  // B rows per device, the last step shorter and unpadded; each rank its own steps.
  const sharding::StepPlan plan(sharding::BatchMode::PadWithMask, es.shard.rows, {ctx.devices_per_rank(), o.per_device_batch});
  return run_pass(ctx, o, model, es, plan, false, nullptr, {});
}

}  // namespace spmd::workloads
