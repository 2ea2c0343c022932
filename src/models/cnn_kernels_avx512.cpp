// The CNN's CPU kernels for AVX-512 (16 floats per vector, 32 vector registers). Compiled
// for AVX-512 by the target pragma below and called only after a run-time CPU check
// (cnn_kernels.cpp). Standard headers come before the pragma so that no inline library
// function is emitted here with AVX-512 instructions and then shared with other units.
#include <immintrin.h>

#include "spmd/models/cnn_kernels.hpp"
#include "cnn_kernels_variants.hpp"

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512dq,avx512bw")

namespace spmd::models::cnn_cpu {
namespace {

struct Ops {
  using Reg = __m512;
  static constexpr int kWidth = 16;
  static constexpr int kMaxNv = 4;      // 6 x 4 tile: 24 accumulators + 4 B + broadcast
  static constexpr int kMaxKc = 160;    // kc x 64 floats of B <= 40 KiB (L1 is 48 KiB)
  static constexpr int kConv1Pixels = 7;
  static constexpr int kConv1Vectors = 2;
  static constexpr int kConv1GradVectors = 2;
  // Without transposition each tile row needs its own pointer: keep MR at 6 (GPRs).
  template <int NV, bool ATrans>
  static constexpr int rows_for() {
    if constexpr (!ATrans) return 6;
    return NV == 1 ? 16 : NV == 2 ? 12 : NV == 3 ? 8 : 6;
  }
  static Reg zero() { return _mm512_setzero_ps(); }
  static Reg load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, Reg v) { _mm512_storeu_ps(p, v); }
  static Reg broadcast(const float* p) { return _mm512_set1_ps(*p); }
  static Reg fma(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
  static Reg add(Reg a, Reg b) { return _mm512_add_ps(a, b); }
  static Reg sub(Reg a, Reg b) { return _mm512_sub_ps(a, b); }
  static Reg mul(Reg a, Reg b) { return _mm512_mul_ps(a, b); }
  static Reg set1(float x) { return _mm512_set1_ps(x); }
  // The masked form: GCC 12's plain _mm512_max_ps trips -Wuninitialized on its internal
  // _mm512_undefined_ps().
  static Reg relu(Reg a) { return _mm512_mask_max_ps(_mm512_setzero_ps(), 0xFFFF, a, _mm512_setzero_ps()); }
  // The first n (< 16) lanes: a GEMM's right-edge columns.
  using Mask = __mmask16;
  static Mask tail_mask(int n) { return static_cast<__mmask16>((1u << n) - 1u); }
  static Reg load_masked(const float* p, Mask m) { return _mm512_maskz_loadu_ps(m, p); }
  static void store_masked(float* p, Mask m, Reg v) { _mm512_mask_storeu_ps(p, m, v); }
};

#include "cnn_kernels_impl.hpp"

}  // namespace
}  // namespace spmd::models::cnn_cpu

#pragma GCC pop_options

namespace spmd::models::cnn_cpu {

const Kernels& avx512_kernels() {
  static const Kernels table{Isa::Avx512, &gemm, &gemm_offset_rows, &conv1_forward, &conv1_weight_grad, kDirectConvChannels};
  return table;
}

}  // namespace spmd::models::cnn_cpu
