// The logistic-regression kernels (float32 and float64) with AVX-512F (selected at run time;
// the rest of the build targets x86-64-v3).
// float32: 16 float lanes per register, one register per class accumulator.
//   Logits: two rows at a time, up to 10 classes per pass (20 accumulators in registers);
//     lanes run along features, one transposing tree reduction per row gives 16 logits.
//   Gradient: 32 features x up to 10 classes of Gf in registers while the tile's rows
//     stream through (x rows from L1/L2, d broadcast from the small D tile).
//   Prefetch: the next tile's rows are requested evenly over both phases (first half during
//     the logits, second half during the gradient), so that memory is busy all the time
//     rather than in bursts; prefetching the whole next tile during the gradient alone left
//     the logits waiting on memory (bench_logreg_kernel; tools/bench/README.md).
// float64: 8 double lanes per register; X is read as float32 and widened in registers
// (vcvtps2pd), so it streams the same bytes as float32 and the multiply-adds, at half the
// lanes, set the pace.
//   Logits: two rows at a time, up to 8 classes per pass (16 accumulators); one
//     transposing tree reduction per row gives 8 logits.
//   Gradient: 16 features x up to 10 classes of G in registers over the tile's rows.
//   Softmax: the portable variant's (C exponentials per row; not where the time goes).
//   Prefetch: the logits phase requests the next tile's rows, one row per row pair and
//     cache line per two feature blocks.
// The arithmetic is exactly logreg_kernel_spec.hpp's (tested against the portable variant).
#pragma GCC optimize("fp-contract=off")  // only the explicit fmadd may fuse

#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "spmd/models/logreg_kernel_spec.hpp"

// Everything below is compiled for AVX-512; it is reached only through avx512_ops() and
// avx512_ops64(), which the dispatcher calls only on CPUs that have AVX-512F. Internal linkage throughout, so no
// AVX-512 copy of a shared inline function can be picked by the linker for other code.
#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma")
// GCC 12 flags the deliberately undefined pass-through operand inside its own AVX-512
// intrinsics (_mm512_undefined_ps) as maybe-uninitialized; a false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace spmd::models::logreg_detail {
namespace {

#define SPMD_INLINE inline __attribute__((always_inline))

SPMD_INLINE __mmask16 lane_mask(int count) {  // the first `count` lanes (any count)
  if (count <= 0) return 0;
  return count >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << count) - 1u);
}

// exp_spec, 16 lanes.
SPMD_INLINE __m512 exp16(__m512 t) {
  const __m512 cutoff = _mm512_set1_ps(kExpCutoff);
  const __m512 tc = _mm512_max_ps(cutoff, t);
  const __m512 magic = _mm512_set1_ps(kRoundMagic);
  const __m512 n = _mm512_sub_ps(_mm512_add_ps(_mm512_mul_ps(tc, _mm512_set1_ps(kLog2e)), magic), magic);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Hi), tc);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Lo), r);
  __m512 p = _mm512_set1_ps(kExpP0);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpP1));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpP2));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpP3));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpP4));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpP5));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r);
  p = _mm512_add_ps(p, _mm512_set1_ps(1.0f));
  const __m512i exponent =
      _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  const __m512 e = _mm512_mul_ps(p, _mm512_castsi512_ps(exponent));
  return _mm512_mask_mov_ps(e, _mm512_cmp_ps_mask(t, cutoff, _CMP_LT_OQ), _mm512_setzero_ps());
}

// log_spec, 8 lanes, for a softmax sum s (>= 1, or NaN or +inf, which it returns as the spec
// does): the spec's operations lane by lane; the exponent k as a double through 2^52's bits.
SPMD_INLINE __m512d log8(__m512d s) {
  const __m512i bits = _mm512_castpd_si512(s);
  const __m512i exponent = _mm512_srli_epi64(bits, 52);
  const __m512d two52 = _mm512_set1_pd(4503599627370496.0);
  __m512d k = _mm512_sub_pd(_mm512_castsi512_pd(_mm512_or_si512(exponent, _mm512_castpd_si512(two52))), two52);
  k = _mm512_sub_pd(k, _mm512_set1_pd(1023.0));
  const __m512i mantissa = _mm512_and_si512(bits, _mm512_set1_epi64(0x000fffffffffffffLL));
  __m512d m = _mm512_castsi512_pd(_mm512_or_si512(mantissa, _mm512_set1_epi64(0x3ff0000000000000LL)));
  const __mmask8 big = _mm512_cmp_pd_mask(m, _mm512_set1_pd(kSqrt2), _CMP_GT_OQ);
  m = _mm512_mask_mul_pd(m, big, m, _mm512_set1_pd(0.5));
  const __m512d one = _mm512_set1_pd(1.0);
  k = _mm512_mask_add_pd(k, big, k, one);
  const __m512d f = _mm512_div_pd(_mm512_sub_pd(m, one), _mm512_add_pd(m, one));
  const __m512d f2 = _mm512_mul_pd(f, f);
  __m512d p = _mm512_set1_pd(kLog64Series[0]);
  for (int j = 1; j < kLog64Terms; ++j) p = _mm512_fmadd_pd(p, f2, _mm512_set1_pd(kLog64Series[j]));
  const __m512d log_s =
      _mm512_fmadd_pd(k, _mm512_set1_pd(kLn2Hi64), _mm512_fmadd_pd(k, _mm512_set1_pd(kLn2Lo64), _mm512_mul_pd(f, p)));
  const __mmask8 special = _mm512_cmpeq_epi64_mask(exponent, _mm512_set1_epi64(2047));  // NaN, +inf
  return _mm512_mask_mov_pd(log_s, special, s);
}

// Lane c of the result = tree16 sum of a[c] (a[c] = 0 for c >= n), i.e. 16 reductions at
// once, by the same pairing: distance 8, 4, 2, 1.
template <int n>
SPMD_INLINE __m512 transpose_reduce(const __m512* a) {
  __m512 in[16], u[8], v[4], w[2];
#pragma GCC unroll 16
  for (int c = 0; c < 16; ++c) in[c] = c < n ? a[c] : _mm512_setzero_ps();
#pragma GCC unroll 8
  for (int c = 0; c < 8; ++c)  // lanes 0-7: class c; lanes 8-15: class c+8
    u[c] = _mm512_add_ps(_mm512_shuffle_f32x4(in[c], in[c + 8], 0x44),
                         _mm512_shuffle_f32x4(in[c], in[c + 8], 0xEE));
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c)  // quarters: classes c, c+8, c+4, c+12
    v[c] = _mm512_add_ps(_mm512_shuffle_f32x4(u[c], u[c + 4], 0x88),
                         _mm512_shuffle_f32x4(u[c], u[c + 4], 0xDD));
#pragma GCC unroll 2
  for (int c = 0; c < 2; ++c) {
    const __m512d lo = _mm512_castps_pd(v[2 * c]), hi = _mm512_castps_pd(v[2 * c + 1]);
    w[c] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(lo, hi)), _mm512_castpd_ps(_mm512_unpackhi_pd(lo, hi)));
  }
  const __m512 r = _mm512_add_ps(_mm512_shuffle_ps(w[0], w[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_ps(w[0], w[1], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_shuffle_f32x4(r, r, 0xD8);  // quarters held classes 0-3, 8-11, 4-7, 12-15
}

// Logits of classes [c0, c0 + n) for rows x0 and x1 (x1 may equal x0).
template <int n>
SPMD_INLINE void logits_pair(const float* x0, const float* x1, const float* wt, const TileShape& shape,
                             float* z0, float* z1, const float* ahead) {
  const int F = shape.features, Fpad = shape.padded_features;
  __m512 acc0[n], acc1[n];
#pragma GCC unroll 16
  for (int c = 0; c < n; ++c) acc0[c] = acc1[c] = _mm512_setzero_ps();
  int k = 0;
  for (; k + kLanes <= F; k += kLanes) {
    const __m512 xa = _mm512_loadu_ps(x0 + k), xb = _mm512_loadu_ps(x1 + k);
    if (ahead != nullptr) _mm_prefetch(reinterpret_cast<const char*>(ahead + k), _MM_HINT_T1);
#pragma GCC unroll 16
    for (int c = 0; c < n; ++c) {
      __m512 w = _mm512_load_ps(wt + c * Fpad + k);
      // Keep w in a register: folded into both FMAs as a memory operand it would be loaded
      // twice, and the loads, not the FMAs, would bound the loop.
      asm("" : "+v"(w));
      acc0[c] = _mm512_fmadd_ps(xa, w, acc0[c]);
      acc1[c] = _mm512_fmadd_ps(xb, w, acc1[c]);
    }
  }
  if (k < F) {
    if (ahead != nullptr) _mm_prefetch(reinterpret_cast<const char*>(ahead + k), _MM_HINT_T1);
    const __mmask16 m = lane_mask(F - k);
    const __m512 xa = _mm512_maskz_loadu_ps(m, x0 + k), xb = _mm512_maskz_loadu_ps(m, x1 + k);
#pragma GCC unroll 16
    for (int c = 0; c < n; ++c) {
      const __m512 w = _mm512_load_ps(wt + c * Fpad + k);
      acc0[c] = _mm512_fmadd_ps(xa, w, acc0[c]);
      acc1[c] = _mm512_fmadd_ps(xb, w, acc1[c]);
    }
  }
  _mm512_mask_storeu_ps(z0, lane_mask(n), transpose_reduce<n>(acc0));
  _mm512_mask_storeu_ps(z1, lane_mask(n), transpose_reduce<n>(acc1));
}

template <int n>
void logits_group(const float* X, int rows, const TileShape& shape, const float* wt, float* Z, const float* next_X,
                  int next_rows) {
  const int F = shape.features, Cpad = shape.padded_classes;
  for (int i = 0; i < rows; i += 2) {
    const int i1 = i + 1 < rows ? i + 1 : i;  // an odd last row is computed twice, same bits
    // Pair p prefetches the next tile's row p: this phase fetches its first half.
    const float* ahead = i / 2 < next_rows ? next_X + static_cast<std::int64_t>(i / 2) * F : nullptr;
    logits_pair<n>(X + static_cast<std::int64_t>(i) * F, X + static_cast<std::int64_t>(i1) * F, wt, shape,
                   Z + i * Cpad, Z + i1 * Cpad, ahead);
  }
}

void logits_avx512(const float* X, int rows, const TileShape& shape, const float* WT, float* Z, const float* next_X,
                   int next_rows) {
  for_each_class_group<kMaxClassGroup>(shape.classes, [&](int c0, auto n) {
    // The first class group alone prefetches (the next tile's rows are the same for all).
    logits_group<decltype(n)::value>(X, rows, shape, WT + static_cast<std::int64_t>(c0) * shape.padded_features, Z + c0,
                                     next_X, c0 == 0 ? next_rows : 0);
  });
}

// 16 rows per vector: lane j is row r0 + j; class columns gathered from the row-major Z.
void softmax_avx512(const float* Z, const std::int32_t* labels, int rows, const TileShape& shape, float* D,
                    double* row_loss) {
  const int C = shape.classes, Cpad = shape.padded_classes;
  const __m512i row_offsets = _mm512_mullo_epi32(
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32(Cpad));
  alignas(64) float m_lanes[16], s_lanes[16];
  alignas(64) double log_lanes[16];  // log_spec of each lane's sum, in double
  for (int r0 = 0; r0 < rows; r0 += 16) {
    const __mmask16 live = lane_mask(rows - r0);
    const float* z = Z + r0 * Cpad;
    float* d = D + r0;
    auto column = [&](int c) {
      return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), live, row_offsets, z + c, 4);
    };
    // Gather each class column once into D, then work on D in place.
    __m512 m = column(0);
    _mm512_store_ps(d, m);
    for (int c = 1; c < C; ++c) {
      const __m512 zc = column(c);
      _mm512_store_ps(d + c * kTileRows, zc);
      m = _mm512_max_ps(m, zc);
    }
    __m512 s = _mm512_setzero_ps();
    for (int c = 0; c < C; ++c) {
      const __m512 e = exp16(_mm512_sub_ps(_mm512_load_ps(d + c * kTileRows), m));
      _mm512_store_ps(d + c * kTileRows, e);
      s = c == 0 ? e : _mm512_add_ps(s, e);
    }
    const __m512 inverse = _mm512_div_ps(_mm512_set1_ps(1.0f), s);
    const __m512i y = _mm512_maskz_loadu_epi32(live, labels + r0);
    const __m512 one = _mm512_set1_ps(1.0f);
    for (int c = 0; c < C; ++c) {
      const __m512 onehot = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(y, _mm512_set1_epi32(c)), one);
      float* dc = d + c * kTileRows;
      _mm512_store_ps(dc, _mm512_sub_ps(_mm512_mul_ps(_mm512_load_ps(dc), inverse), onehot));
    }
    _mm512_store_ps(m_lanes, m);
    _mm512_store_ps(s_lanes, s);
    _mm512_store_pd(log_lanes, log8(_mm512_cvtps_pd(_mm256_load_ps(s_lanes))));
    _mm512_store_pd(log_lanes + 8, log8(_mm512_cvtps_pd(_mm256_load_ps(s_lanes + 8))));
    const int live_rows = rows - r0 < 16 ? rows - r0 : 16;
    for (int j = 0; j < live_rows; ++j)
      row_loss[r0 + j] = (static_cast<double>(m_lanes[j]) + log_lanes[j]) - static_cast<double>(z[j * Cpad + labels[r0 + j]]);
  }
}

// Gf[c0 + c][f0 + 16 b + lane] for c < n, b < blocks, over the tile's rows.
// Also prefetches, spread over its rows, feature columns [f0, f0 + 16 blocks) of the second
// half of the next tile's rows.
// full: all 16 * blocks features exist (no tail mask to apply).
template <int n, int blocks, bool full>
SPMD_INLINE void gradient_block(const float* X, const float* D, int rows, const TileShape& shape, int f0, int c0,
                                float* Gf, const float* next_X, int next_rows) {
  const int F = shape.features, Fpad = shape.padded_features;
  __mmask16 mask[blocks];
  __m512 acc[n][blocks];
#pragma GCC unroll 2
  for (int b = 0; b < blocks; ++b) mask[b] = lane_mask(F - f0 - kLanes * b);
#pragma GCC unroll 16
  for (int c = 0; c < n; ++c)
#pragma GCC unroll 2
    for (int b = 0; b < blocks; ++b) acc[c][b] = _mm512_load_ps(Gf + (c0 + c) * Fpad + f0 + kLanes * b);
  for (int i = 0; i < rows; ++i) {
    const float* x = X + static_cast<std::int64_t>(i) * F + f0;
    const float* d = D + c0 * kTileRows + i;
    {  // row i prefetches line i % 2 of this block in the next tile's row kTileRows / 2 + i / 2
      const int r = kTileRows / 2 + i / 2, b = i & 1;
      if (r < next_rows && b < blocks)
        _mm_prefetch(reinterpret_cast<const char*>(next_X + static_cast<std::int64_t>(r) * F + f0 + kLanes * b),
                     _MM_HINT_T1);
    }
    __m512 xv[blocks];
#pragma GCC unroll 2
    for (int b = 0; b < blocks; ++b)
      xv[b] = full ? _mm512_loadu_ps(x + kLanes * b) : _mm512_maskz_loadu_ps(mask[b], x + kLanes * b);
#pragma GCC unroll 16
    for (int c = 0; c < n; ++c) {
      const __m512 dc = _mm512_set1_ps(d[c * kTileRows]);
#pragma GCC unroll 2
      for (int b = 0; b < blocks; ++b) acc[c][b] = _mm512_fmadd_ps(dc, xv[b], acc[c][b]);
    }
  }
#pragma GCC unroll 16
  for (int c = 0; c < n; ++c)
#pragma GCC unroll 2
    for (int b = 0; b < blocks; ++b) _mm512_store_ps(Gf + (c0 + c) * Fpad + f0 + kLanes * b, acc[c][b]);
}

template <int n>
void gradient_group(const float* X, const float* D, int rows, const TileShape& shape, int c0, float* Gf,
                    const float* next_X, int next_rows) {
  int f0 = 0;
  for (; f0 + 2 * kLanes <= shape.features; f0 += 2 * kLanes)
    gradient_block<n, 2, true>(X, D, rows, shape, f0, c0, Gf, next_X, next_rows);
  for (; f0 + 2 * kLanes <= shape.padded_features; f0 += 2 * kLanes)
    gradient_block<n, 2, false>(X, D, rows, shape, f0, c0, Gf, next_X, next_rows);
  if (f0 < shape.padded_features) gradient_block<n, 1, false>(X, D, rows, shape, f0, c0, Gf, next_X, next_rows);
}

void gradient_avx512(const float* X, const float* D, int rows, const TileShape& shape, float* Gf, const float* next_X,
                     int next_rows) {
  for_each_class_group<kMaxClassGroup>(shape.classes, [&](int c0, auto n) {
    gradient_group<decltype(n)::value>(X, D, rows, shape, c0, Gf, next_X, c0 == 0 ? next_rows : 0);
  });
}

// ---- float64 ----

constexpr int kLogitClassGroup64 = 8;  // one transposed register of logits
constexpr int kGradClassGroup64 = 10;

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
      asm("" : "+v"(w));  // one load for both rows (see the float32 logits_pair)
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
  for_each_class_group<kLogitClassGroup64>(shape.classes, [&](int c0, auto n) {
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
  for_each_class_group<kGradClassGroup64>(shape.classes, [&](int c0, auto n) {
    constexpr int nc = decltype(n)::value;
    int f0 = 0;
    for (; f0 + 2 * kLanes64 <= shape.padded_features; f0 += 2 * kLanes64)
      gradient_block<nc, 2>(X, D, rows, shape, f0, c0, G);
    if (f0 < shape.padded_features) gradient_block<nc, 1>(X, D, rows, shape, f0, c0, G);
  });
}

#undef SPMD_INLINE

}  // namespace

KernelOps avx512_ops() { return {logits_avx512, softmax_avx512, gradient_avx512}; }
KernelOps64 avx512_ops64() { return {logits_avx512_64, portable_ops64().softmax, gradient_avx512_64}; }

}  // namespace spmd::models::logreg_detail

#pragma GCC pop_options
