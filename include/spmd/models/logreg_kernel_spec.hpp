#pragma once
// The exact arithmetic every logistic-regression kernel performs, so that the portable,
// AVX2 and AVX-512 variants (src/models/logreg_kernel_*.cpp) and the CUDA backend's
// (src/backends/cuda/logreg.cu) give the same bits (tested), whichever one a rank picks. The public contract is in
// include/spmd/models/logreg.hpp; this file spells out the order of operations.
//
// Shapes: F features, C classes; Fpad = F rounded up to 16, Cpad = C rounded up to 16.
// WT is W transposed and zero padded: WT[c * Fpad + f] = W[f * C + c], 0 for f >= F.
//
// Logits, per row x and class c: 16 float "lanes"; lane j accumulates, over feature blocks
// k = 0, 1, ..., acc_j = fma(x[16k + j], WT[c][16k + j], acc_j) (x taken as 0 past F), and
// z_c = tree_sum(acc) (pairs at distance 8, then 4, 2, 1).
// Softmax, per row (rows are independent, so a vector lane can hold a row), classes in
// order c = 0, 1, ..., C-1 (max(a, b) is `a > b ? a : b`, as the x86 max instructions do):
//   m = max(...max(max(z_0, z_1), z_2)..., z_{C-1});  e_c = exp_spec(z_c - m)
//   s = (...((e_0 + e_1) + e_2)... + e_{C-1});        d_c = e_c * (1/s) - [c == y]
//   row loss (double) = ((double)m + log_spec((double)s)) - (double)z_y, added to the chunk's
//   double loss in row order.
// Row weights w (sample x class weights, double; only when the run has them): after the
// softmax d_c = d_c * (T)w (T: the kernel's float type) and the row's loss is w * row loss
// (double) before it is added. Without weights neither multiplication happens (w = 1 would
// give the same bits anyway).
// Gradient, per class c and feature f, rows in order: g = fma(d_c, x_f, g) in float; the
// float sums restart every kLogregGradFloatBlockRows rows of the chunk and are added to the
// double chunk sums (in block order).
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

namespace spmd::models::logreg_detail {

inline constexpr int kLanes = 16;
// Rows whose logits, softmax and gradient are done together while they are in cache. Does
// not change any result (every row and every gradient lane is computed the same way).
inline constexpr int kTileRows = 32;
static_assert(kTileRows % 16 == 0, "D columns (rows of a tile) are stored as whole 16-float vectors");
// Largest class group a kernel keeps in registers at once; larger C runs in several groups
// (again without changing results).
inline constexpr int kMaxClassGroup = 10;

inline int round_up(int value, int multiple) { return (value + multiple - 1) / multiple * multiple; }

struct TileShape {
  int features = 0;         // F
  int classes = 0;          // C
  int padded_features = 0;  // Fpad
  int padded_classes = 0;   // Cpad
};

// exp(t) for the softmax, where t = z - max <= 0. Cephes' expf: t = n ln2 + r, |r| <= ln2/2,
// e^r by a degree-7 polynomial, times 2^n. Inputs below kExpCutoff give exactly 0: e^-80 is
// ~1.8e-35, far below float resolution next to the row's largest term (which is 1), and the
// cut keeps subnormals (and their slow paths) out of the sums. NaN propagates.
inline constexpr float kExpCutoff = -80.0f;
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23: x + magic - magic rounds x to an integer
inline constexpr float kLn2Hi = 0.693359375f;
inline constexpr float kLn2Lo = -2.12194440e-4f;
inline constexpr float kExpP0 = 1.9875691500e-4f;
inline constexpr float kExpP1 = 1.3981999507e-3f;
inline constexpr float kExpP2 = 8.3334519073e-3f;
inline constexpr float kExpP3 = 4.1665795894e-2f;
inline constexpr float kExpP4 = 1.6666665459e-1f;
inline constexpr float kExpP5 = 5.0000001201e-1f;

// The x86 max: returns b when a is not greater (b NaN, a NaN, or both zeros).
inline float max_like_x86(float a, float b) { return a > b ? a : b; }

// Scalar statement of the exp every variant computes; the vector versions do these very
// operations lane by lane. Callers compile it with -ffp-contract=off semantics (no fused
// multiply-add other than the explicit std::fma).
inline float exp_spec(float t) {
  const float tc = max_like_x86(kExpCutoff, t);
  const float scaled = tc * kLog2e;
  const float n = (scaled + kRoundMagic) - kRoundMagic;
  float r = std::fma(-n, kLn2Hi, tc);
  r = std::fma(-n, kLn2Lo, r);
  float p = kExpP0;
  p = std::fma(p, r, kExpP1);
  p = std::fma(p, r, kExpP2);
  p = std::fma(p, r, kExpP3);
  p = std::fma(p, r, kExpP4);
  p = std::fma(p, r, kExpP5);
  const float r2 = r * r;
  p = std::fma(p, r2, r);
  p = p + 1.0f;
  // n is integral in [-116, 0] for t >= kExpCutoff (t NaN: p is NaN whatever the scale).
  const std::int32_t exponent = ((std::isnan(n) ? 0 : static_cast<std::int32_t>(n)) + 127) << 23;
  const float e = p * std::bit_cast<float>(exponent);
  return t < kExpCutoff ? 0.0f : e;
}

// The reduction tree of the logits' N lanes: pairs at distance N/2, then N/4, ..., 1
// (8, 4, 2, 1 for float32's 16 lanes; 4, 2, 1 for float64's 8).
template <int N, class T>
inline T tree_sum(const T* v) {
  T l[N / 2];
  for (int j = 0; j < N / 2; ++j) l[j] = v[j] + v[j + N / 2];
  if constexpr (N == 2) return l[0];
  else return tree_sum<N / 2>(l);
}

// The variants, behind one table of per-tile operations in T (float, or double for
// float64; X is float32 in both). A tile has at most kTileRows rows of dense row-major X
// (row stride F). Z is row-major [kTileRows][Cpad]; D is class-major [C][kTileRows] (d of
// tile row i, class c at D[c * kTileRows + i]).
template <class T>
struct KernelOpsOf {
  void (*logits)(const float* X, int rows, const TileShape& shape, const T* WT, T* Z, const float* next_X,
                 int next_rows);
  // Softmax of each Z row into D; row i's loss (double) into row_loss[i] (the caller adds
  // them in row order, weighted when the rows have weights).
  void (*softmax)(const T* Z, const std::int32_t* labels, int rows, const TileShape& shape, T* D, double* row_loss);
  // Gf[c * Fpad + f] = fma(d(i, c), X[i][f], Gf[c * Fpad + f]) for the tile's rows in order
  // (lanes f >= F hold junk and are never read).
  // Logits and gradient both take the next tile's rows (next_X, next_rows; may be 0) and
  // prefetch them into L2 while they compute (each variant splits the work between the two
  // phases), so that the next tile reads from cache instead of waiting on memory.
  void (*gradient)(const float* X, const T* D, int rows, const TileShape& shape, T* Gf, const float* next_X,
                   int next_rows);
};
using KernelOps = KernelOpsOf<float>;

// Calls body(c0, n) for each group [c0, c0 + n) of at most Group classes, with n a
// std::integral_constant: the kernels keep a group's accumulators in registers, so they are
// compiled for every group size and picked here.
template <int Group, class Body>
inline void for_each_class_group(int classes, Body&& body) {
  for (int c0 = 0; c0 < classes; c0 += Group) {
    const int n = classes - c0 < Group ? classes - c0 : Group;
    [&]<int... I>(std::integer_sequence<int, I...>) {
      (void)((n == I + 1 && (body(c0, std::integral_constant<int, I + 1>{}), true)) || ...);
    }(std::make_integer_sequence<int, Group>{});
  }
}

KernelOps portable_ops();
KernelOps avx2_ops();
KernelOps avx512_ops();  // call only where the CPU has AVX-512F

// ---- float64 (spmd logreg --precision float64) ----
// The same tiles, chunks, blocks and orders in double. X stays float32 in memory and is
// widened where it is read (exact). Fpad64 = F rounded up to 8; WT64[c * Fpad64 + f] =
// W[f * C + c] (double), 0 for f >= F.
// Logits: 8 double lanes; lane j accumulates, over k = 0, 1, ..., Fpad64 / 8 - 1,
// acc_j = fma((double)x[8k + j], WT64[c][8k + j], acc_j) (x taken as 0 past F), and
// z_c = tree_sum<8>(acc) (pairs at distance 4, then 2, 1).
// Softmax: as float32's, in double, with exp_spec(double); row loss = (m + log(s)) - z_y.
// Gradient: g = fma(d_c, (double)x_f, g) in double; the sums restart every
// kLogregGradFloatBlockRows rows of the chunk and are added to the chunk sums in block
// order, as in float32.
inline constexpr int kLanes64 = 8;

// exp(t) for t = z - max <= 0 in double: t = n ln2 + r (Cody-Waite, fdlibm's split of ln2),
// e^r by its Taylor polynomial of degree 13 (truncation < 5e-18 for |r| <= ln2 / 2), times
// 2^n. Below kExp64Cutoff exactly 0 (e^-700 is ~1e-304: nothing next to the row's largest
// term, which is 1, and no subnormal results).
inline constexpr double kExp64Cutoff = -700.0;
inline constexpr double kLog2e64 = 1.4426950408889634;
inline constexpr double kRoundMagic64 = 6755399441055744.0;  // 1.5 * 2^52
inline constexpr double kLn2Hi64 = 6.93147180369123816490e-01;
inline constexpr double kLn2Lo64 = 1.90821492927058770002e-10;
inline constexpr int kExp64Degree = 13;
// 1 / k! for k = kExp64Degree down to 0, the Horner order.
inline constexpr double kExp64Taylor[kExp64Degree + 1] = {
    1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0, 1.0 / 362880.0,
    1.0 / 40320.0,      1.0 / 5040.0,      1.0 / 720.0,      1.0 / 120.0,     1.0 / 24.0,
    1.0 / 6.0,          0.5,               1.0,              1.0};

inline double max_like_x86(double a, double b) { return a > b ? a : b; }

// Scalar statement (callers compile it without contraction; only std::fma fuses). Vector
// variants perform these very operations lane by lane. Call it only from the portable
// variant and target-neutral code: an inline function compiled in a TU with a wider target
// could be the copy the linker keeps.
inline double exp_spec(double t) {
  const double tc = max_like_x86(kExp64Cutoff, t);
  const double n = (tc * kLog2e64 + kRoundMagic64) - kRoundMagic64;
  double r = std::fma(-n, kLn2Hi64, tc);
  r = std::fma(-n, kLn2Lo64, r);
  double p = kExp64Taylor[0];
  for (int k = 1; k <= kExp64Degree; ++k) p = std::fma(p, r, kExp64Taylor[k]);
  // n is integral in [-1010, 0] for t >= kExp64Cutoff (t NaN: p is NaN whatever the scale).
  const std::int64_t exponent = ((std::isnan(n) ? 0 : static_cast<std::int64_t>(n)) + 1023) << 52;
  const double e = p * std::bit_cast<double>(exponent);
  return t < kExp64Cutoff ? 0.0 : e;
}

// log(s) for a row's loss, s the softmax's sum of exponentials (>= 1: the row's largest term
// is 1), in double. Its own operations rather than std::log, so that a GPU (logreg.cu: the
// same operations, one intrinsic each) computes the loss with the same bits as the CPU:
// libm's and CUDA's log may differ in the last bit. s = 2^k m with m in [sqrt(1/2), sqrt(2));
// log m = 2 atanh(f), f = (m - 1) / (m + 1), |f| <= 0.1716, by its series in f^2 up to f^21
// (truncation < 1e-18 relative); then + k ln2 in fdlibm's two parts. Within ~1 ulp of log s
// for s >= 2^-1022; s NaN or +inf is returned (the loss propagates them), s <= 0 gives NaN.
// static: each variant's file (AVX-512 and AVX2 ones are compiled for those targets) keeps its
// own copy, so the linker cannot hand another variant a copy with instructions its CPU lacks.
inline constexpr double kSqrt2 = 1.4142135623730951;
inline constexpr int kLog64Terms = 11;
// 2 / (2j + 1) for j = 10 down to 0, the Horner order in f^2.
inline constexpr double kLog64Series[kLog64Terms] = {2.0 / 21, 2.0 / 19, 2.0 / 17, 2.0 / 15, 2.0 / 13, 2.0 / 11,
                                                     2.0 / 9,  2.0 / 7,  2.0 / 5,  2.0 / 3,  2.0};

static inline double log_spec(double s) {
  if (!(s > 0.0)) return s == s ? std::numeric_limits<double>::quiet_NaN() : s;
  if (s == std::numeric_limits<double>::infinity()) return s;
  std::uint64_t bits = std::bit_cast<std::uint64_t>(s);
  std::int64_t k = -1023;
  if ((bits >> 52) == 0) {  // subnormal s (never a softmax sum): scaled by 2^54 first
    bits = std::bit_cast<std::uint64_t>(s * 18014398509481984.0);
    k -= 54;
  }
  k += static_cast<std::int64_t>(bits >> 52);
  double m = std::bit_cast<double>((bits & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL);
  if (m > kSqrt2) {
    m = m * 0.5;
    k = k + 1;
  }
  const double f = (m - 1.0) / (m + 1.0);
  const double f2 = f * f;
  double p = kLog64Series[0];
  for (int j = 1; j < kLog64Terms; ++j) p = std::fma(p, f2, kLog64Series[j]);
  const double kd = static_cast<double>(k);
  return std::fma(kd, kLn2Hi64, std::fma(kd, kLn2Lo64, f * p));
}

// The lanes of the logits in T's precision (Fpad: F rounded up to them).
template <class T>
inline constexpr int kLanesOf = sizeof(T) == sizeof(double) ? kLanes64 : kLanes;

// The float64 variants' table (double WT, Z, D and G); shape.padded_features is Fpad64.
using KernelOps64 = KernelOpsOf<double>;
KernelOps64 portable_ops64();
KernelOps64 avx2_ops64();
KernelOps64 avx512_ops64();  // call only where the CPU has AVX-512F

}  // namespace spmd::models::logreg_detail
