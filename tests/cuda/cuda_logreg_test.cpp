// Logistic regression on a GPU against the CPU: chunk partials (LogregShard) bit for bit
// against the CPU kernels (both follow logreg_kernel_spec.hpp) and near the double
// reference, the eval predictor against logreg_predict, and the errors a machine without a
// GPU gets. GPU tests skip visibly where no GPU is visible.
#include <gtest/gtest.h>

#include "gpu_test_support.hpp"
#include "logreg_reference.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "spmd/models/device_models.hpp"
#include "spmd/models/logreg.hpp"
#include "spmd/runtime/devices.hpp"
#include "spmd/models/partial_sum_tree.hpp"
#include "spmd/runtime/error.hpp"

#include "spmd/backends/cuda/models.hpp"

namespace {

using spmd::models::logreg_partials_size;

struct Problem {
  std::int64_t rows;
  int features, classes;
  std::vector<float> X, W;  // [rows, F], [F, C]
  std::vector<std::int32_t> y;
};

// Pixel-like features in [0, 1) (a few exactly 0) and weights giving logits of order 1.
Problem make_problem(std::int64_t rows, int features, int classes, std::uint32_t seed) {
  Problem p{rows, features, classes, {}, {}, {}};
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> pixel(0.0f, 1.0f);
  std::normal_distribution<float> weight(0.0f, 2.0f / std::sqrt(static_cast<float>(features)));
  std::uniform_int_distribution<std::int32_t> label(0, classes - 1);
  p.X.resize(static_cast<std::size_t>(rows) * features);
  for (float& v : p.X) v = pixel(rng) < 0.1f ? 0.0f : pixel(rng);
  p.W.resize(static_cast<std::size_t>(features) * classes);
  for (float& v : p.W) v = weight(rng);
  p.y.resize(static_cast<std::size_t>(rows));
  for (auto& v : p.y) v = label(rng);
  return p;
}

// GPU partials of every chunk against logreg_reference_partials: the loss to 1e-4
// relative, each gradient entry (f, c) to 1e-4 of sum_rows |x_f| (its terms' size bound,
// since |p - y| <= 1).
void expect_matches_reference(const Problem& p, std::int64_t chunk_rows, const std::vector<double>& gpu,
                              const std::string& context) {
  const std::size_t record = logreg_partials_size(p.features, p.classes);
  std::vector<double> ref(record);
  const std::int64_t chunks = (p.rows + chunk_rows - 1) / chunk_rows;
  for (std::int64_t k = 0; k < chunks; ++k) {
    const std::int64_t first = k * chunk_rows, n = std::min(chunk_rows, p.rows - first);
    const float* X = p.X.data() + first * p.features;
    spmd::models::logreg_reference_partials(X, p.y.data() + first, n, p.features, p.classes, p.W.data(), ref.data());
    const double* g = gpu.data() + static_cast<std::size_t>(k) * record;
    ASSERT_NEAR(g[0], ref[0], 1e-4 * std::max(1.0, std::abs(ref[0]))) << context << " chunk " << k << " loss";
    for (int f = 0; f < p.features; ++f) {
      double size = 0;
      for (std::int64_t r = 0; r < n; ++r) size += std::abs(X[r * p.features + f]);
      for (int c = 0; c < p.classes; ++c) {
        const std::size_t e = 1 + static_cast<std::size_t>(f) * p.classes + c;
        ASSERT_NEAR(g[e], ref[e], 1e-4 * size + 1e-12) << context << " chunk " << k << " f " << f << " c " << c;
      }
    }
  }
}

// The GPU follows the CPU kernels' arithmetic exactly: every partial is the same double. W in
// float, or in double for the float64 kernels.
template <class T>
void expect_same_bits_as_cpu(const Problem& p, const std::vector<T>& W, std::int64_t chunk_rows,
                             const std::vector<double>& gpu, const std::string& context,
                             const double* row_weights = nullptr) {
  const std::size_t record = logreg_partials_size(p.features, p.classes);
  const std::int64_t chunks = (p.rows + chunk_rows - 1) / chunk_rows;
  std::vector<double> cpu(static_cast<std::size_t>(chunks) * record);
  spmd::models::LogregWorkspace ws;
  spmd::models::logreg_range_partials(p.X.data(), p.y.data(), p.rows, p.features, p.classes, W.data(), chunk_rows,
                                      cpu.data(), ws, row_weights);
  for (std::size_t i = 0; i < cpu.size(); ++i)
    ASSERT_EQ(std::memcmp(&gpu[i], &cpu[i], sizeof(double)), 0)
        << context << ": chunk " << i / record << " entry " << i % record << ": GPU " << gpu[i] << " CPU " << cpu[i];
}

struct Shape {
  std::int64_t rows;
  int features, classes;
  std::int64_t chunk_rows;
};
// Chunks of k * chunk_rows and k * chunk_rows +- 1 rows, chunks shorter than, equal to, and
// longer than one 256-row float block (padded to whole blocks); rows that leave the logits'
// last group of rows partial; features that are and are not a multiple of the gradient's
// vector of 4 (or 2); more classes than a class group (10); one feature, one class.
const Shape kShapes[] = {{1, 1, 1, 4},      {5000, 784, 10, 2048}, {4096, 33, 7, 2048}, {4097, 33, 7, 2048},
                         {4095, 33, 7, 2048}, {1000, 17, 5, 300},  {513, 20, 4, 100},   {777, 9, 2, 256},
                         {257, 3, 12, 256}, {600, 5, 3, 257},      {64, 784, 10, 2048}, {10, 4, 1, 3},
                         {299, 6, 23, 128}};

TEST(CudaLogregShard, PartialsMatchCpuBitwiseOnManyShapes) {
  SKIP_WITHOUT_GPU();
  std::uint32_t seed = 1;
  for (const Shape& s : kShapes) {
    const Problem p = make_problem(s.rows, s.features, s.classes, seed++);
    auto shard = spmd::models::make_logreg_shard(spmd::test::cuda_device(0), p.X.data(), p.y.data(), p.rows, p.features,
                                                 p.classes, s.chunk_rows);
    const std::size_t record = logreg_partials_size(p.features, p.classes);
    const std::int64_t chunks = (p.rows + s.chunk_rows - 1) / s.chunk_rows;
    // A guard after the last chunk catches a copy of the wrong length.
    constexpr double kGuard = 12345.5;
    std::vector<double> out(static_cast<std::size_t>(chunks) * record + 8, kGuard);
    shard->chunk_partials(p.W.data(), out.data());
    for (std::size_t i = static_cast<std::size_t>(chunks) * record; i < out.size(); ++i) ASSERT_EQ(out[i], kGuard);
    const std::string context = "rows " + std::to_string(s.rows) + " F " + std::to_string(s.features) + " C " +
                                std::to_string(s.classes) + " chunk_rows " + std::to_string(s.chunk_rows);
    expect_matches_reference(p, s.chunk_rows, out, context);
    expect_same_bits_as_cpu(p, p.W, s.chunk_rows, out, context);
    // New weights on the same shard: nothing of the previous call is left over. Large
    // weights push most exponentials below the cut-off (exactly 0).
    Problem q = p;
    for (float& w : q.W) w = -40.0f * w;
    shard->chunk_partials(q.W.data(), out.data());
    expect_same_bits_as_cpu(q, q.W, s.chunk_rows, out, context + " (second W)");
  }
}

// --precision float64: the float64 kernels (W, logits, softmax and gradient in double) give the
// CPU's float64 bits on the same shapes.
TEST(CudaLogregShard, Float64PartialsMatchCpuBitwiseOnManyShapes) {
  SKIP_WITHOUT_GPU();
  std::uint32_t seed = 101;
  for (const Shape& s : kShapes) {
    const Problem p = make_problem(s.rows, s.features, s.classes, seed++);
    auto shard = spmd::models::make_logreg_shard64(spmd::test::cuda_device(0), p.X.data(), p.y.data(), p.rows,
                                                   p.features, p.classes, s.chunk_rows);
    const std::int64_t chunks = (p.rows + s.chunk_rows - 1) / s.chunk_rows;
    std::vector<double> out(static_cast<std::size_t>(chunks) * logreg_partials_size(p.features, p.classes));
    const std::string context = "float64 rows " + std::to_string(s.rows) + " F " + std::to_string(s.features) +
                                " C " + std::to_string(s.classes) + " chunk_rows " + std::to_string(s.chunk_rows);
    for (const float scale : {1.0f, -40.0f}) {
      std::vector<double> W(p.W.begin(), p.W.end());
      for (double& w : W) w *= scale;
      shard->chunk_partials(W.data(), out.data());
      expect_same_bits_as_cpu(p, W, s.chunk_rows, out, context + " scale " + std::to_string(scale));
    }
  }
}

// Weighted rows (sample x class weights, zeros among them): the CPU's weighted bits, float32
// and float64.
TEST(CudaLogregShard, WeightedRowsMatchCpuBitwise) {
  SKIP_WITHOUT_GPU();
  std::uint32_t seed = 301;
  for (const Shape& s : kShapes) {
    const Problem p = make_problem(s.rows, s.features, s.classes, seed++);
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> weight(0.0, 4.0);
    std::vector<double> w(static_cast<std::size_t>(p.rows));
    for (auto& v : w) v = rng() % 5 == 0 ? 0.0 : weight(rng);
    const std::int64_t chunks = (p.rows + s.chunk_rows - 1) / s.chunk_rows;
    std::vector<double> out(static_cast<std::size_t>(chunks) * logreg_partials_size(p.features, p.classes));
    const std::string context = "weighted rows " + std::to_string(s.rows) + " F " + std::to_string(s.features) +
                                " C " + std::to_string(s.classes);
    auto shard = spmd::models::make_logreg_shard(spmd::test::cuda_device(0), p.X.data(), p.y.data(), p.rows, p.features,
                                                 p.classes, s.chunk_rows, w.data());
    shard->chunk_partials(p.W.data(), out.data());
    expect_same_bits_as_cpu(p, p.W, s.chunk_rows, out, context, w.data());
    auto shard64 = spmd::models::make_logreg_shard64(spmd::test::cuda_device(0), p.X.data(), p.y.data(), p.rows,
                                                     p.features, p.classes, s.chunk_rows, w.data());
    const std::vector<double> W64(p.W.begin(), p.W.end());
    shard64->chunk_partials(W64.data(), out.data());
    expect_same_bits_as_cpu(p, W64, s.chunk_rows, out, context + " float64", w.data());
  }
}

// What the objective asks for: the chunk records added up on the GPU to the canonical nodes of
// the shard's chunks (the in-place tree plan), the same bits as the CPU's chunk records pushed
// into the tree, whatever the shard's place among the global chunks; twice on one shard (the
// plan made once, then reused; a new place makes a new plan).
TEST(CudaLogregShard, NodePartialsAreTheTreeOfTheCpuChunks) {
  SKIP_WITHOUT_GPU();
  const Problem p = make_problem(9 * 300 + 17, 37, 6, 77);
  const std::int64_t chunk_rows = 300, chunks = 10;
  const std::size_t record = logreg_partials_size(p.features, p.classes);
  auto shard = spmd::models::make_logreg_shard(spmd::test::cuda_device(0), p.X.data(), p.y.data(), p.rows, p.features,
                                               p.classes, chunk_rows);
  std::vector<double> cpu(static_cast<std::size_t>(chunks) * record);
  spmd::models::LogregWorkspace ws;
  spmd::models::logreg_range_partials(p.X.data(), p.y.data(), p.rows, p.features, p.classes, p.W.data(), chunk_rows,
                                      cpu.data(), ws);
  for (const auto [first, global] : {std::pair<std::int64_t, std::int64_t>{0, 10}, {3, 13}, {3, 13}, {6, 40}, {0, 11}}) {
    spmd::models::PartialSumTree tree(global, record);
    tree.reset(first);
    for (std::int64_t k = 0; k < chunks; ++k) tree.push_leaf(cpu.data() + k * record);
    const double* gpu = shard->node_partials(p.W.data(), first, global);
    ASSERT_NE(gpu, nullptr);
    ASSERT_EQ(std::memcmp(gpu, tree.data(), tree.nodes().size() * record * sizeof(double)), 0)
        << "chunks [" << first << ", " << first + chunks << ") of " << global;
  }
}

TEST(CudaLogregShard, NoRowsLeavesOutputUntouched) {
  SKIP_WITHOUT_GPU();
  const std::vector<float> W(6, 1.0f);
  auto shard = spmd::models::make_logreg_shard(spmd::test::cuda_device(0), nullptr, nullptr, 0, 3, 2, 2048);
  std::vector<double> out(4, -1.0);
  shard->chunk_partials(W.data(), out.data());
  EXPECT_EQ(out, std::vector<double>(4, -1.0));
}

// No timing here: this binary also runs under compute-sanitizer (10-100x slower); the time per
// evaluation and its budget are bench_gpu_logreg's (tools/bench/gpu).
TEST(CudaLogregShard, SameBitsEveryRunOnAnyLayout) {
  SKIP_WITHOUT_GPU();
  // The JAXopt example's problem size: Fashion-MNIST's 50000 x 784 training rows, 10 classes.
  const Problem p = make_problem(50000, 784, 10, 99);
  const std::int64_t R = spmd::models::kLogregChunkRows;
  const std::int64_t chunks = (p.rows + R - 1) / R;
  const std::size_t record = logreg_partials_size(784, 10), size = static_cast<std::size_t>(chunks) * record;
  auto whole = spmd::models::make_logreg_shard(spmd::test::cuda_device(0), p.X.data(), p.y.data(), p.rows, 784, 10, R);
  std::vector<double> first(size), again(size), split(size);
  whole->chunk_partials(p.W.data(), first.data());
  whole->chunk_partials(p.W.data(), again.data());
  EXPECT_EQ(std::memcmp(first.data(), again.data(), size * sizeof(double)), 0) << "a shard changed its bits";
  // The same rows as two devices would hold them (cut at a chunk boundary): same chunks.
  const std::int64_t cut_chunks = 7, cut = cut_chunks * R;
  auto head = spmd::models::make_logreg_shard(spmd::test::cuda_device(0), p.X.data(), p.y.data(), cut, 784, 10, R);
  auto tail = spmd::models::make_logreg_shard(spmd::test::cuda_device(0), p.X.data() + cut * 784, p.y.data() + cut, p.rows - cut,
                                              784, 10, R);
  head->chunk_partials(p.W.data(), split.data());
  tail->chunk_partials(p.W.data(), split.data() + cut_chunks * record);
  EXPECT_EQ(std::memcmp(first.data(), split.data(), size * sizeof(double)), 0) << "the layout changed the bits";
}

TEST(CudaLogregShard, BadLabelIsAnErrorNamingTheRow) {
  SKIP_WITHOUT_GPU();
  Problem p = make_problem(100, 4, 3, 5);
  p.y[57] = 3;
  try {
    spmd::models::make_logreg_shard(spmd::test::cuda_device(0), p.X.data(), p.y.data(), p.rows, 4, 3, 32);
    FAIL() << "label 3 of 3 classes accepted";
  } catch (const spmd::Error& e) {
    EXPECT_NE(std::string(e.what()).find("row 57"), std::string::npos) << e.what();
  }
}

TEST(CudaLogregPredictor, SameClassesAsCpuOverSeveralTiles) {
  SKIP_WITHOUT_GPU();
  // More rows than one predictor tile (16384); the first rows are zeros (padding): every
  // logit is 0, a tie the lowest class must win.
  const std::int64_t rows = 20000;
  Problem p = make_problem(rows, 20, 7, 17);
  std::fill(p.X.begin(), p.X.begin() + 5 * 20, 0.0f);
  std::vector<std::int32_t> cpu(static_cast<std::size_t>(rows)), gpu(static_cast<std::size_t>(rows), -1);
  spmd::models::LogregWorkspace ws;
  spmd::models::logreg_predict(p.X.data(), rows, 20, 7, p.W.data(), cpu.data(), ws);
  auto predictor = spmd::backends::cuda::make_logreg_predictor_cuda(spmd::test::cuda_device(0), {p.W, {}, 20, 7}, rows);
  predictor->predict(p.X.data(), rows, gpu.data(), nullptr);
  for (int r = 0; r < 5; ++r) EXPECT_EQ(gpu[static_cast<std::size_t>(r)], 0) << "zero row " << r;
  // The same logits bit for bit (logreg_kernel_spec.hpp), so the same classes, ties too.
  for (std::int64_t r = 0; r < rows; ++r)
    ASSERT_EQ(gpu[static_cast<std::size_t>(r)], cpu[static_cast<std::size_t>(r)]) << "row " << r;
  // A shorter batch reuses the buffers; an empty one does nothing; a longer one is refused.
  std::vector<std::int32_t> part(100, -1);
  predictor->predict(p.X.data() + 1000 * 20, 100, part.data(), nullptr);
  EXPECT_TRUE(std::equal(part.begin(), part.end(), gpu.begin() + 1000));
  predictor->predict(p.X.data(), 0, part.data(), nullptr);
  EXPECT_THROW(predictor->predict(p.X.data(), rows + 1, part.data(), nullptr), spmd::Error);
}

// With an intercept and probabilities: the GPU's logits are the CPU's bit for bit and the
// host finishes both alike, so classes and probabilities are the CPU predictor's bits.
TEST(CudaLogregPredictor, InterceptAndProbabilitiesAreTheCpuBits) {
  SKIP_WITHOUT_GPU();
  const std::int64_t rows = 17000;
  const int features = 31, classes = 12;
  Problem p = make_problem(rows, features, classes, 23);
  spmd::models::LogregParameters params{p.W, std::vector<float>(classes), features, classes};
  for (int c = 0; c < classes; ++c) params.bias[static_cast<std::size_t>(c)] = 0.25f * static_cast<float>(c % 5) - 0.5f;
  std::vector<std::int32_t> cpu(static_cast<std::size_t>(rows)), gpu(static_cast<std::size_t>(rows), -1);
  std::vector<float> cpu_probs(static_cast<std::size_t>(rows * classes)), gpu_probs(cpu_probs.size(), -1.0f);
  spmd::models::LogregFixedPredictor host(params.W.data(), params.bias.data(), features, classes);
  host.predict(p.X.data(), rows, cpu.data(), cpu_probs.data());
  auto predictor = spmd::backends::cuda::make_logreg_predictor_cuda(spmd::test::cuda_device(0), params, rows);
  predictor->predict(p.X.data(), rows, gpu.data(), gpu_probs.data());
  EXPECT_EQ(gpu, cpu);
  EXPECT_EQ(0, std::memcmp(gpu_probs.data(), cpu_probs.data(), cpu_probs.size() * sizeof(float)));
}

// Without a GPU (this machine, CI), asking for a CUDA device is a clear spmd::Error
// (what failed and what to do), never a crash.
TEST(CudaDeviceModels, NoGpuIsAClearError) {
  std::string why;
  if (spmd::backends::cuda::visible_gpu_count(&why) > 0) GTEST_SKIP() << "a GPU is visible; this test is for machines without one";
  const std::vector<float> X(8, 0.5f), W(4, 0.0f);
  const std::vector<std::int32_t> y(4, 1);
  const std::string expected = "--backend cpu";
  const auto expect_clear = [&](const auto& make, const char* what) {
    try {
      make();
      ADD_FAILURE() << what << " succeeded without a GPU";
    } catch (const spmd::Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << what << ": " << e.what();
    }
  };
  expect_clear([&] { spmd::models::make_logreg_shard(spmd::test::cuda_device(0), X.data(), y.data(), 4, 2, 2, 2048); },
               "make_logreg_shard");
  expect_clear([&] { spmd::models::make_cnn_member(spmd::test::cuda_device(0), spmd::models::CnnConfig::seed_default(), 8, 4); }, "make_cnn_member");
  expect_clear([&] { spmd::backends::cuda::make_logreg_predictor_cuda(spmd::test::cuda_device(0), {W, {}, 2, 2}, 16); },
               "make_logreg_predictor_cuda");
}

// With or without a GPU: an ordinal past the visible GPUs is refused up front.
TEST(CudaDeviceModels, OrdinalPastTheVisibleGpusIsAnError) {
  const int visible = spmd::backends::cuda::visible_gpu_count();
  const std::vector<float> X(8, 0.5f);
  const std::vector<std::int32_t> y(4, 1);
  EXPECT_THROW(spmd::models::make_logreg_shard(spmd::test::cuda_device(visible + 2), X.data(), y.data(), 4, 2, 2, 2048),
               spmd::Error);
  EXPECT_THROW(spmd::models::make_cnn_member(spmd::test::cuda_device(visible + 2), spmd::models::CnnConfig::seed_default(), 8, 4),
               spmd::Error);
}

}  // namespace
