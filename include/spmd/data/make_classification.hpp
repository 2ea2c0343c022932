#pragma once
// sklearn.datasets.make_classification in C++: the same parameters, defaults, checks
// and construction (Guyon's Madelon design), with its own random stream.
//
// Construction, as in sklearn:
//  - n_clusters = n_classes * n_clusters_per_class clusters; cluster k has class
//    k % n_classes and int(n_samples * weight[k % n_classes] / n_clusters_per_class)
//    rows, the remainder handed out one row per cluster from cluster 0 on;
//  - centroids: distinct vertices of the n_informative-dimensional hypercube (for more than
//    30 dimensions the first n_informative-30 coordinates are free bits, as sklearn's
//    _generate_hypercube), times 2*class_sep minus class_sep; with hypercube=false each
//    centroid is scaled by a uniform per cluster and per dimension;
//  - informative features ~ N(0, 1), then each cluster times its own A ~ U(-1, 1)^(i x i),
//    plus its centroid;
//  - redundant = informative @ B, B ~ U(-1, 1)^(i x r);
//  - repeated: column int((n - 1) * u + 0.5) of the first n = i + r columns;
//  - the remaining features ~ N(0, 1);
//  - a fraction flip_y of the rows (each with probability flip_y) get a uniform random class;
//  - X = (X + shift) * scale; then rows and columns are shuffled.
//
// Differences from sklearn, deliberate:
//  - The random numbers are not numpy's (see random.hpp): the same random_state gives a
//    different (equally distributed) data set. Each row's normals come from its own
//    stream, so the output does not depend on blocking, and shuffle=true returns exactly a
//    row and column permutation of shuffle=false with the same seed.
//  - Weights whose sum exceeds 1 are refused (sklearn then silently drops rows of the last
//    clusters).
//  - X is float32 (computed in float64, rounded once at the end).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace spmd::data {

struct ClassificationParams {
  std::int64_t n_samples = 100;
  int n_features = 20;
  int n_informative = 2;
  int n_redundant = 2;
  int n_repeated = 0;
  int n_classes = 2;
  int n_clusters_per_class = 2;
  // nullopt: balanced. n_classes values, or n_classes - 1 (the last is 1 - their sum).
  std::optional<std::vector<double>> weights;
  double flip_y = 0.01;
  double class_sep = 1.0;
  bool hypercube = true;
  // One value for every feature, or n_features values (in the unshuffled column order);
  // nullopt: random, shift ~ U(-class_sep, class_sep) and scale ~ U(1, 101) per feature.
  std::optional<std::vector<double>> shift = std::vector<double>{0.0};
  std::optional<std::vector<double>> scale = std::vector<double>{1.0};
  bool shuffle = true;
  // nullopt: a seed from std::random_device (reported in ClassificationData::seed).
  std::optional<std::uint64_t> random_state;
};

// What each output column is (after the column shuffle).
enum class FeatureRole { Informative, Redundant, Repeated, Noise };
const char* to_string(FeatureRole role);

struct ClassificationData {
  std::int64_t n_samples = 0;
  int n_features = 0;
  int n_classes = 0;
  std::vector<float> X;          // row-major [n_samples, n_features]
  std::vector<std::int32_t> y;   // [n_samples], in [0, n_classes)
  std::uint64_t seed = 0;        // the seed actually used
  std::vector<FeatureRole> roles;        // [n_features]
  std::vector<int> repeated_source;      // [n_features]: for Repeated, the output column copied; else -1
};

// Throws spmd::Error naming the parameter and the constraint (sklearn's checks).
void validate(const ClassificationParams& params);

// Generates the data set in memory (validates first).
ClassificationData make_classification(const ClassificationParams& params);

// Writes X (float32 [N, F]) and y (int32 [N]) to path atomically (AtomicH5Writer), with
// every parameter, the seed used and a note on the generator as attributes of the file.
void write_classification(const std::string& path, const ClassificationData& data, const ClassificationParams& params);

// make_classification + write_classification.
ClassificationData make_classification_file(const std::string& path, const ClassificationParams& params);

}  // namespace spmd::data
