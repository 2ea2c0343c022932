// Byte samples decoded on the GPU (backends/cuda/byte_stager.hpp): the staging pipeline
// hands every tile over in order with the table's floats, bit for bit; the logreg predictor
// and the CNN (member and ensemble predictor) give from bytes exactly what they give from
// the floats the host would decode, also for batches of several tiles and when the table
// changes between calls. Skipped visibly where no GPU is visible.
#include <gtest/gtest.h>

#include "gpu_test_support.hpp"

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "spmd/backends/cuda/byte_stager.hpp"
#include "spmd/backends/cuda/cuda_device.hpp"
#include "spmd/backends/cuda/device_buffer.hpp"
#include "spmd/backends/cuda/models.hpp"
#include "spmd/backends/cuda/stream.hpp"
#include "spmd/models/cnn_classifier.hpp"
#include "spmd/models/cnn_init.hpp"
#include "spmd/models/cnn_params.hpp"
#include "spmd/models/device_models.hpp"
#include "spmd/optim/sgd.hpp"
#include "spmd/runtime/error.hpp"

namespace {

using spmd::models::ByteTable;

std::vector<std::uint8_t> random_bytes(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<std::uint8_t> v(n);
  for (auto& b : v) b = static_cast<std::uint8_t>(byte(rng));
  return v;
}

// The loader's tables (data::FeatureDecoder): auto is float(v / 255.0); a factor 0.5 / 3.
ByteTable auto_table() {
  ByteTable t{};
  for (int v = 0; v < 256; ++v) t[static_cast<std::size_t>(v)] = static_cast<float>(v / 255.0);
  return t;
}
ByteTable factor_table() {
  ByteTable t{};
  for (int v = 0; v < 256; ++v) t[static_cast<std::size_t>(v)] = static_cast<float>(static_cast<double>(v) * 0.5 / 3.0);
  return t;
}

std::vector<float> host_decode(const std::vector<std::uint8_t>& bytes, const ByteTable& table) {
  std::vector<float> out(bytes.size());
  for (std::size_t i = 0; i < bytes.size(); ++i) out[i] = table[bytes[i]];
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(CudaByteStager, HandsOverEveryTileInOrderWithTheTablesFloats) {
  SKIP_WITHOUT_GPU();
  spmd::backends::cuda::use_cuda_device(spmd::test::cuda_device(), "byte stager test");
  const std::int64_t row_bytes = 37, tile_rows = 64;  // odd sizes: no alignment is assumed
  spmd::backends::cuda::Stream compute;
  spmd::backends::cuda::ByteStager stager(static_cast<std::size_t>(tile_rows * row_bytes), "byte stager test");
  spmd::backends::cuda::DeviceBuffer<float> x(static_cast<std::size_t>(tile_rows * row_bytes), "test tile");
  for (const std::int64_t rows : {1, 63, 64, 65, 1000}) {
    for (const ByteTable& table : {auto_table(), factor_table()}) {  // a new table on every call
      const auto bytes = random_bytes(static_cast<std::size_t>(rows * row_bytes), static_cast<std::uint32_t>(rows));
      const auto want = host_decode(bytes, table);
      std::int64_t next_row = 0;
      stager.run(bytes.data(), rows, row_bytes, tile_rows, table, x.data(), compute.get(),
                 [&](std::int64_t first, std::int64_t n) {
                   ASSERT_EQ(first, next_row) << "tiles out of order";
                   ASSERT_GE(n, 1);
                   ASSERT_LE(n, tile_rows);
                   std::vector<float> got(static_cast<std::size_t>(n * row_bytes));
                   x.download(got.data(), got.size(), compute.get());
                   compute.synchronize("reading a decoded tile back");
                   const std::vector<float> expected(want.begin() + first * row_bytes,
                                                     want.begin() + (first + n) * row_bytes);
                   ASSERT_TRUE(same_bits(got, expected)) << "rows " << rows << ", tile at row " << first;
                   next_row = first + n;
                 });
      EXPECT_EQ(next_row, rows) << "every row handed over once";
    }
  }
  int calls = 0;
  stager.run(nullptr, 0, row_bytes, tile_rows, auto_table(), x.data(), compute.get(),
             [&](std::int64_t, std::int64_t) { ++calls; });
  EXPECT_EQ(calls, 0) << "no rows, no tiles";
  EXPECT_THROW(stager.run(nullptr, 1, row_bytes, tile_rows + 1, auto_table(), x.data(), compute.get(),
                          [](std::int64_t, std::int64_t) {}),
               spmd::Error)
      << "tiles larger than the slots are refused";
}

TEST(CudaByteInput, LogregPredictorFromBytesEqualsFromHostFloats) {
  SKIP_WITHOUT_GPU();
  // More rows than one 16384-row predictor tile, so the pipeline runs several tiles.
  const int features = 5, classes = 3;
  const std::int64_t rows = 40000;
  spmd::models::LogregParameters p;
  p.features = features;
  p.classes = classes;
  std::mt19937 rng(7);
  std::normal_distribution<float> weight(0.0f, 1.0f);
  p.W.resize(static_cast<std::size_t>(features * classes));
  for (float& w : p.W) w = weight(rng);
  p.bias = {0.25f, -0.5f, 0.125f};
  auto predictor = spmd::backends::cuda::make_logreg_predictor_cuda(spmd::test::cuda_device(), p, rows);
  ASSERT_TRUE(predictor->decodes_bytes());
  const auto bytes = random_bytes(static_cast<std::size_t>(rows * features), 11);
  for (const ByteTable& table : {auto_table(), factor_table(), auto_table()}) {
    const auto floats = host_decode(bytes, table);
    std::vector<std::int32_t> want_classes(rows), got_classes(rows, -1);
    std::vector<float> want_probs(static_cast<std::size_t>(rows * classes)), got_probs(want_probs.size(), -1.0f);
    predictor->predict(floats.data(), rows, want_classes.data(), want_probs.data());
    predictor->predict_bytes(bytes.data(), rows, table, got_classes.data(), got_probs.data());
    EXPECT_EQ(got_classes, want_classes);
    EXPECT_TRUE(same_bits(got_probs, want_probs));
    // A short batch after a long one, and classes only.
    std::vector<std::int32_t> short_classes(7, -1);
    predictor->predict_bytes(bytes.data(), 7, table, short_classes.data(), nullptr);
    EXPECT_EQ(short_classes, std::vector<std::int32_t>(want_classes.begin(), want_classes.begin() + 7));
  }
  std::vector<std::int32_t> out(1);
  EXPECT_THROW(predictor->predict_bytes(bytes.data(), rows + 1, auto_table(), out.data(), nullptr), spmd::Error);
}

TEST(CudaByteInput, CnnMemberAndEnsembleFromBytesEqualFromHostFloats) {
  SKIP_WITHOUT_GPU();
  const auto config = spmd::models::CnnConfig::seed_default();
  const int max_batch = 600;  // more than one 512-row forward pass
  std::vector<std::vector<float>> members;
  for (int m = 0; m < 2; ++m) {
    spmd::models::CnnParams params(config);
    spmd::models::cnn_init(params, spmd::models::ensemble_member_key(3, m, 2));
    members.emplace_back(params.data(), params.data() + params.size());
  }
  spmd::models::CnnParams params(config), zero(config);
  std::copy(members[0].begin(), members[0].end(), params.data());
  zero.set_zero();
  auto member = spmd::models::make_cnn_member(spmd::test::cuda_device(), config, max_batch, 0);
  member->set_state(params, zero);
  ASSERT_TRUE(member->decodes_bytes());
  const auto classifier = spmd::models::make_cnn_classifier(config, members, "test members");
  auto ensemble = classifier->make_predictor(spmd::test::cuda_device(), max_batch);
  ASSERT_TRUE(ensemble->decodes_bytes());
  const std::int64_t pixels = config.input_size();
  for (const int n : {1, 7, 513, 600}) {
    const auto bytes = random_bytes(static_cast<std::size_t>(n * pixels), static_cast<std::uint32_t>(n));
    for (const ByteTable& table : {auto_table(), factor_table()}) {
      const auto floats = host_decode(bytes, table);
      std::vector<float> want(static_cast<std::size_t>(n * config.classes)), got(want.size(), -1.0f);
      member->forward(floats.data(), n, want.data());
      member->forward_bytes(bytes.data(), n, table, got.data());
      EXPECT_TRUE(same_bits(got, want)) << "member, n = " << n;
      std::vector<std::int32_t> want_classes(static_cast<std::size_t>(n)), got_classes(want_classes.size(), -1);
      ensemble->predict(floats.data(), n, want_classes.data(), want.data());
      ensemble->predict_bytes(bytes.data(), n, table, got_classes.data(), got.data());
      EXPECT_EQ(got_classes, want_classes) << "ensemble, n = " << n;
      EXPECT_TRUE(same_bits(got, want)) << "ensemble probabilities, n = " << n;
    }
  }
}

// Training from bytes (the ensemble's path where members decode them): every step's loss and
// probabilities and the final parameters and momentum have the bits of the same steps on the
// host-decoded floats, through the graph cache's eager, captured and replayed steps, a batch
// size change and a table change (a byte step and a float step are separate graphs).
TEST(CudaByteInput, CnnTrainStepsFromBytesEqualFromHostFloats) {
  SKIP_WITHOUT_GPU();
  const auto config = spmd::models::CnnConfig::seed_default();
  spmd::models::CnnParams init(config), zero(config);
  spmd::models::cnn_init(init, spmd::models::ensemble_member_key(5, 0, 1));
  zero.set_zero();
  auto from_floats = spmd::models::make_cnn_member(spmd::test::cuda_device(), config, 64, 64);
  auto from_bytes = spmd::models::make_cnn_member(spmd::test::cuda_device(), config, 64, 64);
  from_floats->set_state(init, zero);
  from_bytes->set_state(init, zero);
  const std::int64_t pixels = config.input_size();
  const spmd::optim::SgdMomentum sgd{0.1f, 0.9f};
  const int sizes[] = {64, 64, 64, 64, 17, 17, 17, 64};
  for (int step = 0; step < 8; ++step) {
    const int n = sizes[step];
    const ByteTable table = step < 6 ? auto_table() : factor_table();
    const auto bytes = random_bytes(static_cast<std::size_t>(n * pixels), 900 + static_cast<std::uint32_t>(step));
    std::vector<std::int32_t> labels(static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r) labels[static_cast<std::size_t>(r)] = (r * 7 + step) % config.classes;
    const auto floats = host_decode(bytes, table);
    std::vector<float> want(static_cast<std::size_t>(n * config.classes)), got(want.size(), -1.0f);
    const float want_loss = from_floats->train_step(floats.data(), labels.data(), n, sgd, want.data());
    const float got_loss = from_bytes->train_step_bytes(bytes.data(), labels.data(), n, table, sgd, got.data());
    EXPECT_EQ(std::memcmp(&got_loss, &want_loss, sizeof(float)), 0) << "step " << step << ": " << got_loss << " vs "
                                                                      << want_loss;
    EXPECT_TRUE(same_bits(got, want)) << "probabilities of step " << step;
  }
  spmd::models::CnnParams p_floats(config), t_floats(config), p_bytes(config), t_bytes(config);
  from_floats->get_state(p_floats, t_floats);
  from_bytes->get_state(p_bytes, t_bytes);
  EXPECT_EQ(std::memcmp(p_bytes.data(), p_floats.data(), p_floats.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(t_bytes.data(), t_floats.data(), t_floats.size() * sizeof(float)), 0);
  // Bad calls are refused as train_step refuses them.
  std::vector<std::int32_t> bad(64, config.classes);
  const auto bytes = random_bytes(static_cast<std::size_t>(64 * pixels), 1);
  EXPECT_THROW(from_bytes->train_step_bytes(bytes.data(), bad.data(), 64, auto_table(), sgd, nullptr), spmd::Error);
  EXPECT_THROW(from_bytes->train_step_bytes(bytes.data(), bad.data(), 65, auto_table(), sgd, nullptr), spmd::Error);
}

}  // namespace
