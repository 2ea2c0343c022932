// The CUDA building blocks: check macros and the handle owner (no GPU needed), device/pinned
// buffers and the row-major GEMM wrappers (on a GPU; skipped visibly without one).
#include <gtest/gtest.h>

#include "gpu_test_support.hpp"

#include <array>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "spmd/runtime/devices.hpp"
#include "spmd/runtime/error.hpp"

#include "spmd/backends/cuda/check.hpp"
#include "spmd/backends/cuda/cuda_device.hpp"
#include "spmd/backends/cuda/device_buffer.hpp"
#include "spmd/backends/cuda/gemm.hpp"
#include "spmd/backends/cuda/stream.hpp"
#include "spmd/backends/cuda/unique_handle.hpp"

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(CudaCheck, CudaErrorNamesRankCallFileLineErrorAndHint) {
  // Fails with or without a GPU: -1 is never a device.
  try {
    SPMD_CHECK_CUDA(cudaSetDevice(-1), "choosing a GPU");
    FAIL() << "cudaSetDevice(-1) succeeded";
  } catch (const spmd::Error& e) {
    const std::string m = e.what();
    EXPECT_TRUE(contains(m, "rank ")) << m;
    EXPECT_TRUE(contains(m, "CUDA call failed: cudaSetDevice(-1)")) << m;
    EXPECT_TRUE(contains(m, "tests/cuda/cuda_tensor_test.cpp:")) << m;
    EXPECT_TRUE(contains(m, ": cudaError")) << m;  // the error's name, then its description
    EXPECT_TRUE(contains(m, "hint: choosing a GPU")) << m;
  }
  // An invalid device is not a sticky error: it was cleared and does not leak into the
  // next check. (Without a driver every call keeps failing, so only with a GPU.)
  if (spmd::backends::cuda::visible_gpu_count() > 0) EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST(CudaCheck, CublasErrorNamesStatus) {
  try {
    SPMD_CHECK_CUBLAS(cublasSetStream(nullptr, nullptr), "binding a stream");
    FAIL() << "cublasSetStream on a null handle succeeded";
  } catch (const spmd::Error& e) {
    const std::string m = e.what();
    EXPECT_TRUE(contains(m, "cuBLAS call failed: cublasSetStream(nullptr, nullptr)")) << m;
    EXPECT_TRUE(contains(m, "CUBLAS_STATUS_NOT_INITIALIZED")) << m;
    EXPECT_TRUE(contains(m, "hint: binding a stream")) << m;
  }
}

// Stream, Event and CublasHandle own their handles through UniqueHandle: each handle is
// released exactly once, by its last owner; moving transfers it, and a move-assignment
// releases the handle it replaces.
std::vector<int*> released;
void record_release(int* handle) noexcept { released.push_back(handle); }

TEST(UniqueHandle, ReleasesEachHandleOnceByItsLastOwner) {
  using Owner = spmd::backends::cuda::UniqueHandle<int*, record_release>;
  int a = 0, b = 0;
  released.clear();
  {
    Owner first(&a);
    Owner moved(std::move(first));
    EXPECT_EQ(first.get(), nullptr);
    EXPECT_EQ(moved.get(), &a);
    Owner other(&b);
    moved = std::move(other);  // releases a, now owns b
    ASSERT_EQ(released, std::vector<int*>{&a});
    moved = std::move(moved);  // NOLINT: self-move keeps b
    EXPECT_EQ(moved.get(), &b);
    Owner empty;
  }
  EXPECT_EQ(released, (std::vector<int*>{&a, &b}));
}

TEST(DeviceBuffer, EmptyBuffersMakeNoCudaCall) {
  // Works without a GPU: a zero-element buffer owns nothing.
  spmd::backends::cuda::DeviceBuffer<float> d(0, "nothing");
  EXPECT_EQ(d.data(), nullptr);
  EXPECT_EQ(d.size(), 0u);
  spmd::backends::cuda::PinnedBuffer<double> p(0, "nothing");
  EXPECT_EQ(p.data(), nullptr);
  spmd::backends::cuda::DeviceBuffer<float> moved(std::move(d));
  EXPECT_EQ(moved.size(), 0u);
}

TEST(DeviceBuffer, RoundTripsWithOffsetsZeroAndMoves) {
  SKIP_WITHOUT_GPU();
  ASSERT_NO_THROW(SPMD_CHECK_CUDA(cudaSetDevice(0), "test GPU"));
  spmd::backends::cuda::Stream stream;
  for (std::size_t n : {1u, 7u, 1000u, 1u << 20}) {
    std::vector<std::int32_t> host(n);
    for (std::size_t i = 0; i < n; ++i) host[i] = static_cast<std::int32_t>(i * 2654435761u);
    spmd::backends::cuda::DeviceBuffer<std::int32_t> d(n + 5, "test buffer");
    d.zero(stream.get());
    d.upload(host.data(), n, stream.get(), 5);  // lands at [5, 5 + n)
    spmd::backends::cuda::PinnedBuffer<std::int32_t> back(n + 5, "test staging");
    d.download(back.data(), n + 5, stream.get());
    stream.synchronize("test round trip");
    for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(back.data()[i], 0) << "n " << n << " i " << i;
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(back.data()[i + 5], host[i]) << "n " << n << " i " << i;
    // A moved buffer keeps the memory and the contents.
    spmd::backends::cuda::DeviceBuffer<std::int32_t> moved = std::move(d);
    EXPECT_EQ(d.data(), nullptr);
    EXPECT_EQ(moved.size(), n + 5);
    std::vector<std::int32_t> again(n);
    moved.download(again.data(), n, stream.get(), 5);
    stream.synchronize("test round trip after move");
    EXPECT_EQ(again, host);
    // Copies past the end are refused before reaching CUDA.
    EXPECT_THROW(moved.upload(host.data(), n, stream.get(), 6), spmd::Error);
  }
}

// Plain row-major reference: C = op(A) op(B) with the stored strides.
std::vector<float> reference_gemm(const spmd::backends::cuda::RowMajorGemm& g, const std::vector<float>& A,
                                  const std::vector<float>& B) {
  std::vector<float> C(static_cast<std::size_t>(g.M * g.ldc), 0.0f);
  for (std::int64_t i = 0; i < g.M; ++i)
    for (std::int64_t j = 0; j < g.N; ++j) {
      double s = 0;
      for (std::int64_t k = 0; k < g.K; ++k) {
        const float a = g.trans_a ? A[static_cast<std::size_t>(k * g.lda + i)] : A[static_cast<std::size_t>(i * g.lda + k)];
        const float b = g.trans_b ? B[static_cast<std::size_t>(j * g.ldb + k)] : B[static_cast<std::size_t>(k * g.ldb + j)];
        s += static_cast<double>(a) * b;
      }
      C[static_cast<std::size_t>(i * g.ldc + j)] = static_cast<float>(s);
    }
  return C;
}

TEST(RowMajorGemm, MatchesReferenceForEveryTransposeAndStride) {
  SKIP_WITHOUT_GPU();
  ASSERT_NO_THROW(SPMD_CHECK_CUDA(cudaSetDevice(0), "test GPU"));
  spmd::backends::cuda::Stream stream;
  spmd::backends::cuda::CublasHandle cublas(stream.get());
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (auto [M, N, K] : {std::array<std::int64_t, 3>{1, 1, 1}, {5, 3, 7}, {10, 784, 257}, {33, 10, 2}})
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (std::int64_t pad : {0, 3}) {  // row strides longer than the rows
          spmd::backends::cuda::RowMajorGemm g{ta == 1, tb == 1, M, N, K, 0, 0, 0};
          g.lda = (g.trans_a ? M : K) + pad;
          g.ldb = (g.trans_b ? K : N) + pad;
          g.ldc = N + pad;
          std::vector<float> A(static_cast<std::size_t>((g.trans_a ? K : M) * g.lda));
          std::vector<float> B(static_cast<std::size_t>((g.trans_b ? N : K) * g.ldb));
          for (float& v : A) v = u(rng);
          for (float& v : B) v = u(rng);
          const auto expected = reference_gemm(g, A, B);
          spmd::backends::cuda::DeviceBuffer<float> dA(A.size(), "A"), dB(B.size(), "B"), dC(expected.size(), "C");
          dA.upload(A.data(), A.size(), stream.get());
          dB.upload(B.data(), B.size(), stream.get());
          dC.zero(stream.get());
          spmd::backends::cuda::sgemm_row_major(cublas.get(), g, 1.0f, dA.data(), dB.data(), 0.0f, dC.data(), "test gemm");
          std::vector<float> C(expected.size());
          dC.download(C.data(), C.size(), stream.get());
          stream.synchronize("test gemm");
          for (std::int64_t i = 0; i < M; ++i)
            for (std::int64_t j = 0; j < N; ++j) {
              const std::size_t at = static_cast<std::size_t>(i * g.ldc + j);
              ASSERT_NEAR(C[at], expected[at], 1e-5 * static_cast<double>(K))
                  << "M " << M << " N " << N << " K " << K << " ta " << ta << " tb " << tb << " pad " << pad;
            }
        }
}

TEST(RowMajorGemm, StridedBatchedMatchesOneGemmPerMatrix) {
  SKIP_WITHOUT_GPU();
  ASSERT_NO_THROW(SPMD_CHECK_CUDA(cudaSetDevice(0), "test GPU"));
  spmd::backends::cuda::Stream stream;
  spmd::backends::cuda::CublasHandle cublas(stream.get());
  // The logreg gradient's shape: G_b[F, C] = X_b^T D_b over blocks of R rows.
  const std::int64_t F = 13, C = 4, R = 9, batches = 5;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> X(static_cast<std::size_t>(batches * R * F)), D(static_cast<std::size_t>(batches * R * C));
  for (float& v : X) v = u(rng);
  for (float& v : D) v = u(rng);
  spmd::backends::cuda::DeviceBuffer<float> dX(X.size(), "X"), dD(D.size(), "D"), dG(static_cast<std::size_t>(batches * F * C), "G");
  dX.upload(X.data(), X.size(), stream.get());
  dD.upload(D.data(), D.size(), stream.get());
  const spmd::backends::cuda::RowMajorGemm g{true, false, F, C, R, F, C, C};
  spmd::backends::cuda::sgemm_row_major_strided_batched(cublas.get(), g, 1.0f, dX.data(), R * F, dD.data(), R * C, 0.0f,
                                                dG.data(), F * C, batches, "test batched gemm");
  std::vector<float> G(dG.size());
  dG.download(G.data(), G.size(), stream.get());
  stream.synchronize("test batched gemm");
  for (std::int64_t b = 0; b < batches; ++b) {
    const std::vector<float> Xb(X.begin() + b * R * F, X.begin() + (b + 1) * R * F);
    const std::vector<float> Db(D.begin() + b * R * C, D.begin() + (b + 1) * R * C);
    const auto expected = reference_gemm(g, Xb, Db);
    for (std::int64_t e = 0; e < F * C; ++e)
      ASSERT_NEAR(G[static_cast<std::size_t>(b * F * C + e)], expected[static_cast<std::size_t>(e)], 1e-5)
          << "batch " << b << " entry " << e;
  }
}

TEST(RowMajorGemm, RejectsDimensionsCublasCannotTake) {
  // Checked before cuBLAS is called: no GPU needed, the handle is never used.
  const spmd::backends::cuda::RowMajorGemm too_big{false, false, std::int64_t{1} << 31, 1, 1, 1, 1, 1};
  EXPECT_THROW(spmd::backends::cuda::sgemm_row_major(nullptr, too_big, 1.0f, nullptr, nullptr, 0.0f, nullptr, "test"),
               spmd::Error);
  const spmd::backends::cuda::RowMajorGemm short_stride{false, false, 4, 5, 6, 5, 5, 5};  // lda 5 < K 6
  EXPECT_THROW(spmd::backends::cuda::sgemm_row_major(nullptr, short_stride, 1.0f, nullptr, nullptr, 0.0f, nullptr, "test"),
               spmd::Error);
}

}  // namespace

