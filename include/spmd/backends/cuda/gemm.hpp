#pragma once
// Single-precision GEMM on the GPU in ROW-MAJOR terms (cuBLAS is column-major; the
// translation, C^T = op(B)^T op(A)^T, is done here once so that callers read like the math):
//
//   C[M, N] = alpha * op(A)[M, K] * op(B)[K, N] + beta * C
//
// A, B, C are row-major device arrays; lda, ldb, ldc are the row strides (in floats) of the
// matrices AS STORED: A is stored [M, K] when !trans_a and [K, M] when trans_a, likewise B.
// Dimensions are int64 for the callers' convenience; each must fit cuBLAS's int (spmd::Error
// otherwise). M, N, K >= 1. what names the operation in error messages. Only with the CUDA
// backend.
#include <cublas_v2.h>

#include <cstdint>

namespace spmd::backends::cuda {

struct RowMajorGemm {
  bool trans_a = false;
  bool trans_b = false;
  std::int64_t M = 0, N = 0, K = 0;
  std::int64_t lda = 0, ldb = 0, ldc = 0;
};

void sgemm_row_major(cublasHandle_t handle, const RowMajorGemm& g, float alpha, const float* A, const float* B,
                     float beta, float* C, const char* what);

// batch independent GEMMs of the same shape; matrix i of each operand starts stride_* floats
// after matrix i-1.
void sgemm_row_major_strided_batched(cublasHandle_t handle, const RowMajorGemm& g, float alpha, const float* A,
                                     std::int64_t stride_a, const float* B, std::int64_t stride_b, float beta, float* C,
                                     std::int64_t stride_c, std::int64_t batch, const char* what);

}  // namespace spmd::backends::cuda
