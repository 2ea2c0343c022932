// make_classification: the structure sklearn's algorithm promises, checked statistically
// (class balance, separable informative columns, redundant = linear in informative,
// repeated = copies, flip_y rate, centroids on hypercube vertices), plus determinism,
// parameter checks and the 50000 x 784 timing of the L-BFGS workload's data.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <numeric>
#include <set>

#include "spmd/data/h5_reader.hpp"
#include "spmd/data/make_classification.hpp"
#include "spmd/runtime/error.hpp"

namespace {

using spmd::data::ClassificationData;
using spmd::data::ClassificationParams;
using spmd::data::FeatureRole;
using spmd::data::make_classification;

float at(const ClassificationData& d, std::int64_t row, int col) {
  return d.X[static_cast<std::size_t>(row * d.n_features + col)];
}

std::vector<int> columns_with(const ClassificationData& d, FeatureRole role) {
  std::vector<int> cols;
  for (int j = 0; j < d.n_features; ++j)
    if (d.roles[static_cast<std::size_t>(j)] == role) cols.push_back(j);
  return cols;
}

std::vector<std::int64_t> class_counts(const ClassificationData& d) {
  std::vector<std::int64_t> counts(static_cast<std::size_t>(d.n_classes), 0);
  for (auto label : d.y) {
    EXPECT_GE(label, 0);
    EXPECT_LT(label, d.n_classes);
    if (label >= 0 && label < d.n_classes) ++counts[static_cast<std::size_t>(label)];
  }
  return counts;
}

// Nearest class mean on the given columns (a linear classifier): means from the even
// rows, accuracy on the odd rows, so that chance level is an unbiased 0.5.
double nearest_centroid_accuracy(const ClassificationData& d, const std::vector<int>& cols) {
  const std::size_t C = static_cast<std::size_t>(d.n_classes), m = cols.size();
  std::vector<double> mean(C * m, 0.0);
  std::vector<double> count(C, 0.0);
  for (std::int64_t i = 0; i < d.n_samples; i += 2) {
    const auto c = static_cast<std::size_t>(d.y[static_cast<std::size_t>(i)]);
    count[c] += 1;
    for (std::size_t j = 0; j < m; ++j) mean[c * m + j] += at(d, i, cols[j]);
  }
  for (std::size_t c = 0; c < C; ++c)
    for (std::size_t j = 0; j < m; ++j) mean[c * m + j] /= std::max(count[c], 1.0);
  std::int64_t correct = 0, tested = 0;
  for (std::int64_t i = 1; i < d.n_samples; i += 2, ++tested) {
    std::size_t best = 0;
    double best_distance = INFINITY;
    for (std::size_t c = 0; c < C; ++c) {
      double distance = 0;
      for (std::size_t j = 0; j < m; ++j) distance += std::pow(at(d, i, cols[j]) - mean[c * m + j], 2);
      if (distance < best_distance) best_distance = distance, best = c;
    }
    correct += static_cast<std::int32_t>(best) == d.y[static_cast<std::size_t>(i)];
  }
  return static_cast<double>(correct) / static_cast<double>(tested);
}

// Relative residual of the least-squares fit target ~ [cols, 1] (normal equations in double).
double least_squares_residual(const ClassificationData& d, const std::vector<int>& cols, int target) {
  const std::size_t m = cols.size() + 1;
  std::vector<double> G(m * m, 0.0), b(m, 0.0);
  std::vector<double> row(m);
  for (std::int64_t i = 0; i < d.n_samples; ++i) {
    for (std::size_t j = 0; j + 1 < m; ++j) row[j] = at(d, i, cols[j]);
    row[m - 1] = 1.0;
    const double t = at(d, i, target);
    for (std::size_t p = 0; p < m; ++p) {
      b[p] += row[p] * t;
      for (std::size_t q = 0; q < m; ++q) G[p * m + q] += row[p] * row[q];
    }
  }
  // Gaussian elimination with partial pivoting.
  std::vector<double> coef = b;
  std::vector<double> A = G;
  for (std::size_t k = 0; k < m; ++k) {
    std::size_t pivot = k;
    for (std::size_t r = k + 1; r < m; ++r)
      if (std::fabs(A[r * m + k]) > std::fabs(A[pivot * m + k])) pivot = r;
    for (std::size_t q = 0; q < m; ++q) std::swap(A[k * m + q], A[pivot * m + q]);
    std::swap(coef[k], coef[pivot]);
    for (std::size_t r = k + 1; r < m; ++r) {
      const double f = A[r * m + k] / A[k * m + k];
      for (std::size_t q = k; q < m; ++q) A[r * m + q] -= f * A[k * m + q];
      coef[r] -= f * coef[k];
    }
  }
  for (std::size_t k = m; k-- > 0;) {
    for (std::size_t q = k + 1; q < m; ++q) coef[k] -= A[k * m + q] * coef[q];
    coef[k] /= A[k * m + k];
  }
  double residual = 0, norm = 0;
  for (std::int64_t i = 0; i < d.n_samples; ++i) {
    double fit = coef[m - 1];
    for (std::size_t j = 0; j + 1 < m; ++j) fit += coef[j] * at(d, i, cols[j]);
    const double t = at(d, i, target);
    residual += (t - fit) * (t - fit);
    norm += t * t;
  }
  return std::sqrt(residual / norm);
}

TEST(DataMakeClassification, DefaultsMatchSklearn) {
  const ClassificationParams p;
  EXPECT_EQ(p.n_samples, 100);
  EXPECT_EQ(p.n_features, 20);
  EXPECT_EQ(p.n_informative, 2);
  EXPECT_EQ(p.n_redundant, 2);
  EXPECT_EQ(p.n_repeated, 0);
  EXPECT_EQ(p.n_classes, 2);
  EXPECT_EQ(p.n_clusters_per_class, 2);
  EXPECT_FALSE(p.weights.has_value());
  EXPECT_DOUBLE_EQ(p.flip_y, 0.01);
  EXPECT_DOUBLE_EQ(p.class_sep, 1.0);
  EXPECT_TRUE(p.hypercube);
  EXPECT_EQ(p.shift, std::vector<double>{0.0});
  EXPECT_EQ(p.scale, std::vector<double>{1.0});
  EXPECT_TRUE(p.shuffle);
  EXPECT_FALSE(p.random_state.has_value());
  const auto d = make_classification(p);
  EXPECT_EQ(d.X.size(), 100u * 20u);
  EXPECT_EQ(d.y.size(), 100u);
  EXPECT_EQ(columns_with(d, FeatureRole::Informative).size(), 2u);
  EXPECT_EQ(columns_with(d, FeatureRole::Redundant).size(), 2u);
  EXPECT_EQ(columns_with(d, FeatureRole::Noise).size(), 16u);
}

TEST(DataMakeClassification, ExactlyBalancedClassesWithoutFlips) {
  // sklearn: n_samples // n_classes per class, the remainder one each to the first classes.
  for (int classes : {1, 2, 3, 7, 10})
    for (int clusters : {1, 2, 3})
      for (std::int64_t n : {std::int64_t{1}, std::int64_t{classes} * clusters * 5 - 1, std::int64_t{classes} * clusters * 5,
                             std::int64_t{classes} * clusters * 5 + 1, std::int64_t{997}}) {
        if (n < 1) continue;
        ClassificationParams p;
        p.n_samples = n;
        p.n_classes = classes;
        p.n_clusters_per_class = clusters;
        p.n_informative = 5;
        p.flip_y = 0;
        p.random_state = static_cast<std::uint64_t>(n * 131 + classes);
        const auto d = make_classification(p);
        const auto counts = class_counts(d);
        for (int c = 0; c < classes; ++c)
          EXPECT_EQ(counts[static_cast<std::size_t>(c)], n / classes + (c < n % classes ? 1 : 0))
              << "n=" << n << " classes=" << classes << " clusters=" << clusters << " class " << c;
      }
}

TEST(DataMakeClassification, WeightsSetClassProportions) {
  ClassificationParams p;
  p.n_samples = 10000;
  p.n_classes = 3;
  p.n_informative = 4;
  p.flip_y = 0;
  p.random_state = 5;
  for (const auto& weights : {std::vector<double>{0.7, 0.2, 0.1}, std::vector<double>{0.5, 0.3}}) {
    p.weights = weights;
    const auto counts = class_counts(make_classification(p));
    const std::vector<double> full = weights.size() == 3 ? weights : std::vector<double>{0.5, 0.3, 0.2};
    // int() truncation per cluster, remainder round-robin: within a few rows of the weight.
    for (std::size_t c = 0; c < 3; ++c) EXPECT_NEAR(static_cast<double>(counts[c]), full[c] * 10000, 6.0) << c;
  }
}

TEST(DataMakeClassification, InformativeColumnsSeparateClassesNoiseDoesNot) {
  // Two clusters on random distinct vertices of the 8-cube, 2*class_sep = 4 apart per
  // differing coordinate; even when they differ in one coordinate only, the covariance
  // from A (per-coordinate std about 1.6) leaves nearest-centroid near 89% correct.
  double sum_informative = 0;
  const std::vector<std::uint64_t> seeds{1, 2, 3, 4, 5};
  for (std::uint64_t seed : seeds) {
    ClassificationParams p;
    p.n_samples = 4000;
    p.n_features = 30;
    p.n_informative = 8;
    p.n_redundant = 0;
    p.n_classes = 2;
    p.n_clusters_per_class = 1;
    p.class_sep = 2.0;
    p.flip_y = 0;
    p.random_state = seed;
    const auto d = make_classification(p);
    const double informative = nearest_centroid_accuracy(d, columns_with(d, FeatureRole::Informative));
    const double noise = nearest_centroid_accuracy(d, columns_with(d, FeatureRole::Noise));
    sum_informative += informative;
    EXPECT_GT(informative, 0.85) << "seed " << seed;
    EXPECT_NEAR(noise, 0.5, 0.05) << "seed " << seed;  // held-out: std 0.011
  }
  EXPECT_GT(sum_informative / static_cast<double>(seeds.size()), 0.93);
}

TEST(DataMakeClassification, RedundantColumnsAreLinearInInformativeOnesRepeatedAreCopies) {
  ClassificationParams p;
  p.n_samples = 3000;
  p.n_features = 25;
  p.n_informative = 6;
  p.n_redundant = 5;
  p.n_repeated = 4;
  p.n_classes = 3;
  p.random_state = 11;
  p.shift = std::vector<double>{0.75};  // affine, still exactly linear with an intercept
  p.scale = std::vector<double>{2.0};
  const auto d = make_classification(p);
  const auto informative = columns_with(d, FeatureRole::Informative);
  ASSERT_EQ(informative.size(), 6u);
  for (int r : columns_with(d, FeatureRole::Redundant))
    EXPECT_LT(least_squares_residual(d, informative, r), 1e-5) << "redundant column " << r;
  for (int r : columns_with(d, FeatureRole::Noise))
    EXPECT_GT(least_squares_residual(d, informative, r), 0.5) << "noise column " << r;
  const auto repeated = columns_with(d, FeatureRole::Repeated);
  ASSERT_EQ(repeated.size(), 4u);
  for (int r : repeated) {
    const int source = d.repeated_source[static_cast<std::size_t>(r)];
    ASSERT_GE(source, 0);
    const auto role = d.roles[static_cast<std::size_t>(source)];
    EXPECT_TRUE(role == FeatureRole::Informative || role == FeatureRole::Redundant);
    for (std::int64_t i = 0; i < d.n_samples; ++i) ASSERT_EQ(at(d, i, r), at(d, i, source)) << "row " << i;
  }
}

TEST(DataMakeClassification, FlipFractionMatchesFlipY) {
  // Unshuffled rows come in cluster order (cluster k has class k % n_classes), so the
  // changed labels can be counted. A flip draws a uniform class: it changes the label with
  // probability 1 - 1/n_classes.
  for (double flip : {0.0, 0.05, 0.2, 1.0}) {
    ClassificationParams p;
    p.n_samples = 20000;
    p.n_classes = 4;
    p.n_clusters_per_class = 1;
    p.n_informative = 3;
    p.flip_y = flip;
    p.shuffle = false;
    p.random_state = 77;
    const auto d = make_classification(p);
    std::int64_t changed = 0;
    for (std::int64_t i = 0; i < p.n_samples; ++i) changed += d.y[static_cast<std::size_t>(i)] != i / (p.n_samples / 4);
    const double expected = flip * 0.75, rate = static_cast<double>(changed) / p.n_samples;
    EXPECT_NEAR(rate, expected, 6 * std::sqrt(std::max(expected * (1 - expected), 1e-9) / p.n_samples) + 1e-9)
        << "flip_y " << flip;
    // With every label flipped, the labels are uniform over all classes (sklearn's
    // randint(n_classes)); the changed fraction alone cannot tell a draw that misses a class.
    if (flip == 1.0)
      for (const auto count : class_counts(d))
        EXPECT_NEAR(static_cast<double>(count), p.n_samples / 4.0, 6 * std::sqrt(p.n_samples * 0.25 * 0.75));
  }
}

TEST(DataMakeClassification, ClusterMeansSitOnDistinctHypercubeVertices) {
  for (int n_informative : {3, 5, 33}) {
    ClassificationParams p;
    p.n_samples = 16000;
    p.n_features = n_informative + 2;
    p.n_informative = n_informative;
    p.n_redundant = 0;
    p.n_classes = 4;
    p.n_clusters_per_class = 2;
    p.class_sep = 1.5;
    p.flip_y = 0;
    p.shuffle = false;
    p.random_state = 3;
    const auto d = make_classification(p);
    std::set<std::vector<int>> vertices;
    const std::int64_t per_cluster = p.n_samples / 8;
    for (int k = 0; k < 8; ++k) {
      std::vector<int> vertex;
      for (int j = 0; j < n_informative; ++j) {
        double mean = 0;
        for (std::int64_t i = k * per_cluster; i < (k + 1) * per_cluster; ++i) mean += at(d, i, j);
        mean /= static_cast<double>(per_cluster);
        // A ~ U(-1,1) gives each coordinate a std of at most sqrt(n/3); over 2000 rows the
        // mean is within ~0.15 of the centroid for n = 33.
        const double tolerance = 5 * std::sqrt(n_informative / 3.0 / per_cluster);
        EXPECT_NEAR(std::fabs(mean), 1.5, tolerance) << "cluster " << k << " dim " << j;
        vertex.push_back(mean > 0 ? 1 : 0);
      }
      vertices.insert(vertex);
      EXPECT_EQ(d.y[static_cast<std::size_t>(k * per_cluster)], k % 4);
    }
    EXPECT_EQ(vertices.size(), 8u) << "centroids must be distinct vertices";
  }
  // A random polytope: each coordinate shrunk by two uniforms, so |centroid| <= class_sep.
  ClassificationParams p;
  p.n_samples = 8000;
  p.n_features = 6;
  p.n_informative = 4;
  p.n_redundant = 0;
  p.n_clusters_per_class = 1;
  p.hypercube = false;
  p.flip_y = 0;
  p.shuffle = false;
  p.random_state = 9;
  const auto d = make_classification(p);
  for (int k = 0; k < 2; ++k)
    for (int j = 0; j < 4; ++j) {
      double mean = 0;
      for (std::int64_t i = k * 4000; i < (k + 1) * 4000; ++i) mean += at(d, i, j);
      EXPECT_LT(std::fabs(mean / 4000), 1.0 + 0.1);
    }
}

TEST(DataMakeClassification, ShiftAndScalePerFeatureAndRandom) {
  ClassificationParams p;
  p.n_samples = 20000;
  p.n_features = 6;
  p.n_informative = 2;
  p.n_redundant = 0;
  p.shuffle = false;
  p.random_state = 4;
  p.shift = std::vector<double>{0, 0, 10, -20, 30, 40};
  p.scale = std::vector<double>{1, 1, 2, 3, 0.5, 1};
  auto d = make_classification(p);
  for (int j = 2; j < 6; ++j) {  // noise columns: (N(0,1) + shift) * scale
    double mean = 0, sq = 0;
    for (std::int64_t i = 0; i < p.n_samples; ++i) mean += at(d, i, j), sq += at(d, i, j) * static_cast<double>(at(d, i, j));
    mean /= p.n_samples;
    const double sd = std::sqrt(sq / p.n_samples - mean * mean);
    EXPECT_NEAR(mean, (*p.shift)[j] * (*p.scale)[j], 0.05 * (*p.scale)[j]) << j;
    EXPECT_NEAR(sd, (*p.scale)[j], 0.03 * (*p.scale)[j]) << j;
  }
  p.shift.reset();
  p.scale.reset();
  d = make_classification(p);
  for (int j = 2; j < 6; ++j) {
    double mean = 0, sq = 0;
    for (std::int64_t i = 0; i < p.n_samples; ++i) mean += at(d, i, j), sq += at(d, i, j) * static_cast<double>(at(d, i, j));
    mean /= p.n_samples;
    const double sd = std::sqrt(sq / p.n_samples - mean * mean);
    EXPECT_GT(sd, 0.95);  // scale ~ U(1, 101)
    EXPECT_LT(sd, 102.0);
    EXPECT_LE(std::fabs(mean / sd), 1.0 + 0.05);  // shift ~ U(-class_sep, class_sep)
  }
}

TEST(DataMakeClassification, DeterministicPerSeedAndShuffleOnlyPermutes) {
  ClassificationParams p;
  p.n_samples = 501;
  p.n_features = 12;
  p.n_informative = 4;
  p.n_repeated = 1;
  p.n_classes = 3;
  p.random_state = 2024;
  const auto a = make_classification(p), b = make_classification(p);
  EXPECT_EQ(a.X, b.X);
  EXPECT_EQ(a.y, b.y);
  EXPECT_EQ(a.seed, 2024u);
  p.random_state = 2025;
  const auto c = make_classification(p);
  EXPECT_NE(a.X, c.X);
  p.random_state.reset();
  EXPECT_NE(make_classification(p).seed, make_classification(p).seed);

  // shuffle=true is a row and column permutation of shuffle=false with the same seed.
  p.random_state = 2024;
  p.shuffle = false;
  const auto plain = make_classification(p);
  auto row_key = [](const ClassificationData& d, std::int64_t i) {
    std::vector<float> v(d.X.begin() + i * d.n_features, d.X.begin() + (i + 1) * d.n_features);
    std::sort(v.begin(), v.end());
    v.push_back(static_cast<float>(d.y[static_cast<std::size_t>(i)]));
    return v;
  };
  std::multiset<std::vector<float>> shuffled_rows, plain_rows;
  for (std::int64_t i = 0; i < p.n_samples; ++i) {
    shuffled_rows.insert(row_key(a, i));
    plain_rows.insert(row_key(plain, i));
  }
  EXPECT_EQ(shuffled_rows, plain_rows);
  EXPECT_NE(a.X, plain.X);
  for (int j = 0; j < p.n_features; ++j)  // unshuffled columns come in sklearn's order
    EXPECT_EQ(plain.roles[static_cast<std::size_t>(j)], j < 4 ? FeatureRole::Informative
                                                        : j < 6 ? FeatureRole::Redundant
                                                        : j < 7 ? FeatureRole::Repeated
                                                                : FeatureRole::Noise);
}

TEST(DataMakeClassification, ParameterErrorsNameTheParameter) {
  struct Case {
    const char* parameter;
    void (*change)(ClassificationParams&);
  };
  const Case cases[] = {
      {"n_samples", [](ClassificationParams& p) { p.n_samples = 0; }},
      {"n_features", [](ClassificationParams& p) { p.n_features = 0; }},
      {"n_informative", [](ClassificationParams& p) { p.n_informative = 0; }},
      {"n_redundant", [](ClassificationParams& p) { p.n_redundant = -1; }},
      {"n_repeated", [](ClassificationParams& p) { p.n_repeated = -2; }},
      {"n_classes", [](ClassificationParams& p) { p.n_classes = 0; }},
      {"n_clusters_per_class", [](ClassificationParams& p) { p.n_clusters_per_class = 0; }},
      {"flip_y", [](ClassificationParams& p) { p.flip_y = 1.5; }},
      {"flip_y", [](ClassificationParams& p) { p.flip_y = -0.1; }},
      {"class_sep", [](ClassificationParams& p) { p.class_sep = 0; }},
      {"n_features", [](ClassificationParams& p) { p.n_informative = 10, p.n_redundant = 6, p.n_repeated = 5; }},
      {"2**n_informative", [](ClassificationParams& p) { p.n_classes = 3; }},  // 3 * 2 clusters > 2**2
      {"weights", [](ClassificationParams& p) { p.weights = std::vector<double>{0.2, 0.3, 0.5}; }},
      {"weights", [](ClassificationParams& p) { p.weights = std::vector<double>{-0.5, 1.5}; }},
      {"weights", [](ClassificationParams& p) { p.weights = std::vector<double>{0.9, 0.9}; }},
      {"weights", [](ClassificationParams& p) { p.weights = std::vector<double>{1.2}; }},
      {"shift", [](ClassificationParams& p) { p.shift = std::vector<double>{1, 2, 3}; }},
      {"scale", [](ClassificationParams& p) { p.scale = std::vector<double>{0.0}; }},
      {"scale", [](ClassificationParams& p) { p.scale = std::vector<double>{NAN}; }},
  };
  for (const auto& c : cases) {
    ClassificationParams p;
    c.change(p);
    try {
      make_classification(p);
      ADD_FAILURE() << "accepted a bad " << c.parameter;
    } catch (const spmd::Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.parameter), std::string::npos) << e.what();
    }
  }
  // The boundaries themselves are fine.
  ClassificationParams p;
  p.n_informative = 10;
  p.n_redundant = 5;
  p.n_repeated = 5;  // = n_features
  p.n_classes = 2;
  p.flip_y = 1.0;
  p.weights = std::vector<double>{1.0};
  p.random_state = 1;
  EXPECT_NO_THROW(make_classification(p));
  ClassificationParams q;
  q.n_informative = 3;
  q.n_classes = 4;  // 4 * 2 = 2**3
  EXPECT_NO_THROW(make_classification(q));
}

TEST(DataMakeClassification, LbfgsWorkloadSizeIsFastAndWritesAttributes) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("spmd-mkcls-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "logreg.h5").string();
  ClassificationParams p;  // the JAXopt example's workload: make_classification(50000, 784, 10 classes, 50 informative)
  p.n_samples = 50000;
  p.n_features = 784;
  p.n_classes = 10;
  p.n_informative = 50;
  p.random_state = 0;
  const auto start = std::chrono::steady_clock::now();
  const auto generated = make_classification(p);
  const auto generated_at = std::chrono::steady_clock::now();
  spmd::data::write_classification(path, generated, p);
  const auto end = std::chrono::steady_clock::now();
  const double gen_s = std::chrono::duration<double>(generated_at - start).count();
  const double total_s = std::chrono::duration<double>(end - start).count();
  std::printf("[ timing ] make_classification 50000 x 784 (float32): generate %.3f s, + write %.3f s = %.3f s\n", gen_s,
              total_s - gen_s, total_s);
  const auto counts = class_counts(generated);
  for (auto c : counts) EXPECT_NEAR(static_cast<double>(c), 5000, 5000 * 0.01 + 50);  // flip_y = 0.01
  {
    spmd::data::H5Reader r(path);
    EXPECT_EQ(r.shape("X"), (std::vector<std::int64_t>{50000, 784}));
    EXPECT_EQ(r.element_type("X"), spmd::data::ElementType::Float32);
    EXPECT_EQ(r.element_type("y"), spmd::data::ElementType::Int32);
    EXPECT_EQ(r.read<std::int32_t>("y"), generated.y);
    EXPECT_EQ(r.attribute_int("/", "n_informative"), 50);
    EXPECT_EQ(r.attribute_int("/", "n_classes"), 10);
    EXPECT_EQ(r.attribute_string("/", "random_state"), "0");
    EXPECT_EQ(r.attribute_string("/", "weights"), "None");
    EXPECT_EQ(r.attribute("/", "shift").floats, std::vector<double>{0.0});
    EXPECT_DOUBLE_EQ(r.attribute_double("/", "flip_y"), 0.01);
    EXPECT_NE(r.attribute_string("/", "generator").find("not numpy"), std::string::npos);
    const auto X = r.read<float>("X");
    EXPECT_TRUE(X == generated.X);
  }
  fs::remove_all(dir);
}

}  // namespace
