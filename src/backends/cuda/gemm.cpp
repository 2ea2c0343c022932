#include "spmd/backends/cuda/gemm.hpp"

#include <climits>
#include <string>

#include "spmd/backends/cuda/check.hpp"

namespace spmd::backends::cuda {

namespace {

int as_int(std::int64_t value, const char* name, const char* what) {
  if (value < 1 || value > INT_MAX)
    throw Error(std::string(what) + ": GEMM " + name + " = " + std::to_string(value) + " is outside cuBLAS's range [1, " +
                std::to_string(INT_MAX) + "]");
  return static_cast<int>(value);
}

// The column-major view of the row-major product: C^T[N, M] = op(B)^T op(A)^T, where a
// row-major matrix stored with row stride ld IS the column-major transpose with leading
// dimension ld. So the operands swap, the transposition flags carry over unchanged, and
// M and N swap.
struct ColumnMajorCall {
  cublasOperation_t op_first, op_second;
  int m, n, k, ld_first, ld_second, ldc;
};

ColumnMajorCall column_major(const RowMajorGemm& g, const char* what) {
  ColumnMajorCall c{};
  c.op_first = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  c.op_second = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  c.m = as_int(g.N, "N", what);
  c.n = as_int(g.M, "M", what);
  c.k = as_int(g.K, "K", what);
  c.ld_first = as_int(g.ldb, "ldb", what);
  c.ld_second = as_int(g.lda, "lda", what);
  c.ldc = as_int(g.ldc, "ldc", what);
  // cuBLAS would reject these too, with a less helpful INVALID_VALUE.
  const std::int64_t b_cols = g.trans_b ? g.K : g.N, a_cols = g.trans_a ? g.M : g.K;
  if (g.ldb < b_cols || g.lda < a_cols || g.ldc < g.N)
    throw Error(std::string(what) + ": GEMM row strides (lda " + std::to_string(g.lda) + ", ldb " + std::to_string(g.ldb) +
                ", ldc " + std::to_string(g.ldc) + ") are shorter than the rows they stride");
  return c;
}

}  // namespace

void sgemm_row_major(cublasHandle_t handle, const RowMajorGemm& g, float alpha, const float* A, const float* B,
                     float beta, float* C, const char* what) {
  const ColumnMajorCall c = column_major(g, what);
  SPMD_CHECK_CUBLAS(cublasSgemm(handle, c.op_first, c.op_second, c.m, c.n, c.k, &alpha, B, c.ld_first, A, c.ld_second,
                                &beta, C, c.ldc),
                    what);
}

void sgemm_row_major_strided_batched(cublasHandle_t handle, const RowMajorGemm& g, float alpha, const float* A,
                                     std::int64_t stride_a, const float* B, std::int64_t stride_b, float beta, float* C,
                                     std::int64_t stride_c, std::int64_t batch, const char* what) {
  const ColumnMajorCall c = column_major(g, what);
  const int batches = as_int(batch, "batch count", what);
  SPMD_CHECK_CUBLAS(cublasSgemmStridedBatched(handle, c.op_first, c.op_second, c.m, c.n, c.k, &alpha, B, c.ld_first,
                                              stride_b, A, c.ld_second, stride_a, &beta, C, c.ldc, stride_c, batches),
                    what);
}

}  // namespace spmd::backends::cuda

