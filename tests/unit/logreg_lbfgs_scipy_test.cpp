// L-BFGS on a small generated multiclass logistic-regression problem reaches the minimum
// scipy's L-BFGS-B finds (tools/logreg_scipy_reference.py, run here on the same data).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "spmd/models/logreg.hpp"
#include "spmd/optim/lbfgs.hpp"

// Its own namespace: the unity build compiles this file with others whose helpers share names.
namespace logreg_lbfgs_scipy_test {

namespace {

namespace fs = std::filesystem;
using namespace spmd::models;
using namespace spmd::optim;

constexpr const char* kPython = "/usr/bin/python3";

struct Problem {
  std::int64_t rows = 1500;
  int features = 24, classes = 6;
  double l2 = 1e-3;
  std::vector<float> X;
  std::vector<std::int32_t> labels;
};

// Labels from a random linear model plus noise: overlapping classes, a unique minimum.
Problem make_problem() {
  Problem p;
  std::mt19937 rng(20240611u);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<float> truth(static_cast<std::size_t>(p.features) * p.classes);
  for (auto& v : truth) v = 2.0f * unit(rng);
  p.X.resize(static_cast<std::size_t>(p.rows) * p.features);
  for (auto& v : p.X) v = unit(rng);
  p.labels.resize(static_cast<std::size_t>(p.rows));
  for (std::int64_t i = 0; i < p.rows; ++i) {
    int best = 0;
    double best_score = -1e300;
    for (int c = 0; c < p.classes; ++c) {
      double score = 3.0 * unit(rng);
      for (int f = 0; f < p.features; ++f) score += double(p.X[i * p.features + f]) * truth[f * p.classes + c];
      if (score > best_score) best_score = score, best = c;
    }
    p.labels[i] = best;
  }
  return p;
}

void write_problem(const Problem& p, const fs::path& path) {
  std::ofstream out(path, std::ios::binary);
  const std::int64_t header[3] = {p.rows, p.features, p.classes};
  out.write("SPMDLR1\0", 8);
  out.write(reinterpret_cast<const char*>(header), sizeof header);
  out.write(reinterpret_cast<const char*>(&p.l2), sizeof p.l2);
  out.write(reinterpret_cast<const char*>(p.X.data()), static_cast<std::streamsize>(p.X.size() * sizeof(float)));
  out.write(reinterpret_cast<const char*>(p.labels.data()),
            static_cast<std::streamsize>(p.labels.size() * sizeof(std::int32_t)));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

// The fast float kernel as an L-BFGS objective (what the logreg workload minimises).
struct KernelObjective {
  const Problem& p;
  LogregWorkspace workspace;
  std::vector<double> grad;
  float value_and_grad(std::span<const float> W, std::span<float> g) {
    grad.resize(W.size());
    const double value = logreg_value_and_grad(p.X.data(), p.labels.data(), p.rows, p.features, p.classes, W.data(),
                                               p.l2, grad.data(), workspace);
    for (std::size_t k = 0; k < W.size(); ++k) g[k] = static_cast<float>(grad[k]);
    return static_cast<float>(value);
  }
};

// The same objective in double throughout, written out here (independent of the kernel).
struct DoubleObjective {
  const Problem& p;
  double value_and_grad(std::span<const double> W, std::span<double> g) {
    const int F = p.features, C = p.classes;
    std::vector<double> z(C);
    double loss = 0.0;
    for (auto& v : g) v = 0.0;
    for (std::int64_t i = 0; i < p.rows; ++i) {
      const float* x = &p.X[i * F];
      for (int c = 0; c < C; ++c) {
        z[c] = 0.0;
        for (int f = 0; f < F; ++f) z[c] += x[f] * W[f * C + c];
      }
      double m = z[0];
      for (double v : z) m = std::max(m, v);
      double s = 0.0;
      for (double v : z) s += std::exp(v - m);
      loss += m + std::log(s) - z[p.labels[i]];
      for (int c = 0; c < C; ++c) {
        const double delta = std::exp(z[c] - m) / s - (c == p.labels[i] ? 1.0 : 0.0);
        for (int f = 0; f < F; ++f) g[f * C + c] += x[f] * delta;
      }
    }
    double squares = 0.0;
    for (std::size_t k = 0; k < W.size(); ++k) {
      g[k] = g[k] / static_cast<double>(p.rows) + p.l2 * W[k];
      squares += W[k] * W[k];
    }
    return loss / static_cast<double>(p.rows) + 0.5 * p.l2 * squares;
  }
};

class LogregScipy : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (std::system((std::string(kPython) + " -c 'import numpy, scipy' >/dev/null 2>&1").c_str()) != 0) {
      skip_reason_ = std::string(kPython) + " with numpy and scipy is not available (Debian: python3-scipy)";
      return;
    }
    problem_ = new Problem(make_problem());
    const fs::path dir = fs::temp_directory_path() / ("spmd_logreg_scipy_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    write_problem(*problem_, dir / "problem.bin");
    const std::string command = std::string(kPython) + " " SPMD_SOURCE_DIR "/tools/logreg_scipy_reference.py " +
                                (dir / "problem.bin").string() + " " + (dir / "result.json").string();
    const int rc = std::system(command.c_str());
    std::ifstream in(dir / "result.json");
    if (rc == 0 && in) reference_ = new nlohmann::json(nlohmann::json::parse(in));
    fs::remove_all(dir);
  }
  static void TearDownTestSuite() {
    delete problem_;
    delete reference_;
    problem_ = nullptr;
    reference_ = nullptr;
  }
  void SetUp() override {
    if (!skip_reason_.empty()) GTEST_SKIP() << skip_reason_;
    ASSERT_NE(reference_, nullptr) << "tools/logreg_scipy_reference.py failed";
    ASSERT_TRUE((*reference_)["converged"].get<bool>());
    reference_value_ = (*reference_)["value"].get<double>();
    ASSERT_LT(reference_value_, std::log(double(problem_->classes)));  // it did learn something
  }

  static inline Problem* problem_ = nullptr;
  static inline nlohmann::json* reference_ = nullptr;
  static inline std::string skip_reason_;
  double reference_value_ = 0.0;
};

TEST_F(LogregScipy, DoubleSolverReachesScipyMinimum) {
  for (auto kind : {LineSearchKind::zoom, LineSearchKind::backtracking}) {
    DoubleObjective f{*problem_};
    LBFGSParams<double> params;
    params.linesearch = kind;
    params.maxiter = 1000;
    params.tol = 1e-8;
    const std::vector<double> W0(problem_->features * problem_->classes, 0.0);
    const auto r = lbfgs_minimize<double>(f, std::span<const double>(W0), params);
    EXPECT_EQ(r.status, LBFGSStatus::converged) << to_string(kind) << ": " << to_string(r.status);
    EXPECT_NEAR(r.value, reference_value_, 1e-9 * reference_value_) << to_string(kind);
  }
}

TEST_F(LogregScipy, FloatSolverWithFastKernelReachesScipyMinimum) {
  for (auto kind : {LineSearchKind::zoom, LineSearchKind::backtracking}) {
    KernelObjective f{*problem_, LogregWorkspace{}, {}};
    LBFGSParams<float> params;
    params.linesearch = kind;
    params.maxiter = 300;
    params.tol = 1e-5f;
    const std::vector<float> W0(problem_->features * problem_->classes, 0.0f);
    const auto r = lbfgs_minimize<float>(f, std::span<const float>(W0), params);
    // In float, near the minimum f stops decreasing measurably and the line search may
    // stall (or crawl on rounding noise) before ||grad|| <= tol: the value reached is what
    // matters.
    EXPECT_NE(r.status, LBFGSStatus::non_finite) << to_string(kind);
    std::printf("float %s: %s after %d iterations, %lld evaluations, f = %.9g (scipy %.9g), |grad| = %.3g\n",
                to_string(kind), to_string(r.status), r.iterations, static_cast<long long>(r.evaluations),
                double(r.value), reference_value_, double(r.error));
    EXPECT_NEAR(r.value, reference_value_, 1e-6 * reference_value_)
        << to_string(kind) << ": " << to_string(r.status) << " after " << r.iterations << " iterations";
  }
}

}  // namespace

}  // namespace logreg_lbfgs_scipy_test
