// Logistic regression on a GPU: the per-chunk partials of a device's rows (LogregShard in
// float32, LogregShard64 for --precision float64) and the eval predictor. Both perform
// EXACTLY the arithmetic of logreg_kernel_spec.hpp (its float32 or float64 section), so a
// GPU gives the same bits as the CPU kernels: iterates do not depend on how chunks are
// spread over ranks, devices or backends (cuBLAS could not promise that: its algorithm, and
// so its summation order, depends on the matrix shapes).
//
// One evaluation, X resident on the GPU (read twice: logits, then gradient), in T = float or
// double (the shard's other steps are in logreg_shard.cuh):
//   logits_kernel          a thread per (4 rows, lane, group of 10 classes): the spec's lanes of
//                          fma over the features (16 float, or 8 double with x widened from
//                          float32), the spec's tree by shuffles; W enters transposed and zero
//                          padded (WT [C][Fpad])
//   softmax_kernel         thread per row: max, the spec's exp, sum, D = P - Y in place of Z;
//                          the row's loss in double (the spec's log_spec)
// Every operation is an explicit fma or a _rn intrinsic, which nvcc never fuses or
// reorders, so the default --fmad=true cannot change a bit.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "spmd/models/logreg_kernel_spec.hpp"
#include "spmd/models/device_models.hpp"
#include "spmd/models/logreg.hpp"
#include "spmd/backends/cuda/models.hpp"
#include "spmd/backends/cuda/byte_stager.hpp"
#include "spmd/backends/cuda/check.hpp"
#include "spmd/runtime/error.hpp"
#include "spmd/backends/cuda/cuda_device.hpp"
#include "spmd/backends/cuda/device_buffer.hpp"
#include "spmd/backends/cuda/launch.hpp"
#include "spmd/backends/cuda/stream.hpp"
#include "logreg_shard.cuh"

namespace spmd::backends::cuda {

// The device side of the models' interfaces (models/device_models.hpp), on a GPU.
using namespace spmd::models;

namespace {

using cuda::blocks_for;
using cuda::kThreadsPerBlock;

constexpr int kLanes = spec::kLanes;
// Classes one logits thread accumulates for each of its rows (registers); more classes take
// more segments.
constexpr int kLogitClassGroup = spec::kMaxClassGroup;
// Rows one logits thread takes (registers: kLogitRows * kLogitClassGroup accumulators).
template <class T>
constexpr int kLogitRows = sizeof(T) == sizeof(float) ? 4 : 2;
// Features of each row a logits thread loads ahead (memory-level parallelism; registers).
constexpr int kLogitPrefetch = 2;
// Rows per predictor tile: bounds the GPU memory of a predictor (tile * features floats).
constexpr std::int64_t kPredictTileRows = 16384;

// The spec's operations in T, one correctly rounded operation each.
__device__ inline float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ inline double add_rn(double a, double b) { return __dadd_rn(a, b); }
__device__ inline float sub_rn(float a, float b) { return __fsub_rn(a, b); }
__device__ inline double sub_rn(double a, double b) { return __dsub_rn(a, b); }
__device__ inline float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ inline double mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ inline float div_rn(float a, float b) { return __fdiv_rn(a, b); }
__device__ inline double div_rn(double a, double b) { return __ddiv_rn(a, b); }

// spec::max_like_x86.
template <class T>
__device__ inline T max_like_x86(T a, T b) { return a > b ? a : b; }

// spec::exp_spec, operation by operation.
__device__ inline float exp_spec(float t) {
  const float tc = max_like_x86(spec::kExpCutoff, t);
  const float scaled = __fmul_rn(tc, spec::kLog2e);
  const float n = __fsub_rn(__fadd_rn(scaled, spec::kRoundMagic), spec::kRoundMagic);
  float r = fmaf(-n, spec::kLn2Hi, tc);
  r = fmaf(-n, spec::kLn2Lo, r);
  float p = spec::kExpP0;
  p = fmaf(p, r, spec::kExpP1);
  p = fmaf(p, r, spec::kExpP2);
  p = fmaf(p, r, spec::kExpP3);
  p = fmaf(p, r, spec::kExpP4);
  p = fmaf(p, r, spec::kExpP5);
  const float r2 = __fmul_rn(r, r);
  p = fmaf(p, r2, r);
  p = __fadd_rn(p, 1.0f);
  const int exponent = ((isnan(n) ? 0 : static_cast<int>(n)) + 127) << 23;
  const float e = __fmul_rn(p, __int_as_float(exponent));
  return t < spec::kExpCutoff ? 0.0f : e;
}

// The Taylor coefficients one by one: scalar constexpr values are usable in device code.
template <int k>
constexpr double kTaylor = spec::kExp64Taylor[k];

// spec::exp_spec (double), operation by operation.
__device__ inline double exp_spec(double t) {
  const double tc = max_like_x86(spec::kExp64Cutoff, t);
  const double n = __dsub_rn(__dadd_rn(__dmul_rn(tc, spec::kLog2e64), spec::kRoundMagic64), spec::kRoundMagic64);
  double r = fma(-n, spec::kLn2Hi64, tc);
  r = fma(-n, spec::kLn2Lo64, r);
  static_assert(spec::kExp64Degree == 13, "the Horner steps below are written out for degree 13");
  double p = kTaylor<0>;
  p = fma(p, r, kTaylor<1>);
  p = fma(p, r, kTaylor<2>);
  p = fma(p, r, kTaylor<3>);
  p = fma(p, r, kTaylor<4>);
  p = fma(p, r, kTaylor<5>);
  p = fma(p, r, kTaylor<6>);
  p = fma(p, r, kTaylor<7>);
  p = fma(p, r, kTaylor<8>);
  p = fma(p, r, kTaylor<9>);
  p = fma(p, r, kTaylor<10>);
  p = fma(p, r, kTaylor<11>);
  p = fma(p, r, kTaylor<12>);
  p = fma(p, r, kTaylor<13>);
  const long long exponent = ((isnan(n) ? 0LL : static_cast<long long>(n)) + 1023LL) << 52;
  const double e = __dmul_rn(p, __longlong_as_double(exponent));
  return t < spec::kExp64Cutoff ? 0.0 : e;
}

// The series' coefficients one by one (as kTaylor).
template <int j>
constexpr double kLogSeries = spec::kLog64Series[j];

// spec::log_spec, operation by operation: the row loss's log with the CPU's bits.
__device__ inline double log_spec(double s) {
  if (!(s > 0.0)) return s == s ? __longlong_as_double(0x7ff8000000000000LL) : s;
  if (isinf(s)) return s;
  unsigned long long bits = static_cast<unsigned long long>(__double_as_longlong(s));
  long long k = -1023;
  if ((bits >> 52) == 0) {  // subnormal: scaled by 2^54 first
    bits = static_cast<unsigned long long>(__double_as_longlong(__dmul_rn(s, 18014398509481984.0)));
    k -= 54;
  }
  k += static_cast<long long>(bits >> 52);
  double m = __longlong_as_double(static_cast<long long>((bits & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL));
  if (m > spec::kSqrt2) {
    m = __dmul_rn(m, 0.5);
    k = k + 1;
  }
  const double f = __ddiv_rn(__dsub_rn(m, 1.0), __dadd_rn(m, 1.0));
  const double f2 = __dmul_rn(f, f);
  static_assert(spec::kLog64Terms == 11, "the Horner steps below are written out for 11 terms");
  double p = kLogSeries<0>;
  p = fma(p, f2, kLogSeries<1>);
  p = fma(p, f2, kLogSeries<2>);
  p = fma(p, f2, kLogSeries<3>);
  p = fma(p, f2, kLogSeries<4>);
  p = fma(p, f2, kLogSeries<5>);
  p = fma(p, f2, kLogSeries<6>);
  p = fma(p, f2, kLogSeries<7>);
  p = fma(p, f2, kLogSeries<8>);
  p = fma(p, f2, kLogSeries<9>);
  p = fma(p, f2, kLogSeries<10>);
  const double kd = static_cast<double>(k);  // exact: |k| < 2^11
  return fma(kd, spec::kLn2Hi64, fma(kd, spec::kLn2Lo64, __dmul_rn(f, p)));
}

// z[r * C + c] = the spec's logit of row r, class c. `lanes` consecutive threads (a segment)
// take kLogitRows rows and up to kLogitClassGroup classes; thread j is the spec's lane j of each
// of its rows, accumulating fma((T) x[lanes k + j], WT[c][lanes k + j]) over k (x = 0 past F),
// and the spec's tree (v[j] + v[j + n/2] for n = lanes, lanes/2, ..., 2) is a shuffle tree
// within the segment. So a segment reads each row 64 bytes at a time, coalesced, and each value
// of W it loads serves all its rows: with one row a thread, the 10 loads of W per x were 31 KB
// of L1 traffic a row, and the load pipe, not DRAM, was the limit (tools/bench/README.md,
// fourth run). WT [C][Fpad], zero for f >= F.
template <class T>
__global__ void logits_kernel(const float* X, std::int64_t rows, int features, int padded_features, const T* WT,
                              int classes, T* z) {
  constexpr int lanes = spec::kLanesOf<T>;
  constexpr int R = kLogitRows<T>;
  static_assert(32 % lanes == 0, "a segment lies in one warp");
  const int groups = (classes + kLogitClassGroup - 1) / kLogitClassGroup;
  const std::int64_t total = (rows + R - 1) / R * groups * lanes;
  // blockDim and the grid's stride are multiples of 32: a thread keeps its lane and its
  // segment, and a segment's threads enter and leave the loop together (total is a multiple of
  // lanes), as the shuffles need.
  const int j = static_cast<int>(threadIdx.x % lanes);
  const unsigned segment = (lanes == 32 ? ~0u : (1u << lanes) - 1u) << (threadIdx.x % 32 - j);
  for (std::int64_t i = grid_start(); i < total; i += grid_stride()) {
    const std::int64_t t = i / lanes;
    const std::int64_t r0 = t / groups * R;
    const int c0 = static_cast<int>(t % groups) * kLogitClassGroup;
    const int nc = min(kLogitClassGroup, classes - c0);
    const int nr = static_cast<int>(min(static_cast<std::int64_t>(R), rows - r0));
    // Rows past the end read the last row again (no branch in the loop); they are not stored.
    const float* x[R];
#pragma unroll
    for (int q = 0; q < R; ++q) x[q] = X + (r0 + min(q, nr - 1)) * features;
    const T* w = WT + static_cast<std::int64_t>(c0) * padded_features;
    T acc[R][kLogitClassGroup];
#pragma unroll
    for (int q = 0; q < R; ++q)
#pragma unroll
      for (int cc = 0; cc < kLogitClassGroup; ++cc) acc[q][cc] = T(0);
    // kLogitPrefetch of the lane's features (of each row) are loaded before their fmas: one load
    // in flight a thread left the kernel latency-bound. The fmas keep the lane's order (f
    // ascending), so the bits do not change. Every lane of a segment takes the same number of
    // passes (padded_features is a multiple of lanes).
    int f = j;
    for (; f + (kLogitPrefetch - 1) * lanes < padded_features; f += kLogitPrefetch * lanes) {
      T xs[kLogitPrefetch][R];
#pragma unroll
      for (int u = 0; u < kLogitPrefetch; ++u)
#pragma unroll
        for (int q = 0; q < R; ++q) xs[u][q] = f + u * lanes < features ? static_cast<T>(x[q][f + u * lanes]) : T(0);
#pragma unroll
      for (int u = 0; u < kLogitPrefetch; ++u)
#pragma unroll
        for (int cc = 0; cc < kLogitClassGroup; ++cc)
          if (cc < nc) {
            const T wv = __ldg(w + static_cast<std::int64_t>(cc) * padded_features + f + u * lanes);
#pragma unroll
            for (int q = 0; q < R; ++q) acc[q][cc] = fma_rn(xs[u][q], wv, acc[q][cc]);
          }
    }
    for (; f < padded_features; f += lanes) {
      T xf[R];
#pragma unroll
      for (int q = 0; q < R; ++q) xf[q] = f < features ? static_cast<T>(x[q][f]) : T(0);
#pragma unroll
      for (int cc = 0; cc < kLogitClassGroup; ++cc)
        if (cc < nc) {
          const T wv = __ldg(w + static_cast<std::int64_t>(cc) * padded_features + f);
#pragma unroll
          for (int q = 0; q < R; ++q) acc[q][cc] = fma_rn(xf[q], wv, acc[q][cc]);
        }
    }
#pragma unroll
    for (int q = 0; q < R; ++q)
#pragma unroll
      for (int cc = 0; cc < kLogitClassGroup; ++cc) {
        if (cc >= nc) break;  // nc is the same for the whole segment
        T v = acc[q][cc];
#pragma unroll
        for (int offset = lanes / 2; offset > 0; offset /= 2) v = add_rn(v, __shfl_down_sync(segment, v, offset, lanes));
        if (j == 0 && q < nr) z[(r0 + q) * classes + c0 + cc] = v;
      }
  }
}

// Per row: z <- softmax(z) - onehot(label) (the spec's softmax, in place) and the row's loss
// in double, ((double)m + log_spec((double)s)) - (double)z[label], as the CPU kernels.
// Weighted rows (row_weights not null): d_c * (T)w and w * loss, the CPU's two products.
template <class T>
__global__ void softmax_kernel(T* z, const std::int32_t* labels, const double* row_weights, std::int64_t rows, int classes,
                               double* row_loss) {
  for (std::int64_t r = grid_start(); r < rows; r += grid_stride()) {
    T* zr = z + r * classes;
    const std::int32_t y = labels[r];
    const T z_label = zr[y];
    T m = zr[0];
    for (int c = 1; c < classes; ++c) m = max_like_x86(m, zr[c]);
    T s = T(0);
    for (int c = 0; c < classes; ++c) {
      const T e = exp_spec(sub_rn(zr[c], m));
      zr[c] = e;
      s = c == 0 ? e : add_rn(s, e);
    }
    const T inverse = div_rn(T(1), s);
    for (int c = 0; c < classes; ++c) zr[c] = sub_rn(mul_rn(zr[c], inverse), c == y ? T(1) : T(0));
    const double loss =
        __dsub_rn(__dadd_rn(static_cast<double>(m), log_spec(static_cast<double>(s))), static_cast<double>(z_label));
    if (row_weights == nullptr) {
      row_loss[r] = loss;
    } else {
      const double w = row_weights[r];
      const T wt = static_cast<T>(w);
      for (int c = 0; c < classes; ++c) zr[c] = mul_rn(zr[c], wt);
      row_loss[r] = __dmul_rn(w, loss);
    }
  }
}

// The shard's Kernels (logreg_shard.cuh) in T.
template <class T>
struct Kernels {
  using Scalar = T;
  static constexpr int kLanes = spec::kLanesOf<T>;
  static constexpr bool kFloat = std::is_same_v<T, float>;
  static void logits(const float* X, std::int64_t rows, int features, const T* WT, int classes, T* z,
                     cudaStream_t stream) {
    const std::int64_t groups = (classes + kLogitClassGroup - 1) / kLogitClassGroup;
    const std::int64_t row_groups = (rows + kLogitRows<T> - 1) / kLogitRows<T>;
    logits_kernel<T><<<blocks_for(row_groups * groups * kLanes), kThreadsPerBlock, 0, stream>>>(
        X, rows, features, spec::round_up(features, kLanes), WT, classes, z);
    SPMD_CHECK_CUDA_LAUNCH(kFloat ? "logreg logits kernel" : "logreg float64 logits kernel");
  }
  static void softmax(T* z, const std::int32_t* labels, const double* row_weights, std::int64_t rows, int classes,
                      double* row_loss, cudaStream_t stream) {
    softmax_kernel<T><<<blocks_for(rows), kThreadsPerBlock, 0, stream>>>(z, labels, row_weights, rows, classes, row_loss);
    SPMD_CHECK_CUDA_LAUNCH(kFloat ? "logreg softmax kernel" : "logreg float64 softmax kernel");
  }
};

std::size_t transposed_size(int features, int classes) {
  return static_cast<std::size_t>(classes) * spec::round_up(features, kLanes);
}

class CudaLogregPredictor final : public DevicePredictor {
 public:
  CudaLogregPredictor(const runtime::DeviceInfo& device, const LogregParameters& p, std::int64_t max_rows)
      : ordinal_((cuda::use_cuda_device(device, "CUDA logreg predictor"), device.ordinal)),
        features_(p.features),
        classes_(p.classes),
        max_rows_(max_rows),
        tile_rows_(std::clamp<std::int64_t>(max_rows, 1, kPredictTileRows)),
        bias_(p.bias),
        WT_(transposed_size(p.features, p.classes), "logreg weights (transposed)"),
        X_(static_cast<std::size_t>(tile_rows_) * p.features, "logreg predictor rows"),
        Z_(static_cast<std::size_t>(tile_rows_) * p.classes, "logreg predictor logits"),
        Z_host_(static_cast<std::size_t>(tile_rows_) * p.classes, "logreg predictor logits (host)") {
    cuda::PinnedBuffer<float> staging(transposed_size(p.features, p.classes), "logreg weight staging");
    upload_transposed(p.W.data(), p.features, p.classes, kLanes, staging, WT_, stream_.get());
    stream_.synchronize_copies("copying the logreg weights to the GPU");
  }

  ~CudaLogregPredictor() override { cuda::set_current_gpu_noexcept(ordinal_); }

  void predict(const float* samples, std::int64_t rows, std::int32_t* classes_out, float* probs_out) override {
    check_rows(rows);
    if (rows == 0) return;
    cuda::set_current_gpu(ordinal_);
    for (std::int64_t first = 0; first < rows; first += tile_rows_) {
      const std::int64_t n = std::min(tile_rows_, rows - first);
      X_.upload(samples + first * features_, static_cast<std::size_t>(n * features_), stream_.get());
      finish_tile(first, n, classes_out, probs_out);
    }
  }

  bool decodes_bytes() const override { return true; }

  void predict_bytes(const std::uint8_t* samples, std::int64_t rows, const ByteTable& table,
                     std::int32_t* classes_out, float* probs_out) override {
    check_rows(rows);
    if (rows == 0) return;
    cuda::set_current_gpu(ordinal_);
    if (!stager_)  // made at the first byte batch (float data never needs it), then reused
      stager_.emplace(static_cast<std::size_t>(tile_rows_ * features_), "CUDA logreg predictor");
    stager_->run(samples, rows, features_, tile_rows_, table, X_.data(), stream_.get(),
                 [&](std::int64_t first, std::int64_t n) { finish_tile(first, n, classes_out, probs_out); });
  }

 private:
  void check_rows(std::int64_t rows) const {
    if (rows < 0 || rows > max_rows_)
      throw Error("CUDA logreg predictor: batch of " + std::to_string(rows) + " rows; it was made for max_rows = " +
                  std::to_string(max_rows_));
  }

  // Rows [first, first + n) of the batch are in X_ (or queued there on the stream): their
  // logits come back to the host, which picks the class and the probabilities with the CPU
  // predictor's own code (the same bits on every backend).
  void finish_tile(std::int64_t first, std::int64_t n, std::int32_t* classes_out, float* probs_out) {
    const cudaStream_t s = stream_.get();
    Kernels<float>::logits(X_.data(), n, features_, WT_.data(), classes_, Z_.data(), s);
    Z_.download(Z_host_.data(), static_cast<std::size_t>(n * classes_), s);
    stream_.synchronize("predicting logreg classes on the GPU");
    non_finite_rows_ += logreg_logits_to_outputs(Z_host_.data(), n, classes_, classes_,
                                                 bias_.empty() ? nullptr : bias_.data(), classes_out + first,
                                                 probs_out ? probs_out + first * classes_ : nullptr);
  }

  int ordinal_;
  int features_, classes_;
  std::int64_t max_rows_, tile_rows_;
  cuda::Stream stream_;
  std::vector<float> bias_;                          // [C] or empty
  cuda::DeviceBuffer<float> WT_;                   // [C, Fpad]
  cuda::DeviceBuffer<float> X_;                    // [tile, F]
  cuda::DeviceBuffer<float> Z_;                    // [tile, C]
  cuda::PinnedBuffer<float> Z_host_;               // [tile, C]
  std::optional<cuda::ByteStager> stager_;         // byte samples: tiles of [tile, F] bytes
};

}  // namespace

std::unique_ptr<LogregShard> make_logreg_shard_cuda(const runtime::DeviceInfo& device, const float* X,
                                                    const std::int32_t* labels, std::int64_t rows, int features,
                                                    int classes, std::int64_t chunk_rows, const double* row_weights) {
  check_shard_shape(features, classes, rows, chunk_rows, "CUDA logreg shard");
  return std::make_unique<CudaLogregShardOf<Kernels<float>, LogregShard>>(device, X, labels, rows, features, classes,
                                                                          chunk_rows, row_weights);
}

std::unique_ptr<LogregShard64> make_logreg_shard64_cuda(const runtime::DeviceInfo& device, const float* X,
                                                        const std::int32_t* labels, std::int64_t rows, int features,
                                                        int classes, std::int64_t chunk_rows, const double* row_weights) {
  check_shard_shape(features, classes, rows, chunk_rows, "CUDA logreg float64 shard");
  return std::make_unique<CudaLogregShardOf<Kernels<double>, LogregShard64>>(device, X, labels, rows, features,
                                                                             classes, chunk_rows, row_weights);
}

std::unique_ptr<DevicePredictor> make_logreg_predictor_cuda(const runtime::DeviceInfo& device,
                                                            const LogregParameters& parameters,
                                                            std::int64_t max_rows) {
  const auto& p = parameters;
  check_shape(p.features, p.classes, "CUDA logreg predictor");
  if (p.W.size() != static_cast<std::size_t>(p.features) * static_cast<std::size_t>(p.classes))
    throw Error("CUDA logreg predictor: W has " + std::to_string(p.W.size()) +
                " values, expected features * classes = " + std::to_string(static_cast<std::int64_t>(p.features) * p.classes));
  if (p.has_intercept() && p.bias.size() != static_cast<std::size_t>(p.classes))
    throw Error("CUDA logreg predictor: the intercept has " + std::to_string(p.bias.size()) + " values, expected " +
                std::to_string(p.classes));
  if (max_rows < 0) throw Error("CUDA logreg predictor: max_rows must be >= 0, got " + std::to_string(max_rows));
  return std::make_unique<CudaLogregPredictor>(device, parameters, max_rows);
}

}  // namespace spmd::backends::cuda
