// One evaluation of the multiclass logistic-regression loss and gradient (the logreg
// workload's objective), single thread: the fused kernel (each variant this CPU runs)
// against a two-pass OpenBLAS sgemm baseline and against a memory-read floor; then the
// float64 kernels (spmd logreg --precision float64) against the float32 ones and against
// numpy/scipy's float64 evaluation (logreg_float64_peer.py, run by this benchmark); then the
// weighted evaluation (--sample-weight-key, --class-weight: a weight per row) against the
// unweighted one, per variant, float32 and float64.
//
//   bench_logreg_kernel [rows=50000] [features=784] [classes=10] [repeats=21]
//
// Prints '#' header lines, then one fixed-width row per method: median milliseconds per
// evaluation over `repeats` runs, effective GFLOP/s (4 n F C flops: two GEMMs), and the
// time relative to the fused kernel. Exits non-zero when a method's loss or gradient
// disagrees with the double-accumulated sgemm baseline.
#include <cblas.h>
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "spmd/runtime/large_pages.hpp"
#include "spmd/models/logreg.hpp"
#include "python_peer.hpp"

namespace {

using namespace spmd::models;
using Clock = std::chrono::steady_clock;

double thread_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return 1e3 * static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_nsec);
}

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

// Median wall-clock and thread-CPU milliseconds of `repeats` runs (after one warm-up run
// that pages in the workspace). On a shared machine the CPU time is the steadier figure.
struct Timing {
  double wall_ms, cpu_ms;
};
Timing time_runs(int repeats, const std::function<void()>& run) {
  run();
  std::vector<double> wall, cpu;
  for (int r = 0; r < repeats; ++r) {
    const double c0 = thread_cpu_ms();
    const auto t0 = Clock::now();
    run();
    wall.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    cpu.push_back(thread_cpu_ms() - c0);
  }
  return {median(wall), median(cpu)};
}

// Reads every float of X once (4 independent AVX2 accumulators): the memory floor.
float read_all(const float* x, std::size_t count) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  std::size_t i = 0;
  for (; i + 32 <= count; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_loadu_ps(x + i));
    a1 = _mm256_add_ps(a1, _mm256_loadu_ps(x + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_loadu_ps(x + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_loadu_ps(x + i + 24));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  float sum = 0.0f;
  for (float v : lanes) sum += v;
  for (; i < count; ++i) sum += x[i];
  return sum;
}

// Two-pass baseline: Z = X W (sgemm), softmax row by row, G = X^T (P - Y) (sgemm).
struct SgemmBaseline {
  std::int64_t n;
  int F, C;
  std::vector<float> Z, G;
  std::vector<double> row_loss;  // [n]: for the weighted check
  double loss = 0.0;
  void run(const float* X, const std::int32_t* y, const float* W) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(n), C, F, 1.0f, X, F, W, C, 0.0f, Z.data(), C);
    loss = 0.0;
    for (std::int64_t i = 0; i < n; ++i) {
      float* z = Z.data() + i * C;
      const float m = *std::max_element(z, z + C);
      const float label_logit = z[y[i]];
      float s = 0.0f;
      for (int c = 0; c < C; ++c) s += (z[c] = std::exp(z[c] - m));
      const double row = static_cast<double>(m) + std::log(static_cast<double>(s)) - static_cast<double>(label_logit);
      row_loss[static_cast<std::size_t>(i)] = row;
      loss += row;
      const float inverse = 1.0f / s;
      for (int c = 0; c < C; ++c) z[c] *= inverse;
      z[y[i]] -= 1.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, F, C, static_cast<int>(n), 1.0f, X, F, Z.data(), C, 0.0f,
                G.data(), C);
  }
};

double square_sgemm_gflops(int size, int repeats) {
  std::vector<float> a(static_cast<std::size_t>(size) * size, 0.5f), b(a), c(a.size());
  const double ms = time_runs(repeats, [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, size, size, size, 1.0f, a.data(), size, b.data(), size,
                0.0f, c.data(), size);
  }).cpu_ms;
  return 2.0 * size * size * size / (ms * 1e6);
}

long arg(int argc, char** argv, int index, long fallback) {
  return argc > index ? std::strtol(argv[index], nullptr, 10) : fallback;
}

struct Row {
  std::string name;
  Timing t;
};

// The float64 kernels per variant: milliseconds, against the same variant's float32 row and
// against numpy/scipy's float64 (the Python peer, wall time). Returns the errors.
int float64_rows(const float* X, const std::int32_t* y, std::int64_t n, int F, int C, const std::vector<float>& W32,
                 int repeats, double base_value, const std::vector<Row>& float32_rows) {
  const std::vector<double> W(W32.begin(), W32.end());
  std::vector<double> grad(W.size());
  const auto peer = spmd::bench::run_python_peer(
      __FILE__, "logreg_float64_peer.py",
      std::to_string(n) + " " + std::to_string(F) + " " + std::to_string(C) + " " + std::to_string(repeats));
  const double scipy_ms = peer.contains("ms_per_eval") ? peer["ms_per_eval"].get<double>() : 0.0;
  int errors = 0;
  std::printf("# %-46s %10s %10s %12s %12s\n", "float64 (--precision float64)", "wall ms", "cpu ms", "vs float32",
              "scipy64 / it");
  for (auto kernel : {LogregKernel::avx512, LogregKernel::avx2, LogregKernel::portable}) {
    if (!logreg_kernel_supported(kernel)) continue;
    LogregWorkspace ws(kernel);
    double value = 0.0;
    const Timing t = time_runs(kernel == LogregKernel::portable ? std::max(1, repeats / 7) : repeats, [&] {
      value = logreg_value_and_grad(X, y, n, F, C, W.data(), 0.0, grad.data(), ws);
    });
    const std::string name = std::string("fused ") + to_string(kernel);
    double f32_ms = 0.0;
    for (const auto& r : float32_rows)
      if (r.name == name) f32_ms = r.t.cpu_ms;
    if (!(std::abs(value - base_value) < 1e-5)) {
      ++errors;
      std::printf("# ERROR: float64 %s's loss %.17g differs from the sgemm baseline's %.17g\n", to_string(kernel), value,
                  base_value);
    }
    char vs32[32] = "-", vs_scipy[32] = "-";
    if (f32_ms > 0) std::snprintf(vs32, sizeof vs32, "%.2fx", t.cpu_ms / f32_ms);
    if (scipy_ms > 0) std::snprintf(vs_scipy, sizeof vs_scipy, "%.2fx", scipy_ms / t.wall_ms);
    std::printf("  %-46s %10.2f %10.2f %12s %12s\n", ("float64 " + name).c_str(), t.wall_ms, t.cpu_ms, vs32, vs_scipy);
  }
  if (scipy_ms > 0)
    std::printf("  %-46s %10.2f %10s %12s %12s\n", "numpy/scipy float64 (1 thread)", scipy_ms, "-", "-", "1.00x");
  else
    std::printf("# scipy float64 peer not run: %s\n", peer.value("error", std::string("?")).c_str());
  std::printf("# vs float32: CPU-time ratio to the same variant's float32 row; scipy64 / it: wall-time ratio\n");
  return errors;
}

// The weighted objective (a weight per row: sample x class weights) against the unweighted
// one, each variant in float32 and float64, over the workload's chunks (logreg_range_partials).
// Checks: all-ones weights give the unweighted bits; random weights give the weighted sum of
// the sgemm baseline's row losses. Returns the errors.
template <class T>
int weighted_rows(const float* X, const std::int32_t* y, std::int64_t n, int F, int C, const std::vector<float>& W32,
                  int repeats, const SgemmBaseline& baseline) {
  const std::vector<T> W(W32.begin(), W32.end());
  const std::int64_t chunks = (n + kLogregChunkRows - 1) / kLogregChunkRows;
  const std::size_t record = logreg_partials_size(F, C);
  std::vector<double> plain(static_cast<std::size_t>(chunks) * record), weighted(plain.size()), ones(plain.size());
  const std::vector<double> unit_weights(static_cast<std::size_t>(n), 1.0);
  std::vector<double> weights(static_cast<std::size_t>(n));
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> spread(0.25, 4.0);
  double reference = 0.0;
  for (std::int64_t i = 0; i < n; ++i) {
    weights[static_cast<std::size_t>(i)] = spread(rng);
    reference += weights[static_cast<std::size_t>(i)] * baseline.row_loss[static_cast<std::size_t>(i)];
  }
  int errors = 0;
  const char* precision = sizeof(T) == 8 ? "float64" : "float32";
  for (auto kernel : {LogregKernel::avx512, LogregKernel::avx2, LogregKernel::portable}) {
    if (!logreg_kernel_supported(kernel)) continue;
    LogregWorkspace ws(kernel);
    const int r = kernel == LogregKernel::portable ? std::max(1, repeats / 7) : repeats;
    const auto partials = [&](const double* w, std::vector<double>& out) {
      logreg_range_partials<T>(X, y, n, F, C, W.data(), kLogregChunkRows, out.data(), ws, w);
    };
    // Interleaved, so that a change of the VM's placement hits both alike.
    std::vector<double> plain_ms, weighted_ms;
    partials(nullptr, plain);
    partials(weights.data(), weighted);
    for (int k = 0; k < r; ++k) {
      plain_ms.push_back(time_runs(1, [&] { partials(nullptr, plain); }).cpu_ms);
      weighted_ms.push_back(time_runs(1, [&] { partials(weights.data(), weighted); }).cpu_ms);
    }
    partials(unit_weights.data(), ones);
    double loss = 0.0;
    for (std::int64_t c = 0; c < chunks; ++c) loss += weighted[static_cast<std::size_t>(c) * record];
    const double plain_median = median(plain_ms), weighted_median = median(weighted_ms);
    const bool same_bits = ones == plain;
    const double relative = std::abs(loss - reference) / std::abs(reference);
    if (!same_bits || !(relative < 1e-5)) {
      ++errors;
      std::printf("# ERROR: weighted %s %s: all-ones weights %s the unweighted bits; weighted loss off by %.3g "
                  "relative\n", precision, to_string(kernel), same_bits ? "give" : "do not give", relative);
    }
    std::printf("  %-46s %10.2f %10.2f %11.3fx\n", (std::string(precision) + " " + to_string(kernel)).c_str(),
                plain_median, weighted_median, weighted_median / plain_median);
  }
  return errors;
}

}  // namespace

int main(int argc, char** argv) {
  const std::int64_t n = arg(argc, argv, 1, 50000);
  const int F = static_cast<int>(arg(argc, argv, 2, 784));
  const int C = static_cast<int>(arg(argc, argv, 3, 10));
  const int repeats = static_cast<int>(std::max(1L, arg(argc, argv, 4, 21)));
  openblas_set_num_threads(1);

  std::mt19937 rng(42);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  // X as the workload holds a shard (huge pages where the kernel allows them).
  spmd::runtime::LargeVector<float> X(static_cast<std::size_t>(n) * F);
  std::vector<float> W(static_cast<std::size_t>(F) * C);
  std::vector<std::int32_t> y(static_cast<std::size_t>(n));
  for (auto& v : X) v = unit(rng);
  for (auto& v : W) v = 0.05f * unit(rng);
  for (auto& v : y) v = static_cast<std::int32_t>(rng() % static_cast<unsigned>(C));

  const double flops = 4.0 * static_cast<double>(n) * F * C;
  const double x_mbytes = static_cast<double>(X.size()) * sizeof(float) / 1e6;
  const double gemm_rate = square_sgemm_gflops(1024, 7);
  std::printf("# logistic regression loss + gradient, one evaluation, 1 thread\n");
  std::printf("# rows %lld  features %d  classes %d  repeats %d (median)\n", static_cast<long long>(n), F, C, repeats);
  std::printf("# work: %.3f GFLOP (2 GEMMs); X is %.1f MB\n", flops / 1e9, x_mbytes);
  std::printf("# square sgemm 1024^3 (OpenBLAS %s kernels, 1 thread, CPU time): %.1f GFLOP/s -> FLOP floor %.2f ms\n",
              openblas_get_corename(), gemm_rate, flops / (gemm_rate * 1e6));
  if (std::string(openblas_get_corename()) == "Prescott")
    std::printf("# note: OpenBLAS did not recognise this CPU and runs SSE3 kernels; OPENBLAS_CORETYPE=SkylakeX "
                "(AVX-512) or Haswell (AVX2) in the environment selects faster ones\n");

  std::vector<Row> rows;
  int errors = 0;

  // Baseline result, also the yardstick for the fused variants' answers.
  SgemmBaseline baseline{n, F, C, std::vector<float>(static_cast<std::size_t>(n) * C),
                         std::vector<float>(static_cast<std::size_t>(F) * C), std::vector<double>(static_cast<std::size_t>(n))};
  std::vector<double> grad(W.size());
  const Timing base_t = time_runs(repeats, [&] { baseline.run(X.data(), y.data(), W.data()); });
  const double base_value = baseline.loss / static_cast<double>(n);

  for (auto kernel : {LogregKernel::avx512, LogregKernel::avx2}) {
    if (!logreg_kernel_supported(kernel)) continue;
    LogregWorkspace ws(kernel);
    double value = 0.0;
    const Timing t = time_runs(repeats, [&] {
      value = logreg_value_and_grad(X.data(), y.data(), n, F, C, W.data(), 0.0, grad.data(), ws);
    });
    rows.push_back({std::string("fused ") + to_string(kernel), t});
    double worst = std::abs(value - base_value);
    for (std::size_t k = 0; k < grad.size(); ++k)
      worst = std::max(worst, std::abs(grad[k] - static_cast<double>(baseline.G[k]) / static_cast<double>(n)));
    if (!(worst < 1e-4)) {
      ++errors;
      std::printf("# ERROR: fused %s differs from the sgemm baseline by %.3g\n", to_string(kernel), worst);
    }
  }
  rows.push_back({"two-pass sgemm (OpenBLAS)", base_t});
  volatile float sink = 0.0f;
  rows.push_back({"memory floor (read X once)", time_runs(repeats, [&] { sink = read_all(X.data(), X.size()); })});
  const double floor_ms = flops / (gemm_rate * 1e6);
  rows.push_back({"FLOP floor (square sgemm rate)", {floor_ms, floor_ms}});

  const double fused_ms = rows.front().t.cpu_ms;
  std::printf("# %-32s %10s %10s %10s %10s\n", "method", "wall ms", "cpu ms", "GFLOP/s", "vs fused");
  for (const auto& r : rows)
    std::printf("  %-32s %10.2f %10.2f %10.1f %9.2fx\n", r.name.c_str(), r.t.wall_ms, r.t.cpu_ms,
                flops / (r.t.cpu_ms * 1e6), r.t.cpu_ms / fused_ms);
  std::printf("# GFLOP/s and 'vs fused' use the CPU-time medians\n");
  errors += float64_rows(X.data(), y.data(), n, F, C, W, repeats, base_value, rows);
  std::printf("# %-46s %10s %10s %12s\n", "weighted rows (a weight per row)", "plain ms", "weighted ms",
              "weighted/plain");
  errors += weighted_rows<float>(X.data(), y.data(), n, F, C, W, repeats, baseline);
  errors += weighted_rows<double>(X.data(), y.data(), n, F, C, W, repeats, baseline);
  std::printf("# CPU-time medians of interleaved runs over the workload's %lld-row chunks; all-ones weights give "
              "the unweighted bits, random weights the weighted sum of the baseline's row losses\n",
              static_cast<long long>(kLogregChunkRows));
  std::printf("# errors: %d\n", errors);
  return errors == 0 ? 0 : 1;
}
