// Every layer path of the CPU CNN's backward pass against central finite differences of the
// double-precision reference (tests/support/cnn_reference.hpp), for the configurations of
// gradient_path_configs() (0 to 3 hidden dense layers, 1 and 3 conv layers, odd sizes that
// the pools floor, 1 and 3 channels, both first-layer kernels) on every instruction set this
// machine runs. Two gradients per case: cnn_loss_and_grad's, and the one cnn_train_step
// applies, whose hidden dense kernels come from the SGD update fused into the GEMM (read
// back as the momentum trace after one step from a zero trace: trace' = m * 0 + g).
//
// The check is one relative error per tensor, ||g - fd|| / ||fd||: float32 rounding keeps
// it near 1e-6 (each case prints its worst), finite differences add ~1e-8, while a pool
// gradient scaled wrongly makes it ~1 and a ReLU mask missing between hidden dense layers
// ~0.3. 1e-3 lies three decades above the one and two below the other.
#include <gtest/gtest.h>

#include <algorithm>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "cnn_gradient_check.hpp"
#include "cnn_reference.hpp"
#include "spmd/models/cnn_cpu.hpp"

// Its own namespace: the unity build compiles this file with others whose helpers share names.
namespace cnn_gradient_paths_test {

namespace {

using spmd::models::CnnParams;
using spmd::models::CnnWorkspace;
using spmd::models::cnn_cpu::Isa;
using spmd::test::PathConfig;

constexpr double kTolerance = 1e-3;
constexpr int kBatch = 4;
constexpr std::size_t kEntriesPerTensor = 64;

struct Case {
  PathConfig path;
  Isa isa;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.path.name << "/" << spmd::models::cnn_cpu::to_string(c.isa); }

std::vector<Case> cases() {
  std::vector<Case> out;
  for (Isa isa : {Isa::Avx2, Isa::Avx512, Isa::Blas}) {
    if (!spmd::models::cnn_cpu::isa_supported(isa)) continue;
    for (const PathConfig& path : spmd::test::gradient_path_configs()) out.push_back({path, isa});
  }
  return out;
}

std::string context(const Case& c, const char* which) {
  return std::string(which) + " " + c.path.name + "/" + spmd::models::cnn_cpu::to_string(c.isa);
}

class CnnGradientPaths : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    const Case& c = GetParam();
    std::mt19937 rng(41);
    batch_ = spmd::test::random_batch(c.path.config, kBatch, rng);
  }
  // The block errors of `grad` against the reference's finite differences.
  std::vector<spmd::test::BlockError> errors(const CnnParams& params, const CnnParams& grad) {
    const spmd::test::Reference ref(GetParam().path.config, params.layout());
    std::vector<double> p = spmd::test::to_double(params);
    std::mt19937 rng(42);
    return spmd::test::gradient_block_errors(
        grad, p, [&](const std::vector<double>& q) { return ref.loss(q, batch_.images, batch_.labels); }, rng,
        kEntriesPerTensor);
  }
  spmd::test::Batch batch_;
};

TEST_P(CnnGradientPaths, LossAndGradMatchesFiniteDifferencesOfTheReference) {
  const Case& c = GetParam();
  const CnnParams params = spmd::test::test_params(c.path.config, 6);
  CnnWorkspace ws(c.path.config, kBatch, kBatch, c.isa);
  CnnParams grad(c.path.config);
  spmd::models::cnn_loss_and_grad(params, batch_.images.data(), batch_.labels.data(), nullptr, kBatch, grad, nullptr,
                                  ws);
  spmd::test::expect_block_errors_below(errors(params, grad), kTolerance, context(c, "loss_and_grad"));
}

TEST_P(CnnGradientPaths, TrainStepAppliesTheGradientOfTheReference) {
  const Case& c = GetParam();
  const CnnParams before = spmd::test::test_params(c.path.config, 6);
  CnnParams params = before, trace(c.path.config);
  trace.set_zero();
  CnnWorkspace ws(c.path.config, kBatch, kBatch, c.isa);
  const spmd::optim::SgdMomentum opt{0.05f, 0.9f};
  spmd::models::cnn_train_step(params, trace, opt, batch_.images.data(), batch_.labels.data(), kBatch, nullptr, ws);
  spmd::test::expect_block_errors_below(errors(before, trace), kTolerance, context(c, "train_step"));
}

INSTANTIATE_TEST_SUITE_P(Configs, CnnGradientPaths, ::testing::ValuesIn(cases()), [](const auto& info) {
  return std::string(info.param.path.name) + "_" + spmd::models::cnn_cpu::to_string(info.param.isa);
});

}  // namespace

}  // namespace cnn_gradient_paths_test
