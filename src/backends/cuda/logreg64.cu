// Logistic regression on a GPU in float64 (spmd logreg --precision float64): the per-chunk
// partials of a device's rows (LogregShard64) with EXACTLY the arithmetic of the float64
// section of logreg_kernel_spec.hpp, so a GPU gives the CPU kernels' bits in float64 too.
//   logits64_kernel   thread per (row, class): 8 double fma lanes over the features (x
//                     widened from float32), the spec's 4-2-1 tree; WT [C][Fpad64] double
//   softmax64_kernel  thread per row: max, exp64_spec, sum, D = P - Y in place of Z; the
//                     row's (max, sum, z_label) go to the host
// then the shard's shared steps in double (logreg_shard.cuh). Every double operation is an
// explicit fma or a _rn intrinsic, which nvcc never fuses or reorders.
#include <cstdint>
#include <memory>

#include "spmd/backends/cuda/models.hpp"
#include "spmd/models/device_models.hpp"
#include "logreg_shard.cuh"

namespace spmd::backends::cuda {

namespace {

constexpr int kLanes64 = spec::kLanes64;
// The Taylor coefficients one by one: scalar constexpr values are usable in device code.
template <int k>
constexpr double kTaylor = spec::kExp64Taylor[k];

__device__ inline double max_like_x86(double a, double b) { return a > b ? a : b; }

// spec::exp64_spec, operation by operation.
__device__ inline double exp64_spec(double t) {
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

// z[r * C + c] = the spec's float64 logit of row r, class c.
__global__ void logits64_kernel(const float* X, std::int64_t rows, int features, int padded_features,
                                const double* WT, int classes, double* z) {
  const std::int64_t total = rows * classes;
  for (std::int64_t i = grid_start(); i < total; i += grid_stride()) {
    const std::int64_t r = i / classes;
    const int c = static_cast<int>(i - r * classes);
    const float* x = X + r * features;
    const double* w = WT + static_cast<std::int64_t>(c) * padded_features;
    double acc[kLanes64];
#pragma unroll
    for (int j = 0; j < kLanes64; ++j) acc[j] = 0.0;
    for (int k = 0; k < padded_features; k += kLanes64) {
#pragma unroll
      for (int j = 0; j < kLanes64; ++j) {
        const int f = k + j;
        acc[j] = fma(f < features ? static_cast<double>(x[f]) : 0.0, w[f], acc[j]);
      }
    }
    double l1[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) l1[j] = __dadd_rn(acc[j], acc[j + 4]);
    z[i] = __dadd_rn(__dadd_rn(l1[0], l1[2]), __dadd_rn(l1[1], l1[3]));
  }
}

// Per row: z <- softmax(z) - onehot(label) in place, stats[r] = (m, s, z[label]).
__global__ void softmax64_kernel(double* z, const std::int32_t* labels, std::int64_t rows, int classes, double* stats) {
  for (std::int64_t r = grid_start(); r < rows; r += grid_stride()) {
    double* zr = z + r * classes;
    const std::int32_t y = labels[r];
    const double z_label = zr[y];
    double m = zr[0];
    for (int c = 1; c < classes; ++c) m = max_like_x86(m, zr[c]);
    double s = 0.0;
    for (int c = 0; c < classes; ++c) {
      const double e = exp64_spec(__dsub_rn(zr[c], m));
      zr[c] = e;
      s = c == 0 ? e : __dadd_rn(s, e);
    }
    const double inverse = __ddiv_rn(1.0, s);
    for (int c = 0; c < classes; ++c) zr[c] = __dsub_rn(__dmul_rn(zr[c], inverse), c == y ? 1.0 : 0.0);
    stats[r * kRowStats + 0] = m;
    stats[r * kRowStats + 1] = s;
    stats[r * kRowStats + 2] = z_label;
  }
}

struct Float64Kernels {
  using T = double;
  static constexpr int kLanes = kLanes64;
  static void logits(const float* X, std::int64_t rows, int features, const double* WT, int classes, double* z,
                     cudaStream_t stream) {
    logits64_kernel<<<blocks_for(rows * classes), kThreadsPerBlock, 0, stream>>>(
        X, rows, features, spec::round_up(features, kLanes64), WT, classes, z);
    SPMD_CHECK_CUDA_LAUNCH("logreg float64 logits kernel");
  }
  static void softmax(double* z, const std::int32_t* labels, std::int64_t rows, int classes, double* stats,
                      cudaStream_t stream) {
    softmax64_kernel<<<blocks_for(rows), kThreadsPerBlock, 0, stream>>>(z, labels, rows, classes, stats);
    SPMD_CHECK_CUDA_LAUNCH("logreg float64 softmax kernel");
  }
};

}  // namespace

std::unique_ptr<models::LogregShard64> make_logreg_shard64_cuda(const runtime::DeviceInfo& device, const float* X,
                                                                const std::int32_t* labels, std::int64_t rows,
                                                                int features, int classes, std::int64_t chunk_rows) {
  check_shard_shape(features, classes, rows, chunk_rows, "CUDA logreg float64 shard");
  return std::make_unique<CudaLogregShardOf<Float64Kernels, models::LogregShard64>>(device, X, labels, rows, features,
                                                                                    classes, chunk_rows);
}

}  // namespace spmd::backends::cuda
