// The CPU kernel sets (AVX2, AVX-512 where the CPU has it, cblas) against scalar double
// references: GEMM over many shapes, conv1 forward and its weight gradient.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "spmd/models/cnn_kernels.hpp"
#include "spmd/optim/sgd.hpp"
#include "spmd/runtime/error.hpp"

namespace {

using spmd::models::cnn_cpu::Isa;
using spmd::models::cnn_cpu::Kernels;

std::vector<Isa> testable_isas() {
  std::vector<Isa> isas;
  for (Isa isa : {Isa::Avx2, Isa::Avx512, Isa::Blas})
    if (spmd::models::cnn_cpu::isa_supported(isa)) isas.push_back(isa);
  return isas;
}

std::vector<float> random_vector(std::size_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

class CnnKernels : public ::testing::TestWithParam<Isa> {
 protected:
  const Kernels& k() const { return spmd::models::cnn_cpu::kernels_for(GetParam()); }
};

TEST_P(CnnKernels, GemmMatchesScalarReferenceOverShapesLayoutsAndEpilogues) {
  std::mt19937 rng(11);
  const int ms[] = {1, 2, 5, 6, 7, 13, 17, 33};
  const int ns[] = {16, 32, 48, 64, 80, 144, 288};
  const int ks[] = {0, 1, 3, 64, 161, 330};
  int cases = 0;
  for (int m : ms)
    for (int n : ns)
      for (int kk : ks)
        for (int variant = 0; variant < 4; ++variant) {
          const bool a_t = variant & 1;
          const bool accumulate = variant & 2;
          // Row strides larger than the logical width catch stride mix-ups.
          const long lda = (a_t ? m : kk) + 3, ldb = n + 16, ldc = n + 32;
          const auto a = random_vector(static_cast<std::size_t>((a_t ? kk : m) * lda + 1), rng);
          const auto b = random_vector(static_cast<std::size_t>(kk * ldb + 1), rng);
          const auto bias = random_vector(static_cast<std::size_t>(n), rng);
          const auto row_bias = random_vector(static_cast<std::size_t>(m), rng);
          auto c = random_vector(static_cast<std::size_t>(m * ldc), rng);
          const auto c0 = c;
          const bool use_bias = (cases % 3) == 0, relu = (cases % 2) == 0, use_row_bias = (cases % 5) < 2;
          k().gemm(a_t, m, n, kk, a.data(), lda, b.data(), ldb, c.data(), ldc, accumulate,
                   {use_bias ? bias.data() : nullptr, relu, use_row_bias ? row_bias.data() : nullptr});
          for (int i = 0; i < m; ++i) {
            for (int j = 0; j < ldc; ++j) {
              const std::size_t at = static_cast<std::size_t>(i * ldc + j);
              if (j >= n) {
                ASSERT_EQ(c[at], c0[at]) << "wrote outside C at row " << i << " col " << j;
                continue;
              }
              double ref = accumulate ? c0[at] : 0.0, mag = std::abs(ref);
              for (int p = 0; p < kk; ++p) {
                const double av = a_t ? a[static_cast<std::size_t>(p * lda + i)] : a[static_cast<std::size_t>(i * lda + p)];
                const double term = av * b[static_cast<std::size_t>(p * ldb + j)];
                ref += term;
                mag += std::abs(term);
              }
              if (use_bias) ref += bias[static_cast<std::size_t>(j)], mag += std::abs(bias[static_cast<std::size_t>(j)]);
              if (use_row_bias)
                ref += row_bias[static_cast<std::size_t>(i)], mag += std::abs(row_bias[static_cast<std::size_t>(i)]);
              if (relu) ref = std::max(ref, 0.0);
              ASSERT_NEAR(c[at], ref, 1e-5 * mag + 1e-7)
                  << "m=" << m << " n=" << n << " k=" << kk << " a_t=" << a_t << " acc=" << accumulate << " at (" << i
                  << "," << j << ")";
            }
          }
          ++cases;
        }
  EXPECT_EQ(cases, 8 * 7 * 6 * 4);
}

TEST_P(CnnKernels, GemmWithFusedSgdEqualsGemmThenSgdStep) {
  std::mt19937 rng(14);
  const spmd::optim::SgdMomentum opt{0.1f, 0.9f};
  // The last four have columns past the last whole vector (the masked tail).
  for (auto [m, n, kk, a_t] : {std::array{7, 48, 5, 1}, std::array{13, 256, 32, 1}, std::array{6, 64, 200, 0},
                               std::array{1, 16, 1, 0}, std::array{9, 80, 400, 1}, std::array{4, 32, 0, 1},
                               std::array{7, 12, 5, 1}, std::array{5, 37, 200, 0}, std::array{3, 9, 1, 1},
                               std::array{13, 100, 300, 1}}) {
    const long lda = a_t ? m : kk, ldc = n + 16;  // params and trace share C's row stride
    const auto a = random_vector(static_cast<std::size_t>((a_t ? kk : m) * (lda ? lda : 1)), rng);
    const auto b = random_vector(static_cast<std::size_t>(kk * n + 1), rng);
    auto w = random_vector(static_cast<std::size_t>(m * ldc), rng);
    auto t = random_vector(w.size(), rng);
    auto w_ref = w, t_ref = t;
    std::vector<float> c(w.size()), g(w.size());
    k().gemm(a_t, m, n, kk, a.data(), lda, b.data(), n, g.data(), ldc, false, {});
    for (int i = 0; i < m; ++i)
      spmd::optim::sgd_momentum_step({w_ref.data() + i * ldc, static_cast<std::size_t>(n)},
                                     {t_ref.data() + i * ldc, static_cast<std::size_t>(n)},
                                     {g.data() + i * ldc, static_cast<std::size_t>(n)}, opt);
    spmd::models::cnn_cpu::GemmEpilogue ep;
    ep.sgd_params = w.data();
    ep.sgd_trace = t.data();
    ep.sgd = opt;
    k().gemm(a_t, m, n, kk, a.data(), lda, b.data(), n, c.data(), ldc, false, ep);
    for (std::size_t i = 0; i < w.size(); ++i) {
      // Columns past n (row padding) must be left alone; the rest equal the two-pass result.
      ASSERT_NEAR(w[i], w_ref[i], 1e-6f * (1 + std::abs(w_ref[i]))) << "m=" << m << " n=" << n << " k=" << kk << " at " << i;
      ASSERT_NEAR(t[i], t_ref[i], 1e-6f * (1 + std::abs(t_ref[i]))) << "m=" << m << " n=" << n << " k=" << kk << " at " << i;
    }
  }
}

TEST_P(CnnKernels, GemmTailColumnsMatchScalarReferenceAndStayInsideC) {
  // n not a multiple of the vector width: the right-edge columns go through masked loads and
  // stores. Each row of B and C is followed by sentinel floats that must be neither read
  // into the result (B's are NaN) nor written (C's stay 42). (The fused SGD epilogue on
  // such columns: GemmWithFusedSgdEqualsGemmThenSgdStep.)
  std::mt19937 rng(15);
  for (int n : {1, 3, 5, 7, 9, 12, 15, 17, 24, 31, 33, 72, 100}) {
    for (auto [m, kk, a_t] : {std::array{1, 1, 0}, std::array{7, 18, 0}, std::array{13, 200, 1}, std::array{6, 0, 1}}) {
      const long lda = (a_t ? m : kk) + 1, ldb = n + 5, ldc = n + 7;
      const auto a = random_vector(static_cast<std::size_t>((a_t ? kk : m) * lda + 1), rng);
      auto b = random_vector(static_cast<std::size_t>(kk * ldb + 1), rng);
      for (int p = 0; p < kk; ++p)
        for (long j = n; j < ldb; ++j) b[static_cast<std::size_t>(p * ldb + j)] = std::nanf("");
      const auto bias = random_vector(static_cast<std::size_t>(n), rng);
      const auto row_bias = random_vector(static_cast<std::size_t>(m), rng);
      auto c = random_vector(static_cast<std::size_t>(m * ldc), rng);
      for (int i = 0; i < m; ++i)
        for (long j = n; j < ldc; ++j) c[static_cast<std::size_t>(i * ldc + j)] = 42.0f;
      const auto c0 = c;
      for (int variant = 0; variant < 3; ++variant) {
        c = c0;
        const bool accumulate = variant == 1, epilogue = variant == 2;
        k().gemm(a_t, m, n, kk, a.data(), lda, b.data(), ldb, c.data(), ldc, accumulate,
                 {epilogue ? bias.data() : nullptr, epilogue, epilogue ? row_bias.data() : nullptr});
        for (int i = 0; i < m; ++i)
          for (long j = 0; j < ldc; ++j) {
            const std::size_t at = static_cast<std::size_t>(i * ldc + j);
            if (j >= n) {
              ASSERT_EQ(c[at], 42.0f) << "wrote outside C: n=" << n << " row " << i << " col " << j;
              continue;
            }
            double ref = accumulate ? c0[at] : 0.0, mag = std::abs(ref);
            for (int p = 0; p < kk; ++p) {
              const double av = a_t ? a[static_cast<std::size_t>(p * lda + i)] : a[static_cast<std::size_t>(i * lda + p)];
              ref += av * b[static_cast<std::size_t>(p * ldb + j)];
              mag += std::abs(av * b[static_cast<std::size_t>(p * ldb + j)]);
            }
            if (epilogue) {
              ref = std::max(ref + bias[static_cast<std::size_t>(j)] + row_bias[static_cast<std::size_t>(i)], 0.0);
              mag += std::abs(bias[static_cast<std::size_t>(j)]) + std::abs(row_bias[static_cast<std::size_t>(i)]);
            }
            ASSERT_NEAR(c[at], ref, 1e-5 * mag + 1e-7) << "m=" << m << " n=" << n << " k=" << kk << " a_t=" << a_t
                                                       << " variant " << variant << " at (" << i << "," << j << ")";
          }
      }
    }
  }
}

TEST_P(CnnKernels, GemmOffsetRowsMatchesScalarReferenceAndStaysInsideC) {
  // B's rows at arbitrary offsets into one buffer (overlapping, out of order: a direct
  // convolution's taps), A given transposed; every m the tile choice treats differently
  // (multiples of 8 take 8-row tiles; from 32 rows B, and with n wide enough A, are packed
  // per block), n with and without a masked tail. The same bits as gemm on B written out, by
  // the GEMM of the same kernels: the blas set borrows AVX2's gemm_offset_rows, while its gemm
  // is OpenBLAS's, whose order of sums depends on the kernels OpenBLAS picks for the host.
  const Kernels& own = k().isa == Isa::Blas ? kernels_for(Isa::Avx2) : k();
  std::mt19937 rng(17);
  for (int m : {1, 3, 6, 8, 13, 16, 24, 37, 64})
    for (int n : {1, 7, 16, 33, 100, 300})
      for (int kk : {1, 9, 25, 200}) {
        const long ldc = n + 3;
        const auto a_t = random_vector(static_cast<std::size_t>(kk * m), rng);
        const auto buffer = random_vector(static_cast<std::size_t>(n + 500), rng);
        std::vector<long> offsets(static_cast<std::size_t>(kk));
        std::uniform_int_distribution<long> at(0, 500);
        for (auto& o : offsets) o = at(rng);
        const auto bias = random_vector(static_cast<std::size_t>(n), rng);
        const auto row_bias = random_vector(static_cast<std::size_t>(m), rng);
        std::vector<float> c(static_cast<std::size_t>(m * ldc), 42.0f);
        const bool relu = (m + n + kk) % 2 == 0;
        k().gemm_offset_rows(m, n, kk, a_t.data(), buffer.data(), offsets.data(), c.data(), ldc,
                             {bias.data(), relu, row_bias.data()});
        std::vector<float> b_dense(static_cast<std::size_t>(kk * n)), c_dense(static_cast<std::size_t>(m * ldc), 42.0f);
        for (int p = 0; p < kk; ++p)
          std::copy_n(buffer.begin() + offsets[static_cast<std::size_t>(p)], n, b_dense.begin() + p * n);
        own.gemm(true, m, n, kk, a_t.data(), m, b_dense.data(), n, c_dense.data(), ldc, false, {bias.data(), relu, row_bias.data()});
        ASSERT_EQ(c, c_dense) << "m=" << m << " n=" << n << " k=" << kk << ": not the bits of gemm on B written out";
        for (int i = 0; i < m; ++i)
          for (long j = 0; j < ldc; ++j) {
            const float got = c[static_cast<std::size_t>(i * ldc + j)];
            if (j >= n) {
              ASSERT_EQ(got, 42.0f) << "wrote outside C at row " << i << " col " << j;
              continue;
            }
            double ref = 0.0, mag = 0.0;
            for (int p = 0; p < kk; ++p) {
              const double term = static_cast<double>(a_t[static_cast<std::size_t>(p * m + i)]) *
                                  buffer[static_cast<std::size_t>(offsets[static_cast<std::size_t>(p)] + j)];
              ref += term;
              mag += std::abs(term);
            }
            ref += bias[static_cast<std::size_t>(j)] + row_bias[static_cast<std::size_t>(i)];
            mag += std::abs(bias[static_cast<std::size_t>(j)]) + std::abs(row_bias[static_cast<std::size_t>(i)]);
            if (relu) ref = std::max(ref, 0.0);
            ASSERT_NEAR(got, ref, 1e-5 * mag + 1e-7) << "m=" << m << " n=" << n << " k=" << kk << " at (" << i << "," << j << ")";
          }
      }
}

TEST_P(CnnKernels, GemmWithNoRowsOrColumnsTouchesNothing) {
  float c[4] = {1, 2, 3, 4};
  const float a[4] = {1, 1, 1, 1}, b[64] = {};
  k().gemm(false, 0, 16, 4, a, 4, b, 16, c, 16, false, {});
  k().gemm(true, 2, 0, 2, a, 2, b, 16, c, 16, false, {});
  EXPECT_EQ(c[0], 1.0f);
  EXPECT_EQ(c[3], 4.0f);
}

// conv1 on one image, in double: out[y,x,c] = relu(bias[c] + sum_taps xp[y+dy,x+dx] w[dy,dx,c]).
std::vector<double> conv1_reference(const std::vector<float>& xp, const std::vector<float>& w,
                                    const std::vector<float>& bias) {
  std::vector<double> out(28 * 28 * 32);
  for (int y = 0; y < 28; ++y)
    for (int x = 0; x < 28; ++x)
      for (int c = 0; c < 32; ++c) {
        double s = bias[static_cast<std::size_t>(c)];
        for (int dy = 0; dy < 3; ++dy)
          for (int dx = 0; dx < 3; ++dx)
            s += static_cast<double>(xp[static_cast<std::size_t>((y + dy) * 30 + x + dx)]) *
                 w[static_cast<std::size_t>((dy * 3 + dx) * 32 + c)];
        out[static_cast<std::size_t>((y * 28 + x) * 32 + c)] = std::max(s, 0.0);
      }
  return out;
}

std::vector<float> padded_random_image(std::mt19937& rng) {
  const auto img = random_vector(28 * 28, rng, 0.0f, 1.0f);
  std::vector<float> xp(30 * 30, 0.0f);
  for (int y = 0; y < 28; ++y)
    for (int x = 0; x < 28; ++x) xp[static_cast<std::size_t>((y + 1) * 30 + x + 1)] = img[static_cast<std::size_t>(y * 28 + x)];
  return xp;
}

TEST_P(CnnKernels, Conv1ForwardMatchesScalarReference) {
  std::mt19937 rng(12);
  for (int trial = 0; trial < 3; ++trial) {
    const auto xp = padded_random_image(rng);
    const auto w = random_vector(9 * 32, rng, -0.5f, 0.5f);
    const auto bias = random_vector(32, rng, -0.3f, 0.3f);
    std::vector<float> out(28 * 28 * 32, -7.0f);
    k().conv1_forward(xp.data(), 28, 28, w.data(), bias.data(), 32, out.data());
    const auto ref = conv1_reference(xp, w, bias);
    int zeros = 0;
    for (std::size_t i = 0; i < out.size(); ++i) {
      ASSERT_NEAR(out[i], ref[i], 1e-5) << "at " << i;
      zeros += out[i] == 0.0f;
    }
    // Both ReLU branches are exercised.
    EXPECT_GT(zeros, 1000);
    EXPECT_LT(zeros, 24000);
  }
}

TEST_P(CnnKernels, Conv1WeightGradAccumulatesTheAdjointOfConv1) {
  std::mt19937 rng(13);
  const auto xp = padded_random_image(rng);
  const auto dout = random_vector(28 * 28 * 32, rng);
  auto dk = random_vector(9 * 32, rng);  // accumulated into
  auto db = random_vector(32, rng);
  const auto dk0 = dk, db0 = db;
  k().conv1_weight_grad(xp.data(), 28, 28, dout.data(), 32, dk.data(), db.data());
  for (int c = 0; c < 32; ++c) {
    double sb = db0[static_cast<std::size_t>(c)], mb = std::abs(sb);
    for (int p = 0; p < 784; ++p) sb += dout[static_cast<std::size_t>(p * 32 + c)], mb += std::abs(dout[static_cast<std::size_t>(p * 32 + c)]);
    ASSERT_NEAR(db[static_cast<std::size_t>(c)], sb, 2e-5 * mb);
    for (int dy = 0; dy < 3; ++dy)
      for (int dx = 0; dx < 3; ++dx) {
        const std::size_t t = static_cast<std::size_t>((dy * 3 + dx) * 32 + c);
        double s = dk0[t], m = std::abs(s);
        for (int y = 0; y < 28; ++y)
          for (int x = 0; x < 28; ++x) {
            const double term = static_cast<double>(xp[static_cast<std::size_t>((y + dy) * 30 + x + dx)]) *
                                dout[static_cast<std::size_t>((y * 28 + x) * 32 + c)];
            s += term;
            m += std::abs(term);
          }
        ASSERT_NEAR(dk[t], s, 2e-5 * m) << "tap " << dy << "," << dx << " channel " << c;
      }
  }
}

TEST_P(CnnKernels, Conv1KernelsHandleAnyImageSizeAndChannelMultiple) {
  // Rows that are not a whole number of the forward kernel's pixel tiles, and more than
  // one channel block.
  std::mt19937 rng(16);
  const int multiple = k().direct_conv_channels;
  ASSERT_GT(multiple, 0);
  for (auto [h, w, c] : {std::array{1, 1, multiple}, std::array{5, 9, 2 * multiple}, std::array{15, 13, multiple},
                         std::array{3, 30, 3 * multiple}}) {
    const long pw = w + 2;
    std::vector<float> xp(static_cast<std::size_t>((h + 2) * pw), 0.0f);
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) xp[static_cast<std::size_t>((y + 1) * pw + x + 1)] = random_vector(1, rng)[0];
    const auto kernel = random_vector(static_cast<std::size_t>(9 * c), rng, -0.5f, 0.5f);
    const auto bias = random_vector(static_cast<std::size_t>(c), rng, -0.3f, 0.3f);
    std::vector<float> out(static_cast<std::size_t>(h * w * c), -7.0f);
    k().conv1_forward(xp.data(), h, w, kernel.data(), bias.data(), c, out.data());
    const auto dout = random_vector(out.size(), rng);
    std::vector<float> dk(kernel.size(), 0.0f), db(bias.size(), 0.0f);
    k().conv1_weight_grad(xp.data(), h, w, dout.data(), c, dk.data(), db.data());
    for (int ch = 0; ch < c; ++ch) {
      double sb = 0, mb = 0;
      for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x) {
          double s = bias[static_cast<std::size_t>(ch)];
          const double g = dout[static_cast<std::size_t>((y * w + x) * c + ch)];
          sb += g, mb += std::abs(g);
          for (int t = 0; t < 9; ++t)
            s += static_cast<double>(xp[static_cast<std::size_t>((y + t / 3) * pw + x + t % 3)]) *
                 kernel[static_cast<std::size_t>(t * c + ch)];
          ASSERT_NEAR(out[static_cast<std::size_t>((y * w + x) * c + ch)], std::max(s, 0.0), 1e-5)
              << h << "x" << w << "x" << c << " at (" << y << "," << x << "," << ch << ")";
        }
      ASSERT_NEAR(db[static_cast<std::size_t>(ch)], sb, 2e-5 * mb + 1e-7);
      for (int t = 0; t < 9; ++t) {
        double s = 0, m = 0;
        for (int y = 0; y < h; ++y)
          for (int x = 0; x < w; ++x) {
            const double term = static_cast<double>(xp[static_cast<std::size_t>((y + t / 3) * pw + x + t % 3)]) *
                                dout[static_cast<std::size_t>((y * w + x) * c + ch)];
            s += term, m += std::abs(term);
          }
        ASSERT_NEAR(dk[static_cast<std::size_t>(t * c + ch)], s, 2e-5 * m + 1e-7) << "tap " << t << " channel " << ch;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, CnnKernels, ::testing::ValuesIn(testable_isas()),
                         [](const auto& info) { return std::string(spmd::models::cnn_cpu::to_string(info.param)); });

TEST(CnnKernelSelection, AutoPicksASupportedSetAndNamesParse) {
  using namespace spmd::models::cnn_cpu;
  const Isa chosen = resolve_isa(Isa::Auto);
  EXPECT_TRUE(chosen == Isa::Avx2 || chosen == Isa::Avx512);
  EXPECT_TRUE(isa_supported(chosen));
  EXPECT_EQ(kernels_for(Isa::Auto).isa, chosen);
  for (Isa isa : {Isa::Auto, Isa::Avx2, Isa::Avx512, Isa::Blas}) EXPECT_EQ(parse_isa(to_string(isa)), isa);
  EXPECT_THROW(parse_isa("sse"), spmd::Error);
  if (!isa_supported(Isa::Avx512)) EXPECT_THROW(resolve_isa(Isa::Avx512), spmd::Error);
}

}  // namespace
