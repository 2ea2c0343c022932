// The CNN's CPU kernels for AVX2 + FMA (8 floats per vector, 16 vector registers): the
// build's x86-64-v3 baseline, so no target pragma is needed here.
#include <immintrin.h>

#include "spmd/models/cnn_kernels.hpp"
#include "cnn_kernels_variants.hpp"

namespace spmd::models::cnn_cpu {
namespace {

struct Ops {
  using Reg = __m256;
  static constexpr int kWidth = 8;
  static constexpr int kMaxNv = 2;      // 6 x 2 tile: 12 accumulators + 2 B + 1 broadcast
  static constexpr int kMaxKc = 256;    // kc x 16 floats of B = 16 KiB
  static constexpr int kConv1Pixels = 4;
  static constexpr int kConv1Vectors = 2;
  static constexpr int kConv1GradVectors = 1;
  template <int NV, bool ATrans>
  static constexpr int rows_for() {
    return NV == 1 && ATrans ? 12 : 6;
  }
  static Reg zero() { return _mm256_setzero_ps(); }
  static Reg load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, Reg v) { _mm256_storeu_ps(p, v); }
  static Reg broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  static Reg fma(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }
  static Reg add(Reg a, Reg b) { return _mm256_add_ps(a, b); }
  static Reg sub(Reg a, Reg b) { return _mm256_sub_ps(a, b); }
  static Reg mul(Reg a, Reg b) { return _mm256_mul_ps(a, b); }
  static Reg set1(float x) { return _mm256_set1_ps(x); }
  static Reg relu(Reg a) { return _mm256_max_ps(a, _mm256_setzero_ps()); }
  // The first n (< 8) lanes: a GEMM's right-edge columns.
  using Mask = __m256i;
  static Mask tail_mask(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static Reg load_masked(const float* p, Mask m) { return _mm256_maskload_ps(p, m); }
  static void store_masked(float* p, Mask m, Reg v) { _mm256_maskstore_ps(p, m, v); }
};

#include "cnn_kernels_impl.hpp"

}  // namespace

const Kernels& avx2_kernels() {
  static const Kernels table{Isa::Avx2, &gemm, &gemm_offset_rows, &conv1_forward, &conv1_weight_grad, kDirectConvChannels};
  return table;
}

}  // namespace spmd::models::cnn_cpu
