#include "spmd/workloads/eval.hpp"

#include <algorithm>
#include <chrono>
#include <ctime>

#include "spmd/data/feature_decoder.hpp"
#include "spmd/runtime/agree.hpp"
#include "spmd/runtime/check.hpp"
#include "spmd/runtime/collectives.hpp"
#include "spmd/sharding/batching.hpp"
#include "spmd/sharding/pad_shard_unpad.hpp"
#include "spmd/sharding/split.hpp"
#include "spmd/sharding/step_sync.hpp"
#include "spmd/workloads/file_row_blocks.hpp"
#include "spmd/workloads/padded_eval.hpp"
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
// of its rows. Each device reads its real rows of a step straight from the block (they are
// contiguous there); only labels and masks go through padding, so a padded step copies a
// few integers, never feature rows.
enum EvalColumn : std::size_t { kFeatures = 0, kLabels = 1 };

data::FeatureDecoder feature_decoder_of(const EvalShard& es) {
  return data::FeatureDecoder(es.features_shape.features_type, es.shard.scale,
                              "'" + es.path + "': features dataset '" + es.features_key + "'");
}

// Per-device predictors, input and output buffers, made once for the run (probabilities only
// when they are recorded).
struct Devices {
  std::vector<std::unique_ptr<models::DevicePredictor>> predictors;
  std::vector<std::vector<std::int32_t>> predictions;
  std::vector<std::vector<float>> probabilities;
  std::vector<std::vector<float>> inputs;  // [max_rows, sample_size] each; empty when no host decode is needed
  std::vector<char> bytes_on_device;       // per device: its predictor takes the uint8 rows (decided once)
  const data::FeatureDecoder* decoder = nullptr;
  std::int64_t sample_size = 0;

  float* probabilities_of(int i) {
    auto& p = probabilities[static_cast<size_t>(i)];
    return p.empty() ? nullptr : p.data();
  }
  // Device i predicts block rows [row, row + n) into classes (and probs, or nullptr). The
  // rows go as they lie when stored as the models see them; as bytes to a model that decodes
  // them where it computes (a GPU: a quarter of the bytes cross PCIe); else decoded on the
  // device's thread into its buffer (each device converts its own rows).
  void predict(int i, const RowBlock& b, std::int64_t row, std::int64_t n, std::int32_t* classes, float* probs) {
    models::DevicePredictor& predictor = *predictors[static_cast<size_t>(i)];
    const std::byte* stored = b.columns[kFeatures].bytes() + row * b.columns[kFeatures].row_elements();
    if (decoder->in_place()) return predictor.predict(reinterpret_cast<const float*>(stored), n, classes, probs);
    if (bytes_on_device[static_cast<size_t>(i)])
      return predictor.predict_bytes(reinterpret_cast<const std::uint8_t*>(stored), n, *decoder->byte_table(), classes,
                                     probs);
    float* out = inputs[static_cast<size_t>(i)].data();
    decoder->decode(stored, n * sample_size, out);
    predictor.predict(out, n, classes, probs);
  }
};

Devices make_devices(const Context& ctx, const models::Classifier& model, std::int64_t max_rows, bool probabilities,
                     const data::FeatureDecoder& decoder, std::int64_t sample_size) {
  Devices d;
  const auto n = static_cast<size_t>(ctx.devices_per_rank());
  d.predictors.resize(n);
  d.predictions.resize(n);
  d.probabilities.resize(n);
  d.inputs.resize(n);
  d.bytes_on_device.assign(n, 0);
  d.decoder = &decoder;
  d.sample_size = sample_size;
  ctx.pool().run([&](int i) {
    const auto k = static_cast<size_t>(i);
    d.predictors[k] = model.make_predictor(ctx.devices()[k], max_rows);
    d.predictions[k].assign(static_cast<size_t>(max_rows), 0);
    if (probabilities) d.probabilities[k].assign(static_cast<size_t>(max_rows * model.classes()), 0.0f);
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
  return RowBlocks(file_blocks(file_rows_of(es), block_rows, kBlockPrefetchDepth), kBlockPrefetchDepth);
}

const std::int32_t* labels_at(const RowBlock& b, std::int64_t row) { return b.columns[kLabels].data<std::int32_t>().data() + row; }

// Local counters, reduced once at the end (integers: exact); correct is the confusion
// matrix's.
struct Tally {
  explicit Tally(int classes) : confusion(classes) {}
  ConfusionMatrix confusion;
  std::int64_t real = 0, padded = 0, steps = 0;
  std::map<std::int64_t, std::int64_t> shapes;
};

EvalResult finish(const Context& ctx, const EvalShard& shard, Tally& t, double seconds, double cpu_seconds,
                  std::int64_t dropped) {
  EvalResult r;
  std::int64_t sums[5] = {t.confusion.correct(), t.real, t.padded, dropped, shard.filtered};
  runtime::allreduce_sum(ctx, std::span<std::int64_t>(sums, 5));
  r.correct = sums[0];
  r.total = sums[1];
  r.padded_rows = sums[2];
  r.dropped = sums[3];
  r.filtered_rows = sums[4];
  t.confusion.sum_over_ranks(ctx);
  r.confusion = std::move(t.confusion);
  r.dataset_rows = shard.shard.global_rows;
  r.steps = t.steps;
  r.batch_shapes = t.shapes;
  std::vector<std::int64_t> mine{t.real};
  r.examples_per_rank.resize(static_cast<size_t>(ctx.size()));
  runtime::allgather_bytes(ctx, mine.data(), sizeof(std::int64_t), r.examples_per_rank.data());
  double s[2] = {seconds, cpu_seconds};
  runtime::allreduce_max(ctx, std::span<double>(s, 2));
  r.seconds = s[0];
  r.cpu_seconds = s[1];
  return r;
}

// keep-remainder, drop-remainder and infinite-pad: the batcher plans the steps (shapes,
// padding, the endless padding of infinite-pad) from sizes; the devices read their real rows
// from the blocks.
EvalResult run_batched(const Context& ctx, const EvalOptions& o, const models::Classifier& model, const EvalShard& es,
                       PredictionRecorder* recorder, const EvalProgress& progress) {
  const auto& s = es.shard;
  const int d = ctx.devices_per_rank();
  sharding::BatcherOptions bo;
  bo.geometry = {d, o.per_device_batch};
  std::int64_t dropped = 0;
  switch (o.strategy) {
    case EvalStrategy::KeepRemainder: bo.mode = sharding::BatchMode::KeepRemainder; break;
    case EvalStrategy::InfinitePad: bo.mode = sharding::BatchMode::InfinitePad; break;
    default: {
      // drop-remainder: whole steps of the smallest shard, so every rank runs the same
      // number of steps (SPMD); everything past them is dropped and reported.
      bo.mode = sharding::BatchMode::DropRemainder;
      break;
    }
  }
  sharding::ShardBatcher batcher(s.rows, {}, bo);
  std::int64_t steps_to_run = -1;
  if (o.strategy == EvalStrategy::DropRemainder) {
    std::int64_t local = sharding::local_step_count(bo.mode, s.rows, bo.geometry);
    std::int64_t neg = -local;
    runtime::allreduce_max(ctx, std::span<std::int64_t>(&neg, 1));
    steps_to_run = -neg;
    dropped = s.rows - steps_to_run * bo.geometry.step_rows();
  } else if (o.strategy == EvalStrategy::KeepRemainder) {
    steps_to_run = sharding::local_step_count(bo.mode, s.rows, bo.geometry);
  }
  const data::FeatureDecoder decoder = feature_decoder_of(es);
  RowBlocks blocks = prefetch_blocks(es, bo.geometry.step_rows());
  BlockReader reader(blocks, bo.geometry.step_rows());
  Devices dev = make_devices(ctx, model, o.per_device_batch, recorder != nullptr, decoder, s.sample_size);
  Tally t(model.classes());
  const Timer timer;
  std::optional<sharding::WindowedCountBarrier> barrier;  // infinite-pad's count barrier
  if (o.strategy == EvalStrategy::InfinitePad) barrier.emplace(ctx, o.count_window);
  const auto real_rows_of_step = [&](std::int64_t step) { return batcher.real_rows_of_step(step); };
  int stop = 0;
  for (std::int64_t step = 0;; ++step) {
    if (steps_to_run >= 0 && step >= steps_to_run) break;
    const sharding::Batch* b = batcher.next();
    if (!b) break;
    ctx.set_step_phase("eval step", step);
    if (barrier && barrier->count(step, real_rows_of_step).all_done()) break;
    // Every rank runs this step: a failed read elsewhere ends it here, and a signal stops it.
    if ((stop = reader.agree_at(ctx, step)) != 0) break;
    // nullptr: this rank's rows cannot be read. It keeps the steps (and so the collectives)
    // and computes nothing until the agreement ends every rank.
    if (const RowBlock* block = reader.rows(b->layout.shard_first, b->real_rows())) {
      const std::int64_t offset = b->layout.shard_first - block->first;
      ctx.pool().run([&](int i) {
        const auto& db = b->devices[static_cast<size_t>(i)];
        // Padding rows keep the step's shape but are never computed: their result is
        // masked out anyway (on CPU nothing is compiled per shape, so skipping them is free).
        if (db.real_rows == 0) return;
        const std::int64_t row = offset + b->layout.devices[static_cast<size_t>(i)].first;
        dev.predict(i, *block, row, db.real_rows, dev.predictions[static_cast<size_t>(i)].data(),
                    dev.probabilities_of(i));
      });
      for (int i = 0; i < d; ++i) {  // the real rows of each device, unpadded
        const std::int64_t real = b->devices[static_cast<size_t>(i)].real_rows;
        if (real == 0) continue;
        const std::int64_t first = b->layout.devices[static_cast<size_t>(i)].first;
        const std::int32_t* predicted = dev.predictions[static_cast<size_t>(i)].data();
        t.confusion.add(predicted, labels_at(*block, offset + first), real);
        if (recorder) recorder->record(b->layout.shard_first + first, real, predicted, dev.probabilities_of(i));
      }
    }
    // The shape device 0 runs: keep-remainder (one device in total) shows its short last batch.
    t.shapes[b->devices[0].rows] += 1;
    t.real += b->real_rows();
    t.padded += b->rows() - b->real_rows();
    ++t.steps;
    report_progress(progress, es, t.real, timer);
  }
  const double seconds = timer.wall_seconds(), cpu_seconds = timer.cpu_seconds();
  reader.agree(ctx);
  EvalResult r = finish(ctx, es, t, seconds, cpu_seconds, dropped);
  r.planned_steps = steps_to_run;
  r.stop_signal = stop;
  return r;
}

// pad and pad-metrics: the padded evaluation loop (pad_shard_unpad around the device step,
// min_device_batch = B by default).
EvalResult run_padded(const Context& ctx, const EvalOptions& o, const models::Classifier& model, const EvalShard& es,
                      PredictionRecorder* recorder, const EvalProgress& progress) {
  const auto& s = es.shard;
  const int d = ctx.devices_per_rank();
  const sharding::BatchGeometry geometry{d, o.per_device_batch};
  std::int64_t steps = 0;
  if (o.drop_label) {
    // Filtered shards have sizes nobody knows in advance: count locally and make sure
    // every rank agrees, or stop (never deadlock).
    steps = sharding::local_step_count(sharding::BatchMode::PadWithMask, s.rows, geometry);
    sharding::require_equal_step_counts(ctx, steps, std::string("--strategy ") + to_string(o.strategy));
  } else {
    steps = sharding::pad_step_count(s.global_rows, ctx.size(), geometry);
  }
  const std::int64_t min_device_batch = o.min_device_batch > 0 ? o.min_device_batch : o.per_device_batch;
  const data::FeatureDecoder decoder = feature_decoder_of(es);
  RowBlocks blocks = prefetch_blocks(es, geometry.step_rows());
  Devices dev = make_devices(ctx, model, std::max(o.per_device_batch, min_device_batch), false, decoder, s.sample_size);
  const bool in_step_metrics = o.strategy == EvalStrategy::PadMetrics;
  const std::int64_t classes = model.classes();

  struct Metrics {
    std::int64_t correct = 0, count = 0;
  };
  std::vector<std::int64_t> per_device(2 * static_cast<size_t>(d));  // pad-metrics: (correct, count) per device
  std::int64_t padded_rows_seen = 0;
  // The step's output arrays (classes; probabilities when recorded), handed back by the
  // loop after each step and reused: a fresh allocation per step costs more than the
  // padding itself on a fast model.
  sharding::HostArray spare_output, spare_probabilities;
  Metrics global;  // pad-metrics: already summed over ranks
  // The wrapped step: args = (metrics [static], labels, mask); per device predict;
  // pad-metrics also counts over the mask and psums inside (static_return).
  auto step_fn = [&](const sharding::ShardedArgs& a, const PaddedStep& at) -> std::vector<sharding::HostArray> {
    const auto& labels = a.arg(1).array();
    const auto& mask = a.arg(2).array();
    const std::int64_t bdev = a.device_batch();
    padded_rows_seen += static_cast<std::int64_t>(d) * bdev - a.batch();
    sharding::HostArray out = std::move(spare_output), probs = std::move(spare_probabilities);
    out.reset_for_overwrite(DType::Int32, {d, bdev});  // each device writes its rows below
    if (recorder) probs.reset_for_overwrite(DType::Float32, {d, bdev, classes});
    ctx.pool().run([&](int i) {
      auto pred = out.view().at(i).data<std::int32_t>();
      float* p = nullptr;
      // Rows past the call's real batch are padding: shaped, masked, not computed.
      const std::int64_t real = std::clamp<std::int64_t>(a.batch() - i * bdev, 0, bdev);
      std::fill(pred.begin() + real, pred.end(), 0);
      if (recorder) {
        auto device_probs = probs.view().at(i).data<float>();
        std::fill(device_probs.begin() + real * classes, device_probs.end(), 0.0f);
        p = device_probs.data();
      }
      if (real > 0)
        dev.predict(i, *at.block, at.offset() + i * bdev, real, pred.data(), p);
      if (in_step_metrics) {
        const auto y = labels.at(i).data<std::int32_t>();
        const auto m = mask.at(i).data<std::uint8_t>();
        std::int64_t correct = 0, count = 0;
        for (std::int64_t r = 0; r < bdev; ++r) {
          count += m[static_cast<size_t>(r)];
          correct += m[static_cast<size_t>(r)] && pred[static_cast<size_t>(r)] == y[static_cast<size_t>(r)];
        }
        per_device[2 * static_cast<size_t>(i)] = correct;
        per_device[2 * static_cast<size_t>(i) + 1] = count;
      }
    });
    if (!in_step_metrics) {  // pad_shard_unpad gathers and un-pads the per-example outputs
      std::vector<sharding::HostArray> outputs;
      outputs.push_back(std::move(out));
      if (recorder) outputs.push_back(std::move(probs));
      return outputs;
    }
    // pad-metrics returns the counts: the per-example outputs stay here, device-major, so
    // their first b rows are the step's real rows in order (what un-padding would give).
    spare_output = std::move(out);
    spare_probabilities = std::move(probs);
    runtime::PerDevice<std::span<const std::int64_t>> pairs;
    for (int i = 0; i < d; ++i) pairs.emplace_back(per_device.data() + 2 * i, 2);
    const auto both = runtime::psum(ctx, pairs);  // (correct, count) over every device of every rank
    const auto& prev = a.arg(0).get<Metrics>();
    sharding::HostArray m(DType::Int64, {2});
    m.data<std::int64_t>()[0] = prev.correct + both[0];
    m.data<std::int64_t>()[1] = prev.count + both[1];
    return {std::move(m)};
  };
  PaddedEvalOptions po;
  po.devices = d;
  po.step_rows = geometry.step_rows();
  po.min_device_batch = min_device_batch;
  po.batched_columns = {kLabels};
  po.with_mask = true;
  po.static_return = in_step_metrics;
  po.step_phase = "eval step";
  po.stop_on_request = true;
  PaddedEvalLoop loop(step_fn, po, {sharding::Arg::ref(global)});
  Tally t(model.classes());
  const Timer timer;
  loop.run(ctx, blocks, s.rows, steps, [&](const PaddedStep& step, std::vector<sharding::HostArray>& out) {
    if (in_step_metrics) {
      global.correct = out[0].data<std::int64_t>()[0];
      global.count = out[0].data<std::int64_t>()[1];
    } else {
      spare_output = std::move(out[0]);
      if (recorder) spare_probabilities = std::move(out[1]);
    }
    const std::int32_t* predicted = spare_output.data<std::int32_t>().data();
    t.confusion.add(predicted, labels_at(*step.block, step.offset()), step.rows);
    if (recorder) recorder->record(step.first, step.rows, predicted, spare_probabilities.data<float>().data());
    t.real += step.rows;
    t.shapes[step.device_batch] += 1;
    ++t.steps;
    report_progress(progress, es, t.real, timer);
  });
  t.padded = padded_rows_seen;
  const double seconds = timer.wall_seconds(), cpu_seconds = timer.cpu_seconds();
  EvalResult r = finish(ctx, es, t, seconds, cpu_seconds, 0);
  r.planned_steps = steps;
  r.stop_signal = loop.stop_signal();
  if (in_step_metrics) {
    // The in-step psum is the result; the host-side tally must agree with it.
    if (global.count != r.total || global.correct != r.correct)
      throw Error(runtime::rank_tag() + ": internal: in-step counts (correct " + std::to_string(global.correct) +
                  ", total " + std::to_string(global.count) + ") differ from the host's (" + std::to_string(r.correct) +
                  ", " + std::to_string(r.total) + ")");
  }
  return r;
}

}  // namespace

EvalShard load_eval_shard(const Context& ctx, const EvalOptions& o, const models::Classifier& model) {
  const auto shape = data::probe_shape(ctx, o.data, o.keys);
  model.check_sample_shape(shape.sample_shape, o.data);
  const auto range = sharding::split_for_process(shape.rows, ctx.rank(), ctx.size());
  EvalShard es;
  es.path = o.data;
  es.features_key = o.keys.features;
  es.features_shape = shape;
  es.shard = data::load_shard(ctx, o.data, o.keys, range.first, range.size, model.classes(), o.input_scale,
                              data::FeatureForm::LeftInFile);
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
  if (o.strategy == EvalStrategy::Pad || o.strategy == EvalStrategy::PadMetrics)
    return run_padded(ctx, o, model, shard, predictions, progress);
  return run_batched(ctx, o, model, shard, predictions, progress);
}

EvalResult run_plain_forward(const Context& ctx, const EvalOptions& o, const models::Classifier& model,
                             const EvalShard& es) {
  const auto& s = es.shard;
  const int d = ctx.devices_per_rank();
  const std::int64_t step_rows = static_cast<std::int64_t>(d) * o.per_device_batch;
  const data::FeatureDecoder decoder = feature_decoder_of(es);
  RowBlocks blocks = prefetch_blocks(es, step_rows);
  BlockReader reader(blocks, step_rows);
  Devices dev = make_devices(ctx, model, o.per_device_batch, false, decoder, s.sample_size);
  Tally t(model.classes());
  const Timer timer;
  for (std::int64_t first = 0; first < s.rows; first += step_rows) {
    const RowBlock* block = reader.rows(first, std::min(step_rows, s.rows - first));
    if (!block) break;  // this rank's rows cannot be read: agreed below
    const auto rows_of = [&](int i) {
      const std::int64_t lo = std::min(s.rows, first + i * o.per_device_batch);
      return std::pair{lo, std::min(o.per_device_batch, s.rows - lo)};
    };
    ctx.pool().run([&](int i) {
      const auto [lo, n] = rows_of(i);
      if (n <= 0) return;
      dev.predict(i, *block, lo - block->first, n, dev.predictions[static_cast<size_t>(i)].data(), nullptr);
    });
    for (int i = 0; i < d; ++i) {  // counted as the evaluation loops count
      const auto [lo, n] = rows_of(i);
      if (n > 0)
        t.confusion.add(dev.predictions[static_cast<size_t>(i)].data(), labels_at(*block, lo - block->first), n);
    }
    ++t.steps;
  }
  const double seconds = timer.wall_seconds(), cpu_seconds = timer.cpu_seconds();
  t.real = s.rows;
  // Ranks may run different numbers of steps here: there is no collective inside the loop,
  // and the one agreement on failed reads comes after it.
  reader.agree(ctx);
  return finish(ctx, es, t, seconds, cpu_seconds, 0);
}

}  // namespace spmd::workloads
