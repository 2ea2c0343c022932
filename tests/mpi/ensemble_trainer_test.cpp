// The ensemble trainer's pieces on every layout ctest launches (1..6 ranks) with 1 and 2
// devices per rank: the test pass against a plain loop over the members (each forwarding
// zero-padded batches, probabilities summed in member order), a checkpoint that resumes to
// the same bits (parameters and momentum: the next step agrees too), and the stop agreement.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <unistd.h>

#include "spmd/models/cnn_init.hpp"
#include "spmd/runtime/collectives.hpp"
#include "spmd/runtime/stop_request.hpp"
#include "spmd/workloads/ensemble_trainer.hpp"

using namespace spmd;

namespace {
const models::CnnConfig kModel = models::CnnConfig::seed_default();
const int kC = kModel.classes;
const int kPixels = static_cast<int>(kModel.input_size());

// n images with pixels in [0, 1] that differ from row to row, labels i % 10; the float32
// rows in features (for the steps) and as stored (for the test pass).
data::LoadedShard images(std::int64_t n) {
  data::LoadedShard s;
  s.rows = n;
  s.global_rows = n;
  s.sample_size = kPixels;
  s.sample_shape = {28, 28, 1};
  s.classes = kC;
  s.features.resize(static_cast<size_t>(n * kPixels));
  for (std::int64_t i = 0; i < n * kPixels; ++i) s.features[static_cast<size_t>(i)] = static_cast<float>((i * 7919 + i / kPixels * 31) % 256) / 255.0f;
  for (std::int64_t i = 0; i < n; ++i) s.labels.push_back(static_cast<std::int32_t>(i % kC));
  // As the ensemble keeps its sets (FeatureForm::Stored): float32 rows, used as they are.
  s.stored_type = data::ElementType::Float32;
  s.stored.resize(s.features.size() * sizeof(float));
  std::memcpy(s.stored.data(), s.features.data(), s.stored.size());
  return s;
}

workloads::EnsembleOptions options(const std::string& checkpoint) {
  workloads::EnsembleOptions o;
  o.model = kModel;  // the options' default takes the geometry from the training images
  o.batch_size = 4;
  o.eval_batch = 4;
  o.seed = 3;
  o.checkpoint = checkpoint;
  return o;
}

// A checkpoint path every rank agrees on (rank 0 picks it).
std::string shared_path(const runtime::Context& ctx) {
  std::string path = (std::filesystem::temp_directory_path() / ("spmd-trainer-" + std::to_string(::getpid()) + ".h5")).string();
  runtime::broadcast(ctx, path);
  return path;
}

class Trainer : public ::testing::TestWithParam<int> {};
}  // namespace

TEST_P(Trainer, EvaluateMatchesPlainLoopOverMembers) {
  runtime::Context ctx(MPI_COMM_WORLD, {"cpu", GetParam(), 120.0});
  const auto o = options("");
  const int M = ctx.total_devices(), E = o.eval_batch;
  const auto test = images(13);  // 3 batches of 4 and one of 1 (padded with 3 zero rows)
  workloads::EnsembleTrainer trainer(ctx, o);

  // Reference, on rank 0: every member g from its key, forwarding the zero-padded batches.
  std::int64_t expected[2 + 64] = {0};  // correct, loss bits, member correct...
  ASSERT_LE(M, 64);
  if (ctx.is_root()) {
    std::vector<std::unique_ptr<models::CnnMember>> members;
    models::CnnParams params(kModel), zero(kModel);
    zero.set_zero();
    for (int g = 0; g < M; ++g) {
      models::cnn_init(params, models::ensemble_member_key(o.seed, g, M));
      members.push_back(models::make_cnn_member(ctx.devices()[0], kModel, E, 1));
      members.back()->set_state(params, zero);
    }
    double loss = 0;
    std::vector<float> batch(static_cast<size_t>(E) * kPixels), probs(static_cast<size_t>(E) * kC);
    for (std::int64_t first = 0; first < test.rows; first += E) {
      const std::int64_t real = std::min<std::int64_t>(E, test.rows - first);
      std::fill(batch.begin(), batch.end(), 0.0f);
      std::copy_n(test.features.data() + first * kPixels, real * kPixels, batch.begin());
      std::vector<double> sum(static_cast<size_t>(E) * kC, 0.0);
      for (int g = 0; g < M; ++g) {
        members[static_cast<size_t>(g)]->forward(batch.data(), E, probs.data());
        for (std::int64_t r = 0; r < real; ++r) {
          const float* p = probs.data() + r * kC;
          expected[2 + g] += std::max_element(p, p + kC) - p == test.labels[static_cast<size_t>(first + r)];
        }
        for (size_t k = 0; k < sum.size(); ++k) sum[k] += probs[k];
      }
      for (std::int64_t r = 0; r < real; ++r) {
        const double* p = sum.data() + r * kC;
        const int y = test.labels[static_cast<size_t>(first + r)];
        expected[0] += std::max_element(p, p + kC) - p == y;
        loss -= std::log(std::max(p[y] / M, 1e-30));
      }
    }
    std::memcpy(&expected[1], &loss, sizeof loss);
  }
  MPI_Bcast(expected, 2 + 64, MPI_INT64_T, 0, MPI_COMM_WORLD);
  double expected_loss = 0;
  std::memcpy(&expected_loss, &expected[1], sizeof expected_loss);
  // Zero padding as in the product, then poisoned padding (NaN images, see evaluate): the
  // real rows alone make the result, so both give the reference's bits.
  for (const std::uint8_t padding : {std::uint8_t{0}, std::uint8_t{0xFF}}) {
    SCOPED_TRACE(::testing::Message() << "padding byte " << int{padding});
    const workloads::TestResult got = trainer.evaluate(test, padding);
    EXPECT_EQ(got.rows, 13);
    EXPECT_EQ(got.correct, expected[0]);
    EXPECT_EQ(got.loss, expected_loss);  // bitwise: the same sums in the same order
    ASSERT_EQ(got.member_correct.size(), static_cast<size_t>(M));
    for (int g = 0; g < M; ++g) EXPECT_EQ(got.member_correct[static_cast<size_t>(g)], expected[2 + g]) << "member " << g;
  }
}

TEST_P(Trainer, ResumedCheckpointContinuesBitwise) {
  runtime::Context ctx(MPI_COMM_WORLD, {"cpu", GetParam(), 120.0});
  const std::string path = shared_path(ctx);
  const auto o = options(path);
  const auto batch = images(4);
  workloads::EnsembleTrainer straight(ctx, o);
  straight.step(batch.features.data(), batch.labels.data());
  straight.step(batch.features.data(), batch.labels.data());
  auto state = straight.fresh_state();
  state.step = 2;
  state.train_seen = 8;
  straight.save(state);

  auto ro = o;
  ro.resume = true;
  workloads::EnsembleTrainer resumed(ctx, ro);
  const auto back = resumed.resume();
  EXPECT_EQ(back.step, 2);
  EXPECT_EQ(back.train_seen, 8);
  EXPECT_EQ(back.options, straight.defining_options());
  EXPECT_EQ(resumed.params_digest(), straight.params_digest());
  // The momentum came back too: the next step moves both the same way.
  const auto a = straight.step(batch.features.data(), batch.labels.data());
  const auto b = resumed.step(batch.features.data(), batch.labels.data());
  EXPECT_EQ(a.loss, b.loss);
  EXPECT_EQ(a.correct, b.correct);
  EXPECT_EQ(resumed.params_digest(), straight.params_digest());
  if (ctx.is_root()) std::filesystem::remove(path);
}

INSTANTIATE_TEST_SUITE_P(DevicesPerRank, Trainer, ::testing::Values(1, 2));

// The stop the epoch loop agrees on after every step (runtime/stop_request.hpp): a signal
// delivered to one rank only stops every rank, with that signal's name.
TEST(TrainerStop, ASignalToOneRankStopsEveryRank) {
  runtime::Context ctx(MPI_COMM_WORLD, {"cpu", 1, 60.0});
  const runtime::StopPolling polling;
  EXPECT_EQ(runtime::agreed_stop_signal(ctx), 0);
  if (ctx.rank() == ctx.size() - 1) std::raise(SIGUSR1);
  EXPECT_EQ(runtime::agreed_stop_signal(ctx), SIGUSR1);
  EXPECT_EQ(runtime::local_stop_signal(), ctx.rank() == ctx.size() - 1 ? SIGUSR1 : 0);
  runtime::reset_stop_request_for_tests();
  EXPECT_EQ(runtime::agreed_stop_signal(ctx), 0);
}
