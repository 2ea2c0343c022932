#include "spmd/workloads/ensemble.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>

#include "spmd/data/feature_decoder.hpp"
#include "spmd/data/file_identity.hpp"
#include "spmd/data/h5_file.hpp"
#include "spmd/models/cnn_init.hpp"
#include "spmd/models/cnn_params.hpp"
#include "spmd/runtime/agree.hpp"
#include "spmd/runtime/collectives.hpp"
#include "spmd/runtime/error.hpp"
#include "spmd/runtime/stop_request.hpp"
#include "spmd/workloads/ensemble_trainer.hpp"
#include "spmd/workloads/memory_estimate.hpp"
#include "spmd/workloads/report.hpp"

namespace spmd::workloads {

namespace {

using Clock = std::chrono::steady_clock;

void require_images(const models::CnnConfig& model, const data::DatasetShape& s, const std::string& path,
                    const std::string& key) {
  if (!model.accepts_sample_shape(s.sample_shape))
    throw CollectiveError("'" + path + "' dataset '" + key + "': the CNN needs images of " + model.image_text() +
                          ", got samples of shape " + data::format_shape(s.sample_shape));
}

// The architecture of a run: `requested` with its data-given fields (0) filled from the
// training images' sample shape, validated. Throws spmd::CollectiveError naming the file,
// the dataset and the field (channels-first images are refused with the transpose to apply).
models::CnnConfig model_for_images(models::CnnConfig requested, const std::vector<std::int64_t>& shape,
                                   const std::string& path, const std::string& key) {
  const std::string where = "'" + path + "' dataset '" + key + "'";
  const auto shape_text = [&] {
    std::string t = "[N";
    for (auto e : shape) t += ", " + std::to_string(e);
    return t + "]";
  };
  if (shape.size() != 2 && shape.size() != 3)
    throw CollectiveError(where + " has shape " + shape_text() + "; the CNN takes images [N, H, W, C] or [N, H, W]");
  // [N, C, H, W] (PyTorch's layout) shows as few "rows" and many "channels".
  if (shape.size() == 3 && shape[0] <= 4 && shape[2] > 4)
    throw CollectiveError(where + " has shape " + shape_text() + ", which looks channels-first [N, C, H, W]; spmd takes "
                          "channels-last images [N, H, W, C] (as Flax and TensorFlow): store x.transpose(0, 2, 3, 1) "
                          "(numpy) instead");
  const auto fill = [&](int& field, std::int64_t value) {
    if (field == 0) field = static_cast<int>(std::min<std::int64_t>(value, std::numeric_limits<int>::max()));
  };
  fill(requested.height, shape[0]);
  fill(requested.width, shape[1]);
  fill(requested.channels, shape.size() == 3 ? shape[2] : 1);
  try {
    requested.validate();
  } catch (const Error& e) {
    throw CollectiveError(where + " (samples " + shape_text() + "): " + e.what());
  }
  return requested;
}

// Every member trains on the same batches, so every rank holds the whole training set (and
// evaluates the whole test set). Both stay as the file stores them (uint8 images: a byte a
// pixel, a quarter of float32); batches are decoded as they are made, with the loader's own
// conversion (data/feature_decoder.hpp), so the members see the bits a float32 load gives.
struct EnsembleData {
  data::LoadedShard train, test;  // FeatureForm::Stored
  std::int64_t train_dataset_rows = 0, test_dataset_rows = 0;  // N in each file (the limits aside)
  std::int64_t steps_per_epoch = 0;
};

// Loads both sets and completes o.model from them (image shape; classes when 0).
EnsembleData load_data(const runtime::Context& ctx, EnsembleOptions& o) {
  const auto train_shape = data::probe_shape(ctx, o.train, o.keys);
  const int requested_classes = o.model.classes;
  if (requested_classes == 0) o.model.classes = 2;  // a placeholder for validation; set from the labels below
  o.model = model_for_images(o.model, train_shape.sample_shape, o.train, o.keys.features);
  o.model.classes = requested_classes;
  require_images(o.model, train_shape, o.train, o.keys.features);
  const auto test_shape = data::probe_shape(ctx, o.test, o.test_keys);
  require_images(o.model, test_shape, o.test, o.test_keys.features);
  const std::int64_t n_train = o.train_limit > 0 ? std::min(o.train_limit, train_shape.rows) : train_shape.rows;
  if (n_train < o.batch_size)
    throw CollectiveError("--train-limit/--train: " + std::to_string(n_train) + " training examples are fewer than one batch of " +
                          std::to_string(o.batch_size));
  const std::int64_t n_test = o.test_limit > 0 ? std::min(o.test_limit, test_shape.rows) : test_shape.rows;
  // A test batch beyond the test set is padding only: one step either way.
  o.eval_batch = static_cast<int>(std::clamp<std::int64_t>(n_test, 1, o.eval_batch));
  models::CnnConfig sized = o.model;
  sized.classes = std::max(2, sized.classes);  // inferred classes: at least 2 (checked after loading)
  require_memory_fits(ctx,
                      ensemble_memory(train_shape, n_train, test_shape, n_test,
                                      static_cast<double>(models::CnnLayout(sized).param_count()),
                                      ctx.devices_per_rank(), o.batch_size, o.eval_batch),
                      "every rank holds both sets whole: lower --train-limit / --test-limit, --batch-size or "
                      "--eval-batch");
  ctx.set_phase("ensemble: loading data");
  EnsembleData d;
  d.train =
      data::load_shard(ctx, o.train, o.keys, 0, n_train, o.model.classes, o.input_scale, data::FeatureForm::Stored);
  if (o.model.classes == 0) {
    o.model.classes = d.train.classes;
    if (o.model.classes < 2)
      throw CollectiveError("'" + o.train + "': the labels of the training set hold " + std::to_string(o.model.classes) +
                            " class(es); a classifier needs at least 2 (set --classes)");
  }
  d.test =
      data::load_shard(ctx, o.test, o.test_keys, 0, n_test, o.model.classes, o.input_scale, data::FeatureForm::Stored);
  d.train_dataset_rows = train_shape.rows;
  d.test_dataset_rows = test_shape.rows;
  d.steps_per_epoch = n_train / o.batch_size;
  return d;
}

// The batch of one step: rows perm[step*B .. (step+1)*B) of the training set, side by side,
// decoded to float32, or kept as their bytes for members that decode them (a GPU: a quarter
// of the bytes to copy and send). Allocated once, refilled every step.
struct TrainBatch {
  std::int64_t pixels;  // values per image
  data::FeatureDecoder decoder;
  bool keep_bytes;
  std::vector<float> images;
  std::vector<std::uint8_t> bytes;
  std::vector<std::int32_t> labels;
  TrainBatch(int B, std::int64_t pixels_per_image, data::FeatureDecoder d, const EnsembleTrainer& trainer)
      : pixels(pixels_per_image),
        decoder(std::move(d)),
        keep_bytes(trainer.takes_bytes(decoder)),
        images(keep_bytes ? 0 : static_cast<size_t>(B * pixels_per_image)),
        bytes(keep_bytes ? static_cast<size_t>(B * pixels_per_image) : 0),
        labels(static_cast<size_t>(B)) {}
  void fill(const data::LoadedShard& train, const std::vector<std::int64_t>& perm, std::int64_t step) {
    const auto B = static_cast<std::int64_t>(labels.size());
    const auto row_bytes = pixels * static_cast<std::int64_t>(decoder.element_bytes());
    for (std::int64_t j = 0; j < B; ++j) {
      const std::int64_t idx = perm[static_cast<size_t>(step * B + j)];
      const std::byte* row = train.stored.data() + idx * row_bytes;
      if (keep_bytes) std::memcpy(bytes.data() + j * pixels, row, static_cast<size_t>(row_bytes));
      else decoder.decode(row, pixels, images.data() + j * pixels);
      labels[static_cast<size_t>(j)] = train.labels[static_cast<size_t>(idx)];
    }
  }
  TrainStepResult step(EnsembleTrainer& trainer) const {
    return keep_bytes ? trainer.step_bytes(bytes.data(), *decoder.byte_table(), labels.data())
                      : trainer.step(images.data(), labels.data());
  }
};

// This process's training throughput (the run's, not the epochs').
struct Throughput {
  double seconds = 0;
  std::int64_t images = 0;
  double per_second() const { return static_cast<double>(images) / std::max(seconds, 1e-9); }
};

// The steps of epoch `epoch` from state.step to its end. Returns the signal of a stop
// agreed after a step (runtime/stop_request.hpp; checked after every step, so every rank
// stops after the same one), 0 at the epoch's end: the state holds the position reached.
int train_epoch(const runtime::Context& ctx, const EnsembleOptions& o, EnsembleTrainer& trainer, const EnsembleData& data,
                 int epoch, CheckpointState& state, Throughput& process, const EnsembleEvents& events) {
  const auto perm = models::epoch_permutation(o.seed, epoch, data.train.rows);
  TrainBatch batch(o.batch_size, o.model.input_size(),
                   data::FeatureDecoder(data.train.stored_type, data.train.scale,
                                        "'" + o.train + "': features dataset '" + o.keys.features + "'"),
                   trainer);
  for (std::int64_t step = state.step; step < data.steps_per_epoch; ++step) {
    ctx.set_phase("ensemble epoch " + std::to_string(epoch) + " step " + std::to_string(step));
    const auto t0 = Clock::now();
    batch.fill(data.train, perm, step);
    const TrainStepResult r = batch.step(trainer);
    const int stop = runtime::agreed_stop_signal(ctx);
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    state.train_loss_sum += r.loss / trainer.members();
    state.train_correct += r.correct;
    state.train_seen += o.batch_size;
    state.train_seconds += dt;
    state.step = step + 1;
    process.seconds += dt;
    process.images += o.batch_size;
    if (events.progress)
      events.progress(epoch, step + 1, data.steps_per_epoch, state.train_seen / std::max(state.train_seconds, 1e-9));
    if (!std::isfinite(r.loss))
      throw CollectiveError("ensemble: the training loss became non-finite at epoch " + std::to_string(epoch) + " step " +
                            std::to_string(step) + " (learning rate " + std::to_string(o.sgd.learning_rate) + " too large?)");
    if (stop) return stop;
  }
  return 0;
}

// The epoch's metrics: its training sums, and the test pass. Collective (the slowest
// rank's time is the epoch's).
EpochMetrics epoch_metrics(const runtime::Context& ctx, int epoch, const CheckpointState& state, std::int64_t steps_per_epoch,
                           const TestResult& test) {
  EpochMetrics e;
  e.epoch = epoch;
  e.train_loss = state.train_loss_sum / static_cast<double>(steps_per_epoch);
  e.train_accuracy = static_cast<double>(state.train_correct) / static_cast<double>(state.train_seen);
  e.test_loss = test.loss / static_cast<double>(test.rows);
  e.test_accuracy = static_cast<double>(test.correct) / static_cast<double>(test.rows);
  for (auto c : test.member_correct) e.member_test_accuracy.push_back(static_cast<double>(c) / static_cast<double>(test.rows));
  // Wall-clock figures differ between runs; everything else above is bitwise reproducible.
  double slowest = state.train_seconds;
  runtime::allreduce_max(ctx, std::span<double>(&slowest, 1));
  e.seconds = slowest;
  e.images_per_second = static_cast<double>(state.train_seen) / std::max(slowest, 1e-9);
  return e;
}

// Parameters grown past what float32's forward can carry in the epoch's last steps (the
// next step's loss would say so), or a test row of huge values, give NaN or infinite
// probabilities: the run stops at the test pass, before such parameters reach the checkpoint
// or the metrics hold a NaN.
void require_finite_test_outputs(const EnsembleOptions& o, int epoch, const TestResult& test) {
  std::string members;
  std::int64_t rows = 0;
  for (size_t g = 0; g < test.member_non_finite.size(); ++g) {
    if (test.member_non_finite[g] == 0) continue;
    members += (members.empty() ? "" : ", ") + std::to_string(g);
    rows = std::max(rows, test.member_non_finite[g]);
  }
  if (members.empty()) return;
  throw CollectiveError("ensemble: member(s) " + members + " gave non-finite probabilities on " + std::to_string(rows) +
                        " of " + std::to_string(test.rows) + " test rows after epoch " + std::to_string(epoch) +
                        ": their outputs overflow float32 (parameters grown too large: learning rate " +
                        format("%g", o.sgd.learning_rate) + "; or inputs too large: see --input-scale)" +
                        (o.checkpoint.empty() ? "" : "; '" + o.checkpoint + "' was not updated for this epoch"));
}

// After an epoch: its metrics join the history, the running sums start again.
void close_epoch(const EpochMetrics& e, CheckpointState& state, EnsembleResult& result) {
  result.epochs.push_back(e);
  state.history.push_back(e);
  state.epochs_done = e.epoch;
  state.step = 0;
  state.train_loss_sum = 0;
  state.train_correct = 0;
  state.train_seen = 0;
  state.train_seconds = 0;
}

// What the training data is, by content: the bytes the run trains on (features as stored,
// labels, sample shape), hashed on every rank alike (every rank holds the whole set). A
// checkpoint records it, so a resume on another file of the same name and size is refused.
std::string training_fingerprint(const data::LoadedShard& train) {
  std::uint64_t h = runtime::kStableHashStart;
  h = runtime::stable_hash(train.sample_shape.data(), train.sample_shape.size() * sizeof(std::int64_t), h);
  h = runtime::stable_hash(train.stored.data(), train.stored.size(), h);
  h = runtime::stable_hash(train.labels.data(), train.labels.size() * sizeof(std::int32_t), h);
  return format("%016llx", static_cast<unsigned long long>(h));
}
}  // namespace

EnsembleResult run_ensemble(const runtime::Context& ctx, const EnsembleOptions& requested, const EnsembleEvents& events) {
  optim::validate(requested.sgd);
  EnsembleOptions o = requested;
  const EnsembleData data = load_data(ctx, o);
  EnsembleTrainer trainer(ctx, o);
  // A checkpoint is written after every epoch: room for it is checked now, not after the
  // first epoch's work.
  if (!o.checkpoint.empty()) require_checkpoint_space(ctx, o.checkpoint, trainer.members(), o.model, o.epochs);
  EnsembleResult result;
  result.model = o.model;
  result.train_examples = data.train.rows;
  result.test_examples = data.test.rows;
  result.train_dataset_rows = data.train_dataset_rows;
  result.test_dataset_rows = data.test_dataset_rows;
  result.members = trainer.members();
  CheckpointState state = trainer.fresh_state();
  const std::string fingerprint = training_fingerprint(data.train);
  if (o.resume) {
    state = trainer.resume();
    if (!state.train_fingerprint.empty() && state.train_fingerprint != fingerprint)
      throw CollectiveError("checkpoint '" + o.checkpoint + "' was trained on other data: the training set read from '" +
                            o.train + "' has fingerprint " + fingerprint + ", the checkpoint's was " +
                            state.train_fingerprint + " (the same name and size, other contents). Resume on the data "
                            "it was trained on, or start a new checkpoint.");
    result.epochs = state.history.get<std::vector<EpochMetrics>>();
    result.resumed_from_epoch = state.epochs_done;
    result.resumed_from_step = state.step;
  }
  state.train_fingerprint = fingerprint;
  result.warnings = data.train.warnings;
  if (events.start) events.start(result);
  Throughput process;
  for (int epoch = state.epochs_done + 1; epoch <= o.epochs; ++epoch) {
    if (const int stop = train_epoch(ctx, o, trainer, data, epoch, state, process, events)) {
      trainer.save(state);
      result.interrupted = true;
      result.stop_signal = stop;
      result.stopped_epoch = epoch;
      result.stopped_step = state.step;
      result.steps_per_epoch = data.steps_per_epoch;
      break;
    }
    ctx.set_phase("ensemble epoch " + std::to_string(epoch) + " test evaluation");
    const TestResult test = trainer.evaluate(data.test);
    require_finite_test_outputs(o, epoch, test);
    const EpochMetrics e = epoch_metrics(ctx, epoch, state, data.steps_per_epoch, test);
    close_epoch(e, state, result);
    trainer.save(state);
    if (events.epoch) events.epoch(e);
  }
  result.images_per_second = process.per_second();
  result.params_digest = trainer.params_digest();
  return result;
}

}  // namespace spmd::workloads
