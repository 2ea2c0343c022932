#include "spmd/models/cnn_kernels.hpp"

#include <cblas.h>

#include <algorithm>

#include "cnn_kernels_variants.hpp"
#include "spmd/runtime/cpu_features.hpp"
#include "spmd/runtime/error.hpp"

namespace spmd::models::cnn_cpu {
namespace {

// cblas_sgemm with the same contract as the own kernels, the epilogue as a second pass.
void blas_gemm(bool a_transposed, int m, int n, int k, const float* a, long lda, const float* b, long ldb, float* c,
               long ldc, bool accumulate, GemmEpilogue epilogue) {
  if (m <= 0 || n <= 0) return;
  if (k > 0) {
    cblas_sgemm(CblasRowMajor, a_transposed ? CblasTrans : CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a,
                static_cast<int>(lda), b, static_cast<int>(ldb), accumulate ? 1.0f : 0.0f, c, static_cast<int>(ldc));
  } else if (!accumulate) {
    for (int i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
  }
  if (epilogue.sgd_params != nullptr) {
    for (int i = 0; i < m; ++i)
      optim::sgd_momentum_step({epilogue.sgd_params + i * ldc, static_cast<std::size_t>(n)},
                               {epilogue.sgd_trace + i * ldc, static_cast<std::size_t>(n)},
                               {c + i * ldc, static_cast<std::size_t>(n)}, epilogue.sgd);
    return;
  }
  if (epilogue.bias == nullptr && epilogue.row_bias == nullptr && !epilogue.relu) return;
  for (int i = 0; i < m; ++i) {
    float* row = c + i * ldc;
    if (epilogue.bias != nullptr)
      for (int j = 0; j < n; ++j) row[j] += epilogue.bias[j];
    if (epilogue.row_bias != nullptr)
      for (int j = 0; j < n; ++j) row[j] += epilogue.row_bias[i];
    if (epilogue.relu)
      for (int j = 0; j < n; ++j) row[j] = std::max(row[j], 0.0f);
  }
}

bool cpu_has_avx512() { return runtime::cpu_allows(runtime::CpuLevel::avx512); }

}  // namespace

const char* to_string(Isa isa) {
  switch (isa) {
    case Isa::Auto: return "auto";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
    case Isa::Blas: return "blas";
  }
  return "?";
}

Isa parse_isa(const std::string& text) {
  for (Isa isa : {Isa::Auto, Isa::Avx2, Isa::Avx512, Isa::Blas})
    if (text == to_string(isa)) return isa;
  throw Error("unknown CNN CPU kernel set '" + text + "': expected one of auto, avx2, avx512, blas");
}

bool isa_supported(Isa isa) { return isa != Isa::Avx512 || cpu_has_avx512(); }

Isa resolve_isa(Isa isa) {
  if (isa == Isa::Auto) return cpu_has_avx512() ? Isa::Avx512 : Isa::Avx2;
  if (!isa_supported(isa))
    throw Error(std::string("CNN CPU kernel set '") + to_string(isa) +
                "' is not supported by this CPU (needs AVX-512 F/VL/DQ/BW)" +
                runtime::cpu_cap_note() + "; use 'auto' or 'avx2'");
  return isa;
}

const Kernels& kernels_for(Isa isa) {
  switch (resolve_isa(isa)) {
    case Isa::Avx512: return avx512_kernels();
    case Isa::Blas: {
      static const Kernels table{Isa::Blas, &blas_gemm, avx2_kernels().gemm_offset_rows, avx2_kernels().conv1_forward,
                                 avx2_kernels().conv1_weight_grad, avx2_kernels().direct_conv_channels};
      return table;
    }
    default: return avx2_kernels();
  }
}

}  // namespace spmd::models::cnn_cpu
