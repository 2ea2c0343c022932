// The logistic-regression kernels (float32 and float64) with AVX2 + FMA (the build's
// baseline, x86-64-v3). Each of the spec's 16 float (8 double) lanes lives in a pair of
// registers (lo: lanes 0-7, hi: 8-15; in double 0-3 and 4-7), so the arithmetic is exactly
// logreg_kernel_spec.hpp's (tested against the portable variant) at the price of more
// registers. X is read as float32 (in float64 widened in registers).
//   Logits: one row at a time, up to 6 classes per pass (12 accumulators); float64: 4 (8).
//   Gradient: 16 features x up to 6 classes of Gf in registers over the tile's rows;
//     float64: 8 features x up to 6 classes.
//   Softmax (float64): the portable variant's.
#pragma GCC optimize("fp-contract=off")  // only the explicit fmadd may fuse

#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "spmd/models/logreg_kernel_spec.hpp"

namespace spmd::models::logreg_detail {
namespace {

#define SPMD_INLINE inline __attribute__((always_inline))

constexpr int kClassGroup = 6;

// 16-lane masks (first `count` lanes) for maskload: {lo, hi}.
struct LaneMask {
  __m256i lo, hi;
};
SPMD_INLINE LaneMask lane_mask(int count) {
  const __m256i ids = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i n = _mm256_set1_epi32(count);
  return {_mm256_cmpgt_epi32(n, ids), _mm256_cmpgt_epi32(n, _mm256_add_epi32(ids, _mm256_set1_epi32(8)))};
}

// exp_spec, 8 lanes.
SPMD_INLINE __m256 exp8(__m256 t) {
  const __m256 cutoff = _mm256_set1_ps(kExpCutoff);
  const __m256 tc = _mm256_max_ps(cutoff, t);
  const __m256 magic = _mm256_set1_ps(kRoundMagic);
  const __m256 n = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(tc, _mm256_set1_ps(kLog2e)), magic), magic);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Hi), tc);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Lo), r);
  __m256 p = _mm256_set1_ps(kExpP0);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpP1));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpP2));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpP3));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpP4));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpP5));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r);
  p = _mm256_add_ps(p, _mm256_set1_ps(1.0f));
  const __m256i exponent =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  const __m256 e = _mm256_mul_ps(p, _mm256_castsi256_ps(exponent));
  return _mm256_blendv_ps(e, _mm256_setzero_ps(), _mm256_cmp_ps(t, cutoff, _CMP_LT_OQ));
}

// log_spec, 4 lanes, for a softmax sum s (>= 1, or NaN or +inf, which it returns as the spec
// does): the spec's operations lane by lane; the exponent k as a double through 2^52's bits.
SPMD_INLINE __m256d log4(__m256d s) {
  const __m256i bits = _mm256_castpd_si256(s);
  const __m256i exponent = _mm256_srli_epi64(bits, 52);
  const __m256d two52 = _mm256_set1_pd(4503599627370496.0);
  __m256d k = _mm256_sub_pd(_mm256_castsi256_pd(_mm256_or_si256(exponent, _mm256_castpd_si256(two52))), two52);
  k = _mm256_sub_pd(k, _mm256_set1_pd(1023.0));
  const __m256i mantissa = _mm256_and_si256(bits, _mm256_set1_epi64x(0x000fffffffffffffLL));
  __m256d m = _mm256_castsi256_pd(_mm256_or_si256(mantissa, _mm256_set1_epi64x(0x3ff0000000000000LL)));
  const __m256d big = _mm256_cmp_pd(m, _mm256_set1_pd(kSqrt2), _CMP_GT_OQ);
  m = _mm256_blendv_pd(m, _mm256_mul_pd(m, _mm256_set1_pd(0.5)), big);
  const __m256d one = _mm256_set1_pd(1.0);
  k = _mm256_blendv_pd(k, _mm256_add_pd(k, one), big);
  const __m256d f = _mm256_div_pd(_mm256_sub_pd(m, one), _mm256_add_pd(m, one));
  const __m256d f2 = _mm256_mul_pd(f, f);
  __m256d p = _mm256_set1_pd(kLog64Series[0]);
  for (int j = 1; j < kLog64Terms; ++j) p = _mm256_fmadd_pd(p, f2, _mm256_set1_pd(kLog64Series[j]));
  const __m256d log_s =
      _mm256_fmadd_pd(k, _mm256_set1_pd(kLn2Hi64), _mm256_fmadd_pd(k, _mm256_set1_pd(kLn2Lo64), _mm256_mul_pd(f, p)));
  const __m256i special = _mm256_cmpeq_epi64(exponent, _mm256_set1_epi64x(2047));  // NaN, +inf
  return _mm256_blendv_pd(log_s, s, _mm256_castsi256_pd(special));
}

// Lane c of the result = tree16 sum of class c's 16 lanes (lo[c], hi[c]); 0 for c >= n.
template <int n>
SPMD_INLINE __m256 transpose_reduce(const __m256* lo, const __m256* hi) {
  __m256 l1[8], v[4], w[2];
#pragma GCC unroll 8
  for (int c = 0; c < 8; ++c) l1[c] = c < n ? _mm256_add_ps(lo[c], hi[c]) : _mm256_setzero_ps();
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c)  // halves: classes c, c+4
    v[c] = _mm256_add_ps(_mm256_permute2f128_ps(l1[c], l1[c + 4], 0x20), _mm256_permute2f128_ps(l1[c], l1[c + 4], 0x31));
#pragma GCC unroll 2
  for (int c = 0; c < 2; ++c) {
    const __m256d a = _mm256_castps_pd(v[2 * c]), b = _mm256_castps_pd(v[2 * c + 1]);
    w[c] = _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(a, b)), _mm256_castpd_ps(_mm256_unpackhi_pd(a, b)));
  }
  return _mm256_add_ps(_mm256_shuffle_ps(w[0], w[1], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm256_shuffle_ps(w[0], w[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

template <int n>
void logits_group(const float* X, int rows, const TileShape& shape, const float* wt, float* Z, const float* next_X,
                  int next_rows) {
  const int F = shape.features, Fpad = shape.padded_features;
  const LaneMask tail = lane_mask(F % kLanes);
  alignas(32) float z[8];
  for (int i = 0; i < rows; ++i) {
    const float* x = X + static_cast<std::int64_t>(i) * F;
    // Even rows prefetch the next tile's row i / 2: this phase fetches its first half.
    const float* ahead = i % 2 == 0 && i / 2 < next_rows ? next_X + static_cast<std::int64_t>(i / 2) * F : nullptr;
    __m256 lo[n], hi[n];
#pragma GCC unroll 8
    for (int c = 0; c < n; ++c) lo[c] = hi[c] = _mm256_setzero_ps();
    int k = 0;
    for (; k + kLanes <= F; k += kLanes) {
      const __m256 xl = _mm256_loadu_ps(x + k), xh = _mm256_loadu_ps(x + k + 8);
      if (ahead != nullptr) _mm_prefetch(reinterpret_cast<const char*>(ahead + k), _MM_HINT_T1);
#pragma GCC unroll 8
      for (int c = 0; c < n; ++c) {
        lo[c] = _mm256_fmadd_ps(xl, _mm256_load_ps(wt + c * Fpad + k), lo[c]);
        hi[c] = _mm256_fmadd_ps(xh, _mm256_load_ps(wt + c * Fpad + k + 8), hi[c]);
      }
    }
    if (k < F) {
      if (ahead != nullptr) _mm_prefetch(reinterpret_cast<const char*>(ahead + k), _MM_HINT_T1);
      const __m256 xl = _mm256_maskload_ps(x + k, tail.lo), xh = _mm256_maskload_ps(x + k + 8, tail.hi);
#pragma GCC unroll 8
      for (int c = 0; c < n; ++c) {
        lo[c] = _mm256_fmadd_ps(xl, _mm256_load_ps(wt + c * Fpad + k), lo[c]);
        hi[c] = _mm256_fmadd_ps(xh, _mm256_load_ps(wt + c * Fpad + k + 8), hi[c]);
      }
    }
    _mm256_store_ps(z, transpose_reduce<n>(lo, hi));
    for (int c = 0; c < n; ++c) Z[i * shape.padded_classes + c] = z[c];
  }
}

// 8 rows per vector: lane j is row r0 + j; class columns gathered from the row-major Z.
void softmax_avx2(const float* Z, const std::int32_t* labels, int rows, const TileShape& shape, float* D,
                  double* row_loss) {
  const int C = shape.classes, Cpad = shape.padded_classes;
  const __m256i ids = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i row_offsets = _mm256_mullo_epi32(ids, _mm256_set1_epi32(Cpad));
  alignas(32) float m_lanes[8], s_lanes[8];
  alignas(32) double log_lanes[8];  // log_spec of each lane's sum, in double
  for (int r0 = 0; r0 < rows; r0 += 8) {
    const __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32(rows - r0), ids);
    const float* z = Z + r0 * Cpad;
    float* d = D + r0;
    auto column = [&](int c) {
      return _mm256_mask_i32gather_ps(_mm256_setzero_ps(), z + c, row_offsets, _mm256_castsi256_ps(live), 4);
    };
    __m256 m = column(0);
    _mm256_store_ps(d, m);
    for (int c = 1; c < C; ++c) {
      const __m256 zc = column(c);
      _mm256_store_ps(d + c * kTileRows, zc);
      m = _mm256_max_ps(m, zc);
    }
    __m256 s = _mm256_setzero_ps();
    for (int c = 0; c < C; ++c) {
      const __m256 e = exp8(_mm256_sub_ps(_mm256_load_ps(d + c * kTileRows), m));
      _mm256_store_ps(d + c * kTileRows, e);
      s = c == 0 ? e : _mm256_add_ps(s, e);
    }
    const __m256 inverse = _mm256_div_ps(_mm256_set1_ps(1.0f), s);
    const __m256i y = _mm256_maskload_epi32(labels + r0, live);
    const __m256 one = _mm256_set1_ps(1.0f);
    for (int c = 0; c < C; ++c) {
      const __m256 onehot = _mm256_and_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(y, _mm256_set1_epi32(c))), one);
      float* dc = d + c * kTileRows;
      _mm256_store_ps(dc, _mm256_sub_ps(_mm256_mul_ps(_mm256_load_ps(dc), inverse), onehot));
    }
    _mm256_store_ps(m_lanes, m);
    _mm256_store_ps(s_lanes, s);
    _mm256_store_pd(log_lanes, log4(_mm256_cvtps_pd(_mm_load_ps(s_lanes))));
    _mm256_store_pd(log_lanes + 4, log4(_mm256_cvtps_pd(_mm_load_ps(s_lanes + 4))));
    const int live_rows = rows - r0 < 8 ? rows - r0 : 8;
    for (int j = 0; j < live_rows; ++j)
      row_loss[r0 + j] = (static_cast<double>(m_lanes[j]) + log_lanes[j]) - static_cast<double>(z[j * Cpad + labels[r0 + j]]);
  }
}

// Also prefetches the same 16 feature columns of the second half of the next tile's rows.
template <int n>
SPMD_INLINE void gradient_block(const float* X, const float* D, int rows, const TileShape& shape, int f0, int c0,
                                float* Gf, const float* next_X, int next_rows) {
  const int F = shape.features, Fpad = shape.padded_features;
  const LaneMask valid = lane_mask(F - f0);
  __m256 lo[n], hi[n];
#pragma GCC unroll 8
  for (int c = 0; c < n; ++c) {
    lo[c] = _mm256_load_ps(Gf + (c0 + c) * Fpad + f0);
    hi[c] = _mm256_load_ps(Gf + (c0 + c) * Fpad + f0 + 8);
  }
  for (int i = 0; i < rows; ++i) {
    const float* x = X + static_cast<std::int64_t>(i) * F + f0;
    const float* d = D + c0 * kTileRows + i;
    if (i % 2 == 0 && kTileRows / 2 + i / 2 < next_rows)  // the second half of the next tile
      _mm_prefetch(reinterpret_cast<const char*>(next_X + static_cast<std::int64_t>(kTileRows / 2 + i / 2) * F + f0),
                   _MM_HINT_T1);
    const __m256 xl = _mm256_maskload_ps(x, valid.lo), xh = _mm256_maskload_ps(x + 8, valid.hi);
#pragma GCC unroll 8
    for (int c = 0; c < n; ++c) {
      const __m256 dc = _mm256_broadcast_ss(d + c * kTileRows);
      lo[c] = _mm256_fmadd_ps(dc, xl, lo[c]);
      hi[c] = _mm256_fmadd_ps(dc, xh, hi[c]);
    }
  }
#pragma GCC unroll 8
  for (int c = 0; c < n; ++c) {
    _mm256_store_ps(Gf + (c0 + c) * Fpad + f0, lo[c]);
    _mm256_store_ps(Gf + (c0 + c) * Fpad + f0 + 8, hi[c]);
  }
}

template <int n>
void gradient_group(const float* X, const float* D, int rows, const TileShape& shape, int c0, float* Gf,
                    const float* next_X, int next_rows) {
  for (int f0 = 0; f0 < shape.padded_features; f0 += kLanes)
    gradient_block<n>(X, D, rows, shape, f0, c0, Gf, next_X, next_rows);
}

void gradient_avx2(const float* X, const float* D, int rows, const TileShape& shape, float* Gf, const float* next_X,
                   int next_rows) {
  for_each_class_group<kClassGroup>(shape.classes, [&](int c0, auto n) {
    gradient_group<decltype(n)::value>(X, D, rows, shape, c0, Gf, next_X, c0 == 0 ? next_rows : 0);
  });
}

// ---- float64 ----

constexpr int kLogitClassGroup64 = 4;  // one transposed register of logits
constexpr int kGradClassGroup64 = 6;

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

// Either precision's logits_group over its class groups.
template <int Group, class T>
void logits_avx2(const float* X, int rows, const TileShape& shape, const T* WT, T* Z, const float* next_X,
                 int next_rows) {
  for_each_class_group<Group>(shape.classes, [&](int c0, auto n) {
    // The first class group alone prefetches (the next tile's rows are the same for all).
    logits_group<decltype(n)::value>(X, rows, shape, WT + static_cast<std::int64_t>(c0) * shape.padded_features, Z + c0,
                                     next_X, c0 == 0 ? next_rows : 0);
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
  for_each_class_group<kGradClassGroup64>(shape.classes, [&](int c0, auto n) {
    for (int f0 = 0; f0 < shape.padded_features; f0 += kLanes64)
      gradient_block<decltype(n)::value>(X, D, rows, shape, f0, c0, G);
  });
}

#undef SPMD_INLINE

}  // namespace

KernelOps avx2_ops() { return {logits_avx2<kClassGroup>, softmax_avx2, gradient_avx2}; }
KernelOps64 avx2_ops64() { return {logits_avx2<kLogitClassGroup64>, portable_ops64().softmax, gradient_avx2_64}; }

}  // namespace spmd::models::logreg_detail
