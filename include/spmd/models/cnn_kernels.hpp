#pragma once
// The CPU backend's compute kernels for the CNN, one implementation per instruction set,
// chosen at run time. Public so that tests can check each against a scalar reference.
//
// Why own kernels instead of cblas_sgemm: the CNN's GEMMs are small (N <= 288, K <= 3136
// for the default geometry), bias + ReLU can be fused into the store, and Debian's OpenBLAS
// 0.3.21 does not recognise recent Xeons (it falls back to its "Prescott" SSE3 kernels,
// ~30 GFLOP/s, unless OPENBLAS_CORETYPE is set before the program starts). Isa::Blas keeps the cblas path
// for comparison.
#include <cstdint>
#include <string>

#include "spmd/optim/sgd.hpp"

namespace spmd::models::cnn_cpu {

enum class Isa {
  Auto,    // the fastest supported: Avx512 when the CPU and OS support it (and SPMD_MAX_CPU_ISA
           // allows: spmd/runtime/cpu_features.hpp), else Avx2
  Avx2,    // AVX2 + FMA (the build's x86-64-v3 baseline; always available)
  Avx512,  // AVX-512 F/VL/DQ/BW, 32 vector registers
  Blas,    // GEMMs by cblas_sgemm (OpenBLAS), other kernels as Avx2
};

const char* to_string(Isa isa);
Isa parse_isa(const std::string& text);  // "auto", "avx2", "avx512", "blas"; throws spmd::Error
bool isa_supported(Isa isa);
// Auto -> the fastest supported; an explicitly requested but unsupported ISA throws
// spmd::Error naming it.
Isa resolve_isa(Isa isa);

// Applied when a GEMM's product P is complete: C = relu(P + bias[col] + row_bias[row]).
struct GemmEpilogue {
  const float* bias = nullptr;  // [n], or nullptr
  bool relu = false;
  const float* row_bias = nullptr;  // [m], or nullptr: an NCHW convolution's per-channel bias
  // Fused SGD-momentum (optim::sgd_momentum_step with P as the gradient), when sgd_params
  // is set: sgd_trace = momentum * sgd_trace + P; sgd_params -= learning_rate * sgd_trace,
  // both arrays in C's layout (row stride ldc), each tile updated while it is in registers.
  // C's contents are unspecified afterwards. Not combined with bias, relu or accumulate.
  float* sgd_params = nullptr;
  float* sgd_trace = nullptr;
  optim::SgdMomentum sgd{};
};

// C[m, n] = (accumulate ? C : 0) + op(A) B, then the epilogue. Row-major throughout.
//   a_transposed = false: A is [m, k] with row stride lda  (op(A) = A)
//   a_transposed = true:  A is [k, m] with row stride lda  (op(A) = A^T)
//   B is [k, n] with row stride ldb; C is [m, n] with row stride ldc.
// m, n, k >= 0 arbitrary. Columns past the last whole vector (n % 8 with AVX2, n % 16 with
// AVX-512) go through masked loads and stores, so no float beyond column n - 1 of any row
// is read or written.
using GemmFn = void (*)(bool a_transposed, int m, int n, int k, const float* a, long lda, const float* b,
                        long ldb, float* c, long ldc, bool accumulate, GemmEpilogue epilogue);

// C[m, n] = A^T B (the epilogue's bias, row_bias and relu; never accumulating) with A given
// as [k, m] (row stride m) and B's row kk starting at b + b_offsets[kk]. A stride-1
// convolution over a zero-padded plane of width wp is this product with one row per tap
// (channel c, ky, kx) at offset c * plane + ky * wp + kx, n = output rows * wp columns
// (those past the output's width are junk), without an im2col copy. Row reductions run in
// one fixed order, as in GemmFn. Reads B up to b_offsets[kk] + n - 1 for every kk.
using GemmOffsetRowsFn = void (*)(int m, int n, int k, const float* a_t, const float* b, const long* b_offsets,
                                  float* c, long ldc, GemmEpilogue epilogue);

// A direct 3x3 SAME convolution for ONE input channel (a grayscale first layer), + bias,
// ReLU, on one image. Faster than im2col + GEMM there: the GEMM's k would be 9.
//   x_padded [h + 2, w + 2]: the h x w image with a zero border of 1
//   kernel [3, 3, 1, c] (HWIO), bias [c], out [h, w, c] (NHWC, post-ReLU)
// Requires c % Kernels::direct_conv_channels == 0; any h, w >= 1.
using Conv1ForwardFn = void (*)(const float* x_padded, int h, int w, const float* kernel, const float* bias, int c,
                                float* out);

// That convolution's parameter gradients for one image, ACCUMULATED into dkernel [3,3,1,c]
// and dbias [c]:
//   dkernel[dy,dx,0,ch] += sum_{y,x} x_padded[y+dy, x+dx] * dout[y, x, ch];  dbias[ch] += sum dout
// dout [h, w, c] is the gradient w.r.t. the pre-activation output. Same requirement on c.
using Conv1WeightGradFn = void (*)(const float* x_padded, int h, int w, const float* dout, int c, float* dkernel,
                                   float* dbias);

struct Kernels {
  Isa isa;
  GemmFn gemm;
  GemmOffsetRowsFn gemm_offset_rows;
  Conv1ForwardFn conv1_forward;
  Conv1WeightGradFn conv1_weight_grad;
  int direct_conv_channels;  // the output-channel multiple conv1_forward/conv1_weight_grad need
};

// The table for a resolved, supported ISA (see resolve_isa). Throws spmd::Error otherwise.
const Kernels& kernels_for(Isa isa);

}  // namespace spmd::models::cnn_cpu
