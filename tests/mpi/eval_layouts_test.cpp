// spmd eval's central property: every real example is counted exactly once, on every
// layout of ranks x devices x batch size, including ranks with no examples, and the
// integer results are the same on every layout.
//
// The data is built so that a miscount cannot hide: row i has feature x0 = i and a label
// that a test classifier (class = x0 mod 10) gets right only when i % 3 == 0. A dropped,
// duplicated or padded row changes `correct` or `total`.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <unistd.h>

#include "spmd/data/h5_reader.hpp"
#include "spmd/data/output_set.hpp"
#include "spmd/data/h5_writer.hpp"
#include "spmd/runtime/collectives.hpp"
#include "spmd/runtime/error.hpp"
#include "spmd/workloads/eval.hpp"

// Its own namespace: the unity build compiles this file with others whose helpers share names.
namespace eval_layouts_test {

using namespace spmd;
using workloads::EvalStrategy;

namespace {

class RowClassifier final : public models::Classifier {
  class Predictor final : public models::DevicePredictor {
   public:
    explicit Predictor(std::int64_t row) : row_(row) {}
    void predict(const float* x, std::int64_t rows, std::int32_t* out, float* probs) override {
      for (std::int64_t r = 0; r < rows; ++r) out[r] = static_cast<std::int32_t>(x[r * row_]) % 10;
      if (probs)
        for (std::int64_t r = 0; r < rows; ++r)
          for (int c = 0; c < 10; ++c) probs[r * 10 + c] = c == out[r] ? 1.0f : 0.0f;
    }

   private:
    std::int64_t row_;
  };

 public:
  std::string describe() const override { return "row classifier"; }
  int classes() const override { return 10; }
  void check_sample_shape(const std::vector<std::int64_t>&, const std::string&) const override {}
  std::unique_ptr<models::DevicePredictor> make_predictor(const runtime::DeviceInfo&, std::int64_t) const override {
    return std::make_unique<Predictor>(3);
  }
  std::int64_t parameter_bytes() const override { return 0; }
  std::int64_t workspace_bytes(std::int64_t) const override { return 0; }
};

int label_of(std::int64_t i) { return static_cast<int>(i % 3 == 0 ? i % 10 : (i + 1) % 10); }

// A shared temporary folder (rank 0 makes it, everyone gets the name).
std::string shared_tmpdir(const runtime::Context& ctx) {
  std::vector<char> name(256, 0);
  if (ctx.is_root()) {
    std::string t = (std::filesystem::temp_directory_path() / "spmd-eval-XXXXXX").string();
    std::copy(t.begin(), t.end(), name.begin());
    if (!mkdtemp(name.data())) throw std::runtime_error("mkdtemp failed");
  }
  runtime::broadcast(ctx, std::span<char>(name));
  return std::string(name.data());
}

std::string make_file(const runtime::Context& ctx, const std::string& dir, std::int64_t n,
                      int (*label)(std::int64_t) = label_of) {
  const std::string path = dir + "/rows" + std::to_string(n) + ".h5";
  data::write_on_root(ctx, path, [&](data::AtomicH5Writer& w) {
    std::vector<float> x(static_cast<size_t>(n * 3));
    std::vector<std::int32_t> y(static_cast<size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) {
      x[static_cast<size_t>(i * 3)] = static_cast<float>(i);
      x[static_cast<size_t>(i * 3 + 1)] = 0.5f;
      x[static_cast<size_t>(i * 3 + 2)] = -1.0f;
      y[static_cast<size_t>(i)] = label(i);
    }
    w.write("images", x, {n, 3});
    w.write("labels", y, {n});
  });
  return path;
}

std::int64_t expected_correct(std::int64_t n) { return (n + 2) / 3; }

// Writes the run's predictions and checks them on rank 0: row i of the file is row i of
// the input (predicted i % 10 with probability 1, its label), or marked not evaluated
// (-1, zero probabilities) for exactly `not_evaluated` rows, which must be the last rows
// of some ranks (drop-remainder) when any.
void expect_predictions_in_file_order(const runtime::Context& ctx, const workloads::PredictionRecorder& recorder,
                                      const std::string& path, std::int64_t n, std::int64_t not_evaluated) {
  {
    data::OutputSet outputs(ctx);
    recorder.write(ctx, path, {"row classifier", "rows", "images", "labels"}, outputs);
    outputs.publish();
  }
  if (!ctx.is_root()) return;
  data::H5Reader in(path);
  const auto predicted = in.read<std::int32_t>("predicted", {n});
  const auto label = in.read<std::int32_t>("label", {n});
  const auto probs = in.read<float>("probabilities", {n, 10});
  std::int64_t missing = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const auto at = static_cast<std::size_t>(i);
    ASSERT_EQ(label[at], label_of(i)) << "row " << i;
    if (predicted[at] == -1) {
      ++missing;
      for (int c = 0; c < 10; ++c) ASSERT_EQ(probs[at * 10 + static_cast<std::size_t>(c)], 0.0f) << "row " << i;
      continue;
    }
    ASSERT_EQ(predicted[at], i % 10) << "row " << i;
    for (int c = 0; c < 10; ++c)
      ASSERT_EQ(probs[at * 10 + static_cast<std::size_t>(c)], c == i % 10 ? 1.0f : 0.0f) << "row " << i;
  }
  EXPECT_EQ(missing, not_evaluated);
  EXPECT_EQ(in.attribute_int("/", "evaluated"), n - not_evaluated);
}

struct Fixture {
  std::string dir;
  ~Fixture() {
    MPI_Barrier(MPI_COMM_WORLD);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    std::error_code ec;
    if (rank == 0 && !dir.empty()) std::filesystem::remove_all(dir, ec);
  }
};

}  // namespace

TEST(EvalLayouts, EveryExampleCountedOnceForEveryLayout) {
  int P = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  Fixture fx;
  for (int d : {1, 2, 3}) {
    runtime::Context ctx(MPI_COMM_WORLD, {"cpu", d, 120.0});
    if (fx.dir.empty()) fx.dir = shared_tmpdir(ctx);
    for (std::int64_t B : {1, 2, 5, 64}) {
      const std::int64_t step = static_cast<std::int64_t>(P) * d * B;
      std::vector<std::int64_t> sizes = {1, std::max<std::int64_t>(1, P - 1), step - 1, step, step + 1,
                                         3 * step - 1, 3 * step, 3 * step + 1};
      for (std::int64_t n : sizes) {
        if (n < 1) continue;
        const std::string path = make_file(ctx, fx.dir, n);
        RowClassifier model;
        workloads::EvalOptions o;
        o.data = path;
        o.per_device_batch = B;
        o.strategy = EvalStrategy::Pad;
        const auto shard = workloads::load_eval_shard(ctx, o, model);
        std::vector<std::int64_t> reference;
        for (auto s : {EvalStrategy::Pad, EvalStrategy::PadMetrics, EvalStrategy::InfinitePad,
                       EvalStrategy::KeepRemainder, EvalStrategy::DropRemainder}) {
          if (s == EvalStrategy::KeepRemainder && ctx.total_devices() != 1) continue;
          o.strategy = s;
          SCOPED_TRACE(::testing::Message() << "P=" << P << " d=" << d << " B=" << B << " N=" << n
                                            << " strategy=" << workloads::to_string(s));
          workloads::PredictionRecorder recorder(shard, model.classes());
          const auto r = workloads::run_eval(ctx, o, model, shard, &recorder);
          EXPECT_EQ(r.confusion.correct(), r.correct);
          std::int64_t confusion_total = 0;
          for (int l = 0; l < 10; ++l)
            for (int c = 0; c < 10; ++c) confusion_total += r.confusion.at(l, c);
          EXPECT_EQ(confusion_total, r.total);
          expect_predictions_in_file_order(ctx, recorder, fx.dir + "/predictions.h5", n, n - r.total);
          if (s == EvalStrategy::DropRemainder) {
            // Whole steps of the smallest shard on every rank; the rest is dropped and said so.
            const std::int64_t smallest = n / P;
            const std::int64_t steps = smallest / (d * B);
            EXPECT_EQ(r.steps, steps);
            EXPECT_EQ(r.total, steps * d * B * P);
            EXPECT_EQ(r.dropped, n - r.total);
            continue;
          }
          EXPECT_EQ(r.total, n);
          EXPECT_EQ(r.correct, expected_correct(n));
          std::int64_t sum = 0;
          for (auto e : r.examples_per_rank) sum += e;
          EXPECT_EQ(sum, n);
          EXPECT_EQ(r.dropped, 0);
          if (s == EvalStrategy::Pad || s == EvalStrategy::PadMetrics) {
            EXPECT_EQ(r.batch_shapes.size(), 1u) << "pad must run one shape";
            EXPECT_EQ(r.batch_shapes.begin()->first, B);
          }
          if (s == EvalStrategy::KeepRemainder) EXPECT_LE(r.batch_shapes.size(), 2u);
          if (s == EvalStrategy::InfinitePad) {
            // The count barrier's window changes how often ranks synchronise, never where
            // they stop: the same steps and counts for a barrier on every step and across
            // window boundaries.
            for (const int w : {1, 3}) {
              auto ow = o;
              ow.count_window = w;
              const auto rw = workloads::run_eval(ctx, ow, model, shard);
              EXPECT_EQ(rw.steps, r.steps) << "window " << w;
              EXPECT_EQ(rw.total, r.total) << "window " << w;
              EXPECT_EQ(rw.correct, r.correct) << "window " << w;
              EXPECT_EQ(rw.padded_rows, r.padded_rows) << "window " << w;
            }
          }
        }
      }
    }
  }
}

TEST(EvalLayouts, PerDeviceBatchLargerThanEveryShard) {
  int P = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  Fixture fx;
  runtime::Context ctx(MPI_COMM_WORLD, {"cpu", 2, 120.0});
  fx.dir = shared_tmpdir(ctx);
  const std::int64_t n = 7 * P + 3;
  const std::string path = make_file(ctx, fx.dir, n);
  RowClassifier model;
  workloads::EvalOptions o;
  o.data = path;
  o.per_device_batch = 1000;
  const auto shard = workloads::load_eval_shard(ctx, o, model);
  for (auto s : {EvalStrategy::Pad, EvalStrategy::PadMetrics, EvalStrategy::InfinitePad}) {
    o.strategy = s;
    const auto r = workloads::run_eval(ctx, o, model, shard);
    EXPECT_EQ(r.total, n);
    EXPECT_EQ(r.correct, expected_correct(n));
    EXPECT_EQ(r.steps, 1);
  }
}

TEST(EvalLayouts, DropLabelNeedsInfinitePadWhenStepCountsDiffer) {
  int P = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  Fixture fx;
  runtime::Context ctx(MPI_COMM_WORLD, {"cpu", 1, 120.0});
  fx.dir = shared_tmpdir(ctx);
  // Rank 0's rows (the first ceil(N/P)) all carry label 5: dropping 5 leaves rank 0 with
  // nothing while the others keep theirs, so their step counts differ.
  const std::int64_t per = 6, n = per * P;
  static std::int64_t cut;
  cut = per;
  const std::string path = make_file(ctx, fx.dir, n, [](std::int64_t i) { return i < cut ? 5 : label_of(i) == 5 ? 6 : label_of(i); });
  RowClassifier model;
  workloads::EvalOptions o;
  o.data = path;
  o.per_device_batch = 2;
  o.drop_label = 5;
  const auto shard = workloads::load_eval_shard(ctx, o, model);
  std::int64_t expected_correct_kept = 0, kept = 0;
  for (std::int64_t i = per; i < n; ++i) {
    ++kept;
    const int y = label_of(i) == 5 ? 6 : label_of(i);
    expected_correct_kept += (i % 10) == y;
  }
  o.strategy = EvalStrategy::InfinitePad;
  for (const int w : {1, 2, 16}) {
    o.count_window = w;
    const auto r = workloads::run_eval(ctx, o, model, shard);
    EXPECT_EQ(r.total, kept) << "window " << w;
    EXPECT_EQ(r.correct, expected_correct_kept) << "window " << w;
    EXPECT_EQ(r.filtered_rows, per) << "window " << w;
    // Every step of the longest kept shard runs, and not one more: with one rank nothing is
    // kept (0 steps); otherwise ranks 1.. keep their `per` rows, ceil(per / B) steps.
    EXPECT_EQ(r.steps, P == 1 ? 0 : (per + 1) / 2) << "window " << w;
    // The rows read into memory once (--benchmark's passes) are the rows streamed.
    const auto held = workloads::run_eval(ctx, o, model, workloads::with_features_in_memory(ctx, shard));
    EXPECT_EQ(held.total, r.total) << "window " << w;
    EXPECT_EQ(held.correct, r.correct) << "window " << w;
  }
  for (auto s : {EvalStrategy::Pad, EvalStrategy::PadMetrics}) {
    o.strategy = s;
    if (P == 1) {
      EXPECT_EQ(workloads::run_eval(ctx, o, model, shard).total, kept);
      continue;
    }
    try {
      workloads::run_eval(ctx, o, model, shard);
      ADD_FAILURE() << "expected a CollectiveError on every rank";
    } catch (const CollectiveError& e) {
      EXPECT_NE(std::string(e.what()).find("infinite-pad"), std::string::npos) << e.what();
    }
  }
}

// The features are streamed from the file during the loop: a row refused there (a NaN in
// the last rank's rows) fails that rank's stream while the other ranks compute theirs. Every
// rank must stop with its message (never wait in the count barrier, an in-step psum or the
// final reductions), for every strategy. (tests/cli/eval_stream.sh fails a later block.)
TEST(EvalLayouts, ARowRefusedOnOneRankMidPassStopsEveryRankWithItsMessage) {
  int P = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  Fixture fx;
  const std::int64_t per = 10, n = per * P;
  const std::int64_t bad_row = n - per / 2;  // in the last rank's rows
  for (int d : {1, 2}) {
    runtime::Context ctx(MPI_COMM_WORLD, {"cpu", d, 120.0});
    if (fx.dir.empty()) fx.dir = shared_tmpdir(ctx);
    const std::string path = fx.dir + "/nan.h5";
    data::write_on_root(ctx, path, [&](data::AtomicH5Writer& w) {
      std::vector<float> x(static_cast<size_t>(n * 3), 0.5f);
      std::vector<std::int32_t> y(static_cast<size_t>(n));
      for (std::int64_t i = 0; i < n; ++i) {
        x[static_cast<size_t>(i * 3)] = static_cast<float>(i);
        y[static_cast<size_t>(i)] = label_of(i);
      }
      x[static_cast<size_t>(bad_row * 3 + 1)] = std::nanf("");
      w.write("images", x, {n, 3});
      w.write("labels", y, {n});
    });
    RowClassifier model;
    workloads::EvalOptions o;
    o.data = path;
    o.per_device_batch = 1;
    const auto shard = workloads::load_eval_shard(ctx, o, model);  // labels only: no error yet
    for (auto s : {EvalStrategy::Pad, EvalStrategy::PadMetrics, EvalStrategy::InfinitePad, EvalStrategy::DropRemainder,
                   EvalStrategy::KeepRemainder}) {
      if (s == EvalStrategy::KeepRemainder && ctx.total_devices() != 1) continue;
      o.strategy = s;
      SCOPED_TRACE(::testing::Message() << "P=" << P << " d=" << d << " strategy=" << workloads::to_string(s));
      try {
        workloads::run_eval(ctx, o, model, shard);
        ADD_FAILURE() << "expected a CollectiveError on every rank";
      } catch (const CollectiveError& e) {
        const std::string want = "rank " + std::to_string(P - 1) + ": '" + path + "': features dataset 'images': row " +
                                 std::to_string(bad_row) + " has a non-finite value (nan) at element 1";
        EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
      }
    }
  }
}

TEST(EvalLayouts, KeepRemainderRefusesSeveralDevices) {
  runtime::Context ctx(MPI_COMM_WORLD, {"cpu", 2, 120.0});
  RowClassifier model;
  workloads::EvalOptions o;
  o.strategy = EvalStrategy::KeepRemainder;
  workloads::EvalShard empty;
  EXPECT_THROW(workloads::run_eval(ctx, o, model, empty), CollectiveError);
}

}  // namespace eval_layouts_test
