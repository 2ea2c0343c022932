#include "spmd/workloads/ensemble.hpp"

#include <chrono>
#include <cmath>
#include <filesystem>

#include "spmd/models/device_models.hpp"
#include "spmd/models/cnn_init.hpp"
#include "spmd/runtime/agree.hpp"
#include "spmd/runtime/collectives.hpp"
#include "spmd/runtime/error.hpp"
#include "spmd/workloads/checkpoint.hpp"
#include "spmd/workloads/report.hpp"

namespace spmd::workloads {

namespace {

using Clock = std::chrono::steady_clock;
// The default geometry; a command-line choice of another is for a later option.
const models::CnnConfig kConfig = models::CnnConfig::seed_default();
const int kC = kConfig.classes;
const int kPixels = static_cast<int>(kConfig.input_size());

void require_images(const data::DatasetShape& s, const std::string& path, const std::string& key) {
  if (!kConfig.accepts_sample_shape(s.sample_shape))
    throw CollectiveError("'" + path + "' dataset '" + key + "': the CNN needs images of " + kConfig.image_text() +
                          ", got samples of shape " +
                          [&] {
                            std::string t = "[";
                            for (size_t i = 0; i < s.sample_shape.size(); ++i)
                              t += (i ? ", " : "") + std::to_string(s.sample_shape[i]);
                            return t + "]";
                          }());
}

int argmax(const double* p) {
  int best = 0;
  for (int c = 1; c < kC; ++c)
    if (p[c] > p[best]) best = c;
  return best;
}

// The members' contributions of one batch, gathered in global member order, summed in
// that order: [members][stride] floats -> per-row sums in double.
struct EnsembleSum {
  std::vector<double> probs;  // [rows][kC], the sum over members (divide by members for the mean)
};

EnsembleSum sum_members(const std::vector<float>& gathered, int members, std::size_t stride, std::size_t offset,
                        std::int64_t rows) {
  EnsembleSum s;
  s.probs.assign(static_cast<size_t>(rows) * kC, 0.0);
  for (int g = 0; g < members; ++g) {
    const float* p = gathered.data() + static_cast<size_t>(g) * stride + offset;
    for (std::int64_t i = 0; i < rows * kC; ++i) s.probs[static_cast<size_t>(i)] += p[i];
  }
  return s;
}

std::uint64_t digest(const runtime::Context& ctx, const std::vector<models::CnnParams>& params) {
  std::vector<std::int64_t> local;
  for (const auto& p : params) {
    std::string bytes(reinterpret_cast<const char*>(p.data()), p.size() * sizeof(float));
    local.push_back(static_cast<std::int64_t>(runtime::stable_hash(bytes)));
  }
  runtime::PerDevice<std::span<const std::int64_t>> spans;
  for (auto& v : local) spans.emplace_back(&v, 1);
  const auto all = runtime::all_gather(ctx, spans);
  std::string combined(reinterpret_cast<const char*>(all.data()), all.size() * sizeof(std::int64_t));
  return runtime::stable_hash(combined);
}

nlohmann::json epoch_json(const EpochMetrics& e) {
  return {{"epoch", e.epoch},           {"train_loss", e.train_loss},   {"train_accuracy", e.train_accuracy},
          {"test_loss", e.test_loss},   {"test_accuracy", e.test_accuracy}, {"member_test_accuracy", e.member_test_accuracy},
          {"seconds", e.seconds},       {"images_per_second", e.images_per_second}};
}

EpochMetrics epoch_from_json(const nlohmann::json& j) {
  EpochMetrics e;
  e.epoch = j.at("epoch");
  e.train_loss = j.at("train_loss");
  e.train_accuracy = j.at("train_accuracy");
  e.test_loss = j.at("test_loss");
  e.test_accuracy = j.at("test_accuracy");
  e.member_test_accuracy = j.at("member_test_accuracy").get<std::vector<double>>();
  e.seconds = j.at("seconds");
  e.images_per_second = j.at("images_per_second");
  return e;
}

}  // namespace

std::atomic<int>& ensemble_stop_request() {
  static std::atomic<int> stop{0};
  return stop;
}

EnsembleResult run_ensemble(const runtime::Context& ctx, const EnsembleOptions& o, const EpochCallback& on_epoch,
                            const ProgressCallback& on_progress) {
  optim::validate(o.sgd);
  const int d = ctx.devices_per_rank();
  const int M = ctx.total_devices();
  const int B = o.batch_size;
  EnsembleResult result;
  result.members = M;

  // Every member trains on the same batches, so every rank holds the whole training set.
  const auto train_shape = data::probe_shape(ctx, o.train, o.keys);
  require_images(train_shape, o.train, o.keys.features);
  const auto test_shape = data::probe_shape(ctx, o.test, o.keys);
  require_images(test_shape, o.test, o.keys.features);
  const std::int64_t n_train = o.train_limit > 0 ? std::min(o.train_limit, train_shape.rows) : train_shape.rows;
  if (n_train < B)
    throw CollectiveError("--train-limit/--train: " + std::to_string(n_train) + " training examples are fewer than one batch of " +
                          std::to_string(B));
  ctx.set_phase("ensemble: loading data");
  const auto train = data::load_shard(ctx, o.train, o.keys, 0, n_train, kC);
  const std::int64_t n_test = o.test_limit > 0 ? std::min(o.test_limit, test_shape.rows) : test_shape.rows;
  const auto test = data::load_shard(ctx, o.test, o.keys, 0, n_test, kC);
  const std::int64_t steps_per_epoch = n_train / B;

  // Host copies of the members' state: initialisation, checkpoints, digests. Training
  // itself runs on the members' devices.
  const models::CnnParams zero_state(kConfig);
  std::vector<models::CnnParams> params(static_cast<size_t>(d), zero_state), momentum(static_cast<size_t>(d), zero_state);
  std::vector<std::unique_ptr<models::CnnMember>> member(static_cast<size_t>(d));
  ctx.pool().run([&](int i) {
    member[static_cast<size_t>(i)] =
        models::make_cnn_member(ctx.devices()[static_cast<size_t>(i)], kConfig, std::max(B, o.eval_batch), B);
    models::cnn_init(params[static_cast<size_t>(i)], models::ensemble_member_key(o.seed, ctx.global_device(i), M));
    momentum[static_cast<size_t>(i)].set_zero();
  });
  auto upload = [&] {
    ctx.pool().run([&](int i) { member[static_cast<size_t>(i)]->set_state(params[static_cast<size_t>(i)], momentum[static_cast<size_t>(i)]); });
  };
  auto download = [&] {
    ctx.pool().run([&](int i) { member[static_cast<size_t>(i)]->get_state(params[static_cast<size_t>(i)], momentum[static_cast<size_t>(i)]); });
  };

  CheckpointState state;
  state.members = M;
  state.seed = o.seed;
  state.options = o.defining_options;
  nlohmann::json history = nlohmann::json::array();
  if (o.resume) {
    state = read_checkpoint(ctx, o.checkpoint, o.defining_options, params, momentum);
    history = nlohmann::json::parse(state.history.empty() ? "[]" : state.history);
    for (const auto& e : history) result.epochs.push_back(epoch_from_json(e));
    result.resumed_from_epoch = state.epochs_done;
    result.resumed_from_step = state.step;
  }
  upload();
  auto save = [&] {
    if (o.checkpoint.empty()) return;
    ctx.set_phase("ensemble: writing checkpoint");
    state.history = history.dump();
    download();
    write_checkpoint(ctx, o.checkpoint, state, params, momentum);
  };

  // Buffers allocated once and reused every step.
  std::vector<float> batch_images(static_cast<size_t>(B) * kPixels);
  std::vector<std::int32_t> batch_labels(static_cast<size_t>(B));
  const std::size_t train_stride = 2 + static_cast<size_t>(B) * kC;  // [stop flag, loss, probs]
  std::vector<std::vector<float>> contrib(static_cast<size_t>(d), std::vector<float>(train_stride));
  const int E = o.eval_batch;
  const std::size_t test_stride = 1 + static_cast<size_t>(E) * kC;  // [correct count, probs]
  std::vector<std::vector<float>> test_contrib(static_cast<size_t>(d), std::vector<float>(test_stride));
  std::vector<float> test_images(static_cast<size_t>(E) * kPixels);
  std::vector<std::int32_t> test_labels(static_cast<size_t>(E));
  std::vector<std::int64_t> member_correct_local(static_cast<size_t>(d));

  double process_train_seconds = 0;
  std::int64_t process_train_images = 0;
  for (int epoch = state.epochs_done + 1; epoch <= o.epochs; ++epoch) {
    const auto perm = models::epoch_permutation(o.seed, epoch, n_train);
    for (std::int64_t step = state.step; step < steps_per_epoch; ++step) {
      ctx.set_phase("ensemble epoch " + std::to_string(epoch) + " step " + std::to_string(step));
      const auto t0 = Clock::now();
      for (int j = 0; j < B; ++j) {
        const std::int64_t idx = perm[static_cast<size_t>(step * B + j)];
        std::copy_n(train.features.data() + idx * kPixels, kPixels, batch_images.data() + static_cast<size_t>(j) * kPixels);
        batch_labels[static_cast<size_t>(j)] = train.labels[static_cast<size_t>(idx)];
      }
      const float stop = ensemble_stop_request().load() ? 1.0f : 0.0f;
      ctx.pool().run([&](int i) {
        auto& c = contrib[static_cast<size_t>(i)];
        c[0] = stop;
        c[1] = member[static_cast<size_t>(i)]->train_step(batch_images.data(), batch_labels.data(), B, o.sgd, c.data() + 2);
      });
      runtime::PerDevice<std::span<const float>> spans;
      for (const auto& c : contrib) spans.emplace_back(c);
      const auto all = runtime::all_gather(ctx, spans);
      bool any_stop = false;
      double loss = 0;
      for (int g = 0; g < M; ++g) {
        any_stop |= all[static_cast<size_t>(g) * train_stride] != 0.0f;
        loss += all[static_cast<size_t>(g) * train_stride + 1];
      }
      const auto sum = sum_members(all, M, train_stride, 2, B);
      std::int64_t correct = 0;
      for (int j = 0; j < B; ++j) correct += argmax(sum.probs.data() + static_cast<size_t>(j) * kC) == batch_labels[static_cast<size_t>(j)];
      const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
      state.train_loss_sum += loss / M;
      state.train_correct += correct;
      state.train_seen += B;
      state.train_seconds += dt;
      state.step = step + 1;
      process_train_seconds += dt;
      process_train_images += B;
      if (on_progress) on_progress(epoch, step + 1, steps_per_epoch, state.train_seen / std::max(state.train_seconds, 1e-9));
      if (!std::isfinite(loss))
        throw CollectiveError("ensemble: the training loss became non-finite at epoch " + std::to_string(epoch) + " step " +
                              std::to_string(step) + " (learning rate " + std::to_string(o.sgd.learning_rate) + " too large?)");
      if (any_stop) {
        state.epochs_done = epoch - 1;
        save();
        result.interrupted = true;
        result.images_per_second = process_train_images / std::max(process_train_seconds, 1e-9);
        download();
        result.params_digest = digest(ctx, params);
        return result;
      }
    }

    // The ensemble on the whole test set: every member sees every test example, in batches
    // of E rows; the last one padded with zero rows that the mask leaves out.
    ctx.set_phase("ensemble epoch " + std::to_string(epoch) + " test evaluation");
    double test_loss = 0;
    std::int64_t test_correct = 0;
    std::fill(member_correct_local.begin(), member_correct_local.end(), 0);
    for (std::int64_t first = 0; first < test.rows; first += E) {
      const std::int64_t real = std::min<std::int64_t>(E, test.rows - first);
      std::copy_n(test.features.data() + first * kPixels, real * kPixels, test_images.data());
      std::fill(test_images.begin() + real * kPixels, test_images.end(), 0.0f);
      std::copy_n(test.labels.data() + first, real, test_labels.data());
      std::fill(test_labels.begin() + real, test_labels.end(), 0);
      ctx.pool().run([&](int i) {
        auto& c = test_contrib[static_cast<size_t>(i)];
        member[static_cast<size_t>(i)]->forward(test_images.data(), E, c.data() + 1);
        std::int64_t mc = 0;
        for (std::int64_t r = 0; r < real; ++r) {
          const float* p = c.data() + 1 + r * kC;
          int best = 0;
          for (int k = 1; k < kC; ++k)
            if (p[k] > p[best]) best = k;
          mc += best == test_labels[static_cast<size_t>(r)];
        }
        member_correct_local[static_cast<size_t>(i)] += mc;
      });
      runtime::PerDevice<std::span<const float>> spans;
      for (const auto& c : test_contrib) spans.emplace_back(c);
      const auto all = runtime::all_gather(ctx, spans);
      const auto sum = sum_members(all, M, test_stride, 1, real);
      for (std::int64_t r = 0; r < real; ++r) {
        const double* p = sum.probs.data() + r * kC;
        test_correct += argmax(p) == test_labels[static_cast<size_t>(r)];
        test_loss -= std::log(std::max(p[test_labels[static_cast<size_t>(r)]] / M, 1e-30));
      }
    }
    runtime::PerDevice<std::span<const std::int64_t>> mc_spans;
    for (auto& v : member_correct_local) mc_spans.emplace_back(&v, 1);
    const auto member_correct = runtime::all_gather(ctx, mc_spans);

    EpochMetrics e;
    e.epoch = epoch;
    e.train_loss = state.train_loss_sum / static_cast<double>(steps_per_epoch);
    e.train_accuracy = static_cast<double>(state.train_correct) / static_cast<double>(state.train_seen);
    e.test_loss = test_loss / static_cast<double>(test.rows);
    e.test_accuracy = static_cast<double>(test_correct) / static_cast<double>(test.rows);
    for (auto c : member_correct) e.member_test_accuracy.push_back(static_cast<double>(c) / static_cast<double>(test.rows));
    e.seconds = state.train_seconds;
    e.images_per_second = static_cast<double>(state.train_seen) / std::max(state.train_seconds, 1e-9);
    // Wall-clock figures differ between runs; everything else above is bitwise reproducible.
    double slowest = e.seconds;
    runtime::allreduce_max(ctx, std::span<double>(&slowest, 1));
    e.seconds = slowest;
    e.images_per_second = static_cast<double>(state.train_seen) / std::max(slowest, 1e-9);
    result.epochs.push_back(e);
    history.push_back(epoch_json(e));
    state.epochs_done = epoch;
    state.step = 0;
    state.train_loss_sum = 0;
    state.train_correct = 0;
    state.train_seen = 0;
    state.train_seconds = 0;
    save();
    if (on_epoch) on_epoch(e);
  }
  result.images_per_second = process_train_images / std::max(process_train_seconds, 1e-9);
  download();
  result.params_digest = digest(ctx, params);
  return result;
}

nlohmann::json to_json(const EnsembleResult& r, const EnsembleOptions& o, const runtime::Context& ctx) {
  nlohmann::json j;
  j["members"] = r.members;
  nlohmann::json epochs = nlohmann::json::array();
  for (const auto& e : r.epochs) epochs.push_back(epoch_json(e));
  j["epochs"] = epochs;
  j["images_per_second"] = r.images_per_second;
  j["images_per_second_all_members"] = r.images_per_second * r.members;
  j["interrupted"] = r.interrupted;
  j["resumed_from_epoch"] = r.resumed_from_epoch;
  j["resumed_from_step"] = r.resumed_from_step;
  j["params_digest"] = format("%016llx", static_cast<unsigned long long>(r.params_digest));
  j["ranks"] = ctx.size();
  j["devices_per_rank"] = ctx.devices_per_rank();
  j["batch_size"] = o.batch_size;
  j["learning_rate"] = o.sgd.learning_rate;
  j["momentum"] = o.sgd.momentum;
  j["seed"] = o.seed;
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

}  // namespace spmd::workloads
