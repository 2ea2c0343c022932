// The float64 logistic-regression kernel with AVX2 + FMA (the build's baseline). Each of
// the spec's 8 double lanes lives in a pair of 4-lane registers (lo: lanes 0-3, hi: 4-7);
// X is read as float32 and widened in registers.
//   Logits: one row at a time, up to 4 classes per pass (8 accumulators).
//   Gradient: 8 features x up to 6 classes of G in registers over the tile's rows.
//   Softmax: the portable variant's.
// The arithmetic is exactly logreg_kernel_spec.hpp's float64 section (tested against the
// portable variant).
#pragma GCC optimize("fp-contract=off")  // only the explicit fmadd may fuse

#include <immintrin.h>

#include <cstdint>

#include "spmd/models/logreg_kernel_spec.hpp"

namespace spmd::models::logreg_detail {
namespace {

#define SPMD_INLINE inline __attribute__((always_inline))

constexpr int kLogitClassGroup = 4;  // one transposed register of logits
constexpr int kGradClassGroup = 6;

// 4 floats of x (the first `valid`; the rest 0), widened.
SPMD_INLINE __m256d load4(const float* x, int valid) {
  if (valid >= 4) return _mm256_cvtps_pd(_mm_loadu_ps(x));
  const __m128i mask = _mm_cmpgt_epi32(_mm_set1_epi32(valid), _mm_setr_epi32(0, 1, 2, 3));
  return _mm256_cvtps_pd(_mm_maskload_ps(x, mask));
}

// Lane c of the result = tree8 sum of class c's lanes (lo[c], hi[c]); 0 for c >= n.
template <int n>
SPMD_INLINE __m256d transpose_reduce(const __m256d* lo, const __m256d* hi) {
  __m256d l1[4], v[2];
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) l1[c] = c < n ? _mm256_add_pd(lo[c], hi[c]) : _mm256_setzero_pd();
#pragma GCC unroll 2
  for (int c = 0; c < 2; ++c)  // halves: classes c, c+2
    v[c] = _mm256_add_pd(_mm256_permute2f128_pd(l1[c], l1[c + 2], 0x20), _mm256_permute2f128_pd(l1[c], l1[c + 2], 0x31));
  return _mm256_add_pd(_mm256_unpacklo_pd(v[0], v[1]), _mm256_unpackhi_pd(v[0], v[1]));
}

template <int n>
void logits_group(const float* X, int rows, const TileShape& shape, const double* wt, double* Z, const float* next_X,
                  int next_rows) {
  const int F = shape.features, Fpad = shape.padded_features;
  alignas(32) double z[4];
  for (int i = 0; i < rows; ++i) {
    const float* x = X + static_cast<std::int64_t>(i) * F;
    const float* ahead = i < next_rows ? next_X + static_cast<std::int64_t>(i) * F : nullptr;
    __m256d lo[n], hi[n];
#pragma GCC unroll 4
    for (int c = 0; c < n; ++c) lo[c] = hi[c] = _mm256_setzero_pd();
    for (int k = 0; k < Fpad; k += kLanes64) {
      const __m256d xl = load4(x + k, F - k), xh = load4(x + k + 4, F - k - 4);
      if (ahead != nullptr && k % 16 == 0) _mm_prefetch(reinterpret_cast<const char*>(ahead + k), _MM_HINT_T1);
#pragma GCC unroll 4
      for (int c = 0; c < n; ++c) {
        lo[c] = _mm256_fmadd_pd(xl, _mm256_load_pd(wt + c * Fpad + k), lo[c]);
        hi[c] = _mm256_fmadd_pd(xh, _mm256_load_pd(wt + c * Fpad + k + 4), hi[c]);
      }
    }
    _mm256_store_pd(z, transpose_reduce<n>(lo, hi));
    for (int c = 0; c < n; ++c) Z[i * shape.padded_classes + c] = z[c];
  }
}

void logits_avx2_64(const float* X, int rows, const TileShape& shape, const double* WT, double* Z, const float* next_X,
                    int next_rows) {
  for_each_class_group<kLogitClassGroup>(shape.classes, [&](int c0, auto n) {
    // The first class group alone prefetches (the next tile's rows are the same for all).
    logits_group<decltype(n)::value>(X, rows, shape, WT + static_cast<std::int64_t>(c0) * shape.padded_features,
                                     Z + c0, next_X, c0 == 0 ? next_rows : 0);
  });
}

template <int n>
SPMD_INLINE void gradient_block(const float* X, const double* D, int rows, const TileShape& shape, int f0, int c0,
                                double* G) {
  const int F = shape.features, Fpad = shape.padded_features;
  __m256d lo[n], hi[n];
#pragma GCC unroll 6
  for (int c = 0; c < n; ++c) {
    lo[c] = _mm256_load_pd(G + (c0 + c) * Fpad + f0);
    hi[c] = _mm256_load_pd(G + (c0 + c) * Fpad + f0 + 4);
  }
  for (int i = 0; i < rows; ++i) {
    const float* x = X + static_cast<std::int64_t>(i) * F + f0;
    const double* d = D + c0 * kTileRows + i;
    const __m256d xl = load4(x, F - f0), xh = load4(x + 4, F - f0 - 4);
#pragma GCC unroll 6
    for (int c = 0; c < n; ++c) {
      const __m256d dc = _mm256_broadcast_sd(d + c * kTileRows);
      lo[c] = _mm256_fmadd_pd(dc, xl, lo[c]);
      hi[c] = _mm256_fmadd_pd(dc, xh, hi[c]);
    }
  }
#pragma GCC unroll 6
  for (int c = 0; c < n; ++c) {
    _mm256_store_pd(G + (c0 + c) * Fpad + f0, lo[c]);
    _mm256_store_pd(G + (c0 + c) * Fpad + f0 + 4, hi[c]);
  }
}

void gradient_avx2_64(const float* X, const double* D, int rows, const TileShape& shape, double* G, const float*, int) {
  for_each_class_group<kGradClassGroup>(shape.classes, [&](int c0, auto n) {
    for (int f0 = 0; f0 < shape.padded_features; f0 += kLanes64)
      gradient_block<decltype(n)::value>(X, D, rows, shape, f0, c0, G);
  });
}

#undef SPMD_INLINE

}  // namespace

KernelOps64 avx2_ops64() { return {logits_avx2_64, portable_ops64().softmax, gradient_avx2_64}; }

}  // namespace spmd::models::logreg_detail
