// The float64 logistic-regression kernel with AVX-512F (selected at run time like the
// float32 one). 8 double lanes per register: one register per class accumulator; X is
// read as float32 and widened in registers (vcvtps2pd), so it streams the same bytes as
// float32 and the multiply-adds, at half the lanes, set the pace.
//   Logits: two rows at a time, up to 8 classes per pass (16 accumulators); one
//     transposing tree reduction per row gives 8 logits.
//   Gradient: 16 features x up to 10 classes of G in registers over the tile's rows.
//   Softmax: the portable variant's (C exponentials per row; not where the time goes).
//   Prefetch: the logits phase requests the next tile's rows, one row per row pair and
//     cache line per two feature blocks.
// The arithmetic is exactly logreg_kernel_spec.hpp's float64 section (tested against the
// portable variant).
#pragma GCC optimize("fp-contract=off")  // only the explicit fmadd may fuse

#include <immintrin.h>

#include <cstdint>

#include "spmd/models/logreg_kernel_spec.hpp"

// Reached only through avx512_ops64(), called only on CPUs with AVX-512F; internal linkage
// throughout (see logreg_kernel_avx512.cpp).
#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma")
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's own _mm512_undefined_*

namespace spmd::models::logreg_detail {
namespace {

#define SPMD_INLINE inline __attribute__((always_inline))

constexpr int kLogitClassGroup = 8;  // one transposed register of logits
constexpr int kGradClassGroup = 10;

SPMD_INLINE __mmask16 lane_mask(int count) {
  if (count <= 0) return 0;
  return count >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << count) - 1u);
}

// 8 floats of x from f (the first `valid` of them; the rest 0), widened.
SPMD_INLINE __m512d load8(const float* x, int valid) {
  if (valid >= 8) return _mm512_cvtps_pd(_mm256_loadu_ps(x));
  return _mm512_cvtps_pd(_mm512_castps512_ps256(_mm512_maskz_loadu_ps(lane_mask(valid), x)));
}

// Lane c of the result = tree8 sum of a[c] (0 for c >= n): distance 4, 2, 1.
template <int n>
SPMD_INLINE __m512d transpose_reduce(const __m512d* a) {
  __m512d in[8], u[4], v[2];
#pragma GCC unroll 8
  for (int c = 0; c < 8; ++c) in[c] = c < n ? a[c] : _mm512_setzero_pd();
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c)  // lanes 0-3: class c; 4-7: class c+4
    u[c] = _mm512_add_pd(_mm512_shuffle_f64x2(in[c], in[c + 4], 0x44), _mm512_shuffle_f64x2(in[c], in[c + 4], 0xEE));
#pragma GCC unroll 2
  for (int c = 0; c < 2; ++c)  // pairs: classes c, c+4, c+2, c+6
    v[c] = _mm512_add_pd(_mm512_shuffle_f64x2(u[c], u[c + 2], 0x88), _mm512_shuffle_f64x2(u[c], u[c + 2], 0xDD));
  const __m512d r = _mm512_add_pd(_mm512_unpacklo_pd(v[0], v[1]), _mm512_unpackhi_pd(v[0], v[1]));
  return _mm512_shuffle_f64x2(r, r, 0xD8);  // pairs held classes 0-1, 4-5, 2-3, 6-7
}

template <int n>
SPMD_INLINE void logits_pair(const float* x0, const float* x1, const double* wt, const TileShape& shape, double* z0,
                             double* z1, const float* ahead) {
  const int F = shape.features, Fpad = shape.padded_features;
  __m512d acc0[n], acc1[n];
#pragma GCC unroll 8
  for (int c = 0; c < n; ++c) acc0[c] = acc1[c] = _mm512_setzero_pd();
  for (int k = 0; k < Fpad; k += kLanes64) {
    const __m512d xa = load8(x0 + k, F - k), xb = load8(x1 + k, F - k);
    if (ahead != nullptr && k % 16 == 0) _mm_prefetch(reinterpret_cast<const char*>(ahead + k), _MM_HINT_T1);
#pragma GCC unroll 8
    for (int c = 0; c < n; ++c) {
      __m512d w = _mm512_load_pd(wt + c * Fpad + k);
      asm("" : "+v"(w));  // one load for both rows (see logreg_kernel_avx512.cpp)
      acc0[c] = _mm512_fmadd_pd(xa, w, acc0[c]);
      acc1[c] = _mm512_fmadd_pd(xb, w, acc1[c]);
    }
  }
  const __mmask8 m = static_cast<__mmask8>((1u << n) - 1u);
  _mm512_mask_storeu_pd(z0, m, transpose_reduce<n>(acc0));
  _mm512_mask_storeu_pd(z1, m, transpose_reduce<n>(acc1));
}

void logits_avx512_64(const float* X, int rows, const TileShape& shape, const double* WT, double* Z,
                      const float* next_X, int next_rows) {
  const int F = shape.features, Cpad = shape.padded_classes;
  for_each_class_group<kLogitClassGroup>(shape.classes, [&](int c0, auto n) {
    const double* wt = WT + static_cast<std::int64_t>(c0) * shape.padded_features;
    for (int i = 0; i < rows; i += 2) {
      const int i1 = i + 1 < rows ? i + 1 : i;  // an odd last row is computed twice, same bits
      // The first class group prefetches: pair p the next tile's rows 2p and 2p + 1.
      const float* ahead = c0 == 0 && i < next_rows ? next_X + static_cast<std::int64_t>(i) * F : nullptr;
      logits_pair<decltype(n)::value>(X + static_cast<std::int64_t>(i) * F, X + static_cast<std::int64_t>(i1) * F, wt,
                                      shape, Z + i * Cpad + c0, Z + i1 * Cpad + c0, ahead);
      if (c0 == 0 && i + 1 < next_rows)
        for (int k = 0; k < F; k += 16)
          _mm_prefetch(reinterpret_cast<const char*>(next_X + static_cast<std::int64_t>(i + 1) * F + k), _MM_HINT_T1);
    }
  });
}

// G[c0 + c][f0 + 8 b + lane] for c < n, b < blocks, over the tile's rows.
template <int n, int blocks>
SPMD_INLINE void gradient_block(const float* X, const double* D, int rows, const TileShape& shape, int f0, int c0,
                                double* G) {
  const int F = shape.features, Fpad = shape.padded_features;
  __m512d acc[n][blocks];
#pragma GCC unroll 10
  for (int c = 0; c < n; ++c)
#pragma GCC unroll 2
    for (int b = 0; b < blocks; ++b) acc[c][b] = _mm512_load_pd(G + (c0 + c) * Fpad + f0 + kLanes64 * b);
  for (int i = 0; i < rows; ++i) {
    const float* x = X + static_cast<std::int64_t>(i) * F + f0;
    const double* d = D + c0 * kTileRows + i;
    __m512d xv[blocks];
#pragma GCC unroll 2
    for (int b = 0; b < blocks; ++b) xv[b] = load8(x + kLanes64 * b, F - f0 - kLanes64 * b);
#pragma GCC unroll 10
    for (int c = 0; c < n; ++c) {
      const __m512d dc = _mm512_set1_pd(d[c * kTileRows]);
#pragma GCC unroll 2
      for (int b = 0; b < blocks; ++b) acc[c][b] = _mm512_fmadd_pd(dc, xv[b], acc[c][b]);
    }
  }
#pragma GCC unroll 10
  for (int c = 0; c < n; ++c)
#pragma GCC unroll 2
    for (int b = 0; b < blocks; ++b) _mm512_store_pd(G + (c0 + c) * Fpad + f0 + kLanes64 * b, acc[c][b]);
}

void gradient_avx512_64(const float* X, const double* D, int rows, const TileShape& shape, double* G, const float*,
                        int) {
  for_each_class_group<kGradClassGroup>(shape.classes, [&](int c0, auto n) {
    constexpr int nc = decltype(n)::value;
    int f0 = 0;
    for (; f0 + 2 * kLanes64 <= shape.padded_features; f0 += 2 * kLanes64)
      gradient_block<nc, 2>(X, D, rows, shape, f0, c0, G);
    if (f0 < shape.padded_features) gradient_block<nc, 1>(X, D, rows, shape, f0, c0, G);
  });
}

#undef SPMD_INLINE

}  // namespace

KernelOps64 avx512_ops64() { return {logits_avx512_64, portable_ops64().softmax, gradient_avx512_64}; }

}  // namespace spmd::models::logreg_detail

#pragma GCC pop_options
