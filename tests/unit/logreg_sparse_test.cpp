// The sparse (CSR) logistic-regression chunk against the double reference of its densified
// rows, in every kernel variant (the same bits), with weights, repeated columns and empty
// rows; the chunk size rule; bad columns refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "spmd/models/logreg_sparse.hpp"
#include "spmd/runtime/error.hpp"
#include "../support/logreg_reference.hpp"

namespace spmd::models {
namespace {

struct Csr {
  std::vector<std::int64_t> row_start{0};
  std::vector<std::int32_t> columns;
  std::vector<float> values;
  std::vector<float> dense;  // the same rows, densified (repeats added)
  std::vector<std::int32_t> labels;
  CsrRows view() const { return {row_start.data(), columns.data(), values.data()}; }
};

// Rows with 0..max_entries entries each (some empty), columns possibly repeated, unsorted.
Csr random_csr(std::int64_t rows, int features, int classes, int max_entries, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> count(0, max_entries), column(0, features - 1), label(0, classes - 1);
  std::normal_distribution<float> value(0.0f, 1.5f);
  Csr m;
  m.dense.assign(static_cast<std::size_t>(rows * features), 0.0f);
  for (std::int64_t r = 0; r < rows; ++r) {
    const int n = r % 7 == 3 ? 0 : count(rng);
    for (int k = 0; k < n; ++k) {
      const int c = column(rng);
      const float v = std::round(value(rng) * 64) / 64;  // sums of a few such values are exact in float
      m.columns.push_back(c);
      m.values.push_back(v);
      m.dense[static_cast<std::size_t>(r * features + c)] += v;
    }
    m.row_start.push_back(static_cast<std::int64_t>(m.columns.size()));
    m.labels.push_back(label(rng));
  }
  return m;
}

template <class T>
std::vector<double> sparse_partials(const Csr& m, int features, int classes, const std::vector<T>& W,
                                    LogregKernel kernel, const double* weights = nullptr) {
  std::vector<double> out(logreg_partials_size(features, classes), -1.0);
  LogregSparseWorkspace ws(kernel);
  logreg_sparse_chunk_partials(m.view(), m.labels.data(), static_cast<std::int64_t>(m.labels.size()), features,
                               classes, W.data(), out.data(), ws, weights);
  return out;
}

template <class T>
void expect_close_to_reference(int features, int classes, double tolerance, bool weighted) {
  const std::int64_t rows = 301;
  const Csr m = random_csr(rows, features, classes, 9, 7u + static_cast<unsigned>(features * classes));
  std::mt19937 rng(11);
  std::normal_distribution<double> normal(0.0, 0.4);
  std::vector<T> W(static_cast<std::size_t>(features) * classes);
  for (auto& w : W) w = static_cast<T>(normal(rng));
  std::vector<double> weights;
  for (std::int64_t r = 0; r < rows; ++r) weights.push_back(r % 5 == 0 ? 0.0 : 0.25 + static_cast<double>(r % 3));
  const double* wp = weighted ? weights.data() : nullptr;
  std::vector<double> ref(logreg_partials_size(features, classes));
  logreg_reference_partials(m.dense.data(), m.labels.data(), rows, features, classes, W.data(), ref.data(), wp);
  std::vector<double> first;
  for (auto k : supported_logreg_kernels()) {
    const auto got = sparse_partials(m, features, classes, W, k, wp);
    double scale = 0;
    for (double v : ref) scale = std::max(scale, std::abs(v));
    for (std::size_t i = 0; i < ref.size(); ++i)
      ASSERT_NEAR(got[i], ref[i], tolerance * scale) << "entry " << i << " kernel " << to_string(k);
    if (first.empty()) first = got;
    EXPECT_EQ(0, std::memcmp(first.data(), got.data(), got.size() * sizeof(double))) << to_string(k);
  }
}

TEST(LogregSparse, MatchesTheDenseReferenceInEveryVariantFloat32) {
  for (int F : {1, 17, 300})
    for (int C : {1, 2, 3, 10, 23}) expect_close_to_reference<float>(F, C, 2e-6, false);
}

TEST(LogregSparse, MatchesTheDenseReferenceInEveryVariantFloat64) {
  for (int F : {1, 17, 300})
    for (int C : {2, 3, 11}) expect_close_to_reference<double>(F, C, 1e-13, false);
}

TEST(LogregSparse, WeightedRowsMatchTheWeightedReference) {
  expect_close_to_reference<float>(40, 5, 2e-6, true);
  expect_close_to_reference<double>(40, 5, 1e-13, true);
}

TEST(LogregSparse, EmptyRowsContributeTheirLossOnly) {
  // Rows with no entries: logits 0, loss ln C each, gradient of the intercept-free W zero.
  Csr m;
  m.row_start = {0, 0, 0};
  m.labels = {0, 2};
  std::vector<float> W(4 * 3, 0.5f);
  const auto got = sparse_partials(m, 4, 3, W, LogregKernel::portable);
  EXPECT_NEAR(got[0], 2 * std::log(3.0), 1e-6);
  for (std::size_t i = 1; i < got.size(); ++i) EXPECT_EQ(got[i], 0.0);
}

TEST(LogregSparse, RowStartNeedNotBeginAtZero) {
  const Csr m = random_csr(50, 12, 3, 6, 5);
  std::vector<float> W(12 * 3, 0.1f);
  const auto whole = sparse_partials(m, 12, 3, W, LogregKernel::portable);
  // The same rows seen from row 20 on, against a copy that starts there.
  Csr tail;
  for (std::int64_t r = 20; r < 50; ++r) {
    for (auto k = m.row_start[static_cast<std::size_t>(r)]; k < m.row_start[static_cast<std::size_t>(r + 1)]; ++k) {
      tail.columns.push_back(m.columns[static_cast<std::size_t>(k)]);
      tail.values.push_back(m.values[static_cast<std::size_t>(k)]);
    }
    tail.row_start.push_back(static_cast<std::int64_t>(tail.columns.size()));
    tail.labels.push_back(m.labels[static_cast<std::size_t>(r)]);
  }
  std::vector<double> a(logreg_partials_size(12, 3)), b(a.size());
  LogregSparseWorkspace ws;
  logreg_sparse_chunk_partials(m.view().from(20), m.labels.data() + 20, 30, 12, 3, W.data(), a.data(), ws);
  logreg_sparse_chunk_partials(tail.view(), tail.labels.data(), 30, 12, 3, W.data(), b.data(), ws);
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(double)));
  EXPECT_NE(whole[0], a[0]);
}

TEST(LogregSparse, RefusesAColumnOutsideTheFeaturesNamingTheRow) {
  Csr m = random_csr(10, 8, 2, 4, 3);
  m.columns.assign(m.columns.size(), 1);
  m.row_start = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  m.columns.resize(10, 1);
  m.values.resize(10, 1.0f);
  m.columns[6] = 8;
  std::vector<float> W(8 * 2, 0.0f);
  try {
    sparse_partials(m, 8, 2, W, LogregKernel::portable);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("row 6"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("column 8 is outside [0, 8)"), std::string::npos) << e.what();
  }
}

TEST(LogregSparse, ChunkRowsHoldAboutFeaturesEntries) {
  EXPECT_EQ(logreg_sparse_chunk_rows(100, 10, 5), kLogregChunkRows);  // one chunk holds everything
  for (std::int64_t N : {std::int64_t{5000}, std::int64_t{1} << 20, std::int64_t{3} << 30})
    for (std::int64_t F : {std::int64_t{10}, std::int64_t{1} << 18, std::int64_t{1} << 24})
      for (std::int64_t per_row : {std::int64_t{1}, std::int64_t{50}, std::int64_t{2000}}) {
        const std::int64_t nnz = N * per_row;
        const std::int64_t R = logreg_sparse_chunk_rows(N, F, nnz);
        ASSERT_EQ(R % kLogregChunkRows, 0);
        ASSERT_EQ((R / kLogregChunkRows) & (R / kLogregChunkRows - 1), 0) << "a power of two times the chunk";
        // Large enough (or the whole data), and the smallest such.
        EXPECT_TRUE(R >= N || static_cast<__int128>(R) * nnz >= static_cast<__int128>(F) * N) << N << " " << F;
        if (R > kLogregChunkRows) EXPECT_LT(static_cast<__int128>(R / 2) * nnz, static_cast<__int128>(F) * N);
      }
  EXPECT_THROW(logreg_sparse_chunk_rows(-1, 1, 1), Error);
}

}  // namespace
}  // namespace spmd::models
