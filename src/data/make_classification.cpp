#include "spmd/data/make_classification.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <new>
#include <numeric>
#include <random>
#include <sstream>
#include <tuple>
#include <unordered_set>

#include "spmd/data/h5_writer.hpp"
#include "spmd/data/random.hpp"
#include "spmd/runtime/error.hpp"

namespace spmd::data {

const char* to_string(FeatureRole role) {
  switch (role) {
    case FeatureRole::Informative: return "informative";
    case FeatureRole::Redundant: return "redundant";
    case FeatureRole::Repeated: return "repeated";
    case FeatureRole::Noise: return "noise";
  }
  return "?";
}

namespace {

std::string num(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

void require(bool ok, const std::string& message) {
  if (!ok) throw Error("make_classification: " + message);
}

void validate_per_feature(const std::optional<std::vector<double>>& values, const char* name, int n_features,
                          bool positive_scalar) {
  if (!values) return;
  const auto& v = *values;
  require(v.size() == 1 || v.size() == static_cast<std::size_t>(n_features),
          std::string(name) + " has " + std::to_string(v.size()) + " values; give one value or n_features (" +
              std::to_string(n_features) + ")");
  for (double x : v) require(std::isfinite(x), std::string(name) + " must be finite (got " + num(x) + ")");
  if (positive_scalar && v.size() == 1)
    require(v[0] > 0, std::string(name) + " must be > 0 (got " + num(v[0]) + ")");
}

// The integer parameters in sklearn's order: name, value, the smallest value allowed.
std::vector<std::tuple<const char*, std::int64_t, int>> counts(const ClassificationParams& p) {
  return {{"n_samples", p.n_samples, 1},     {"n_features", p.n_features, 1}, {"n_informative", p.n_informative, 1},
          {"n_redundant", p.n_redundant, 0}, {"n_repeated", p.n_repeated, 0}, {"n_classes", p.n_classes, 1},
          {"n_clusters_per_class", p.n_clusters_per_class, 1}};
}

// Class weights completed as sklearn does (n_classes - 1 values: the last is 1 - sum).
std::vector<double> class_weights(const ClassificationParams& p) {
  if (!p.weights) return std::vector<double>(static_cast<std::size_t>(p.n_classes), 1.0 / p.n_classes);
  std::vector<double> w = *p.weights;
  if (w.size() == static_cast<std::size_t>(p.n_classes) - 1) w.push_back(1.0 - std::accumulate(w.begin(), w.end(), 0.0));
  return w;
}

}  // namespace

void validate(const ClassificationParams& p) {
  for (const auto& [name, value, least] : counts(p))
    require(value >= least,
            std::string(name) + " must be >= " + std::to_string(least) + " (got " + std::to_string(value) + ")");
  require(p.flip_y >= 0 && p.flip_y <= 1, "flip_y must be in [0, 1] (got " + num(p.flip_y) + ")");
  require(p.class_sep > 0 && std::isfinite(p.class_sep), "class_sep must be > 0 and finite (got " + num(p.class_sep) + ")");
  const std::int64_t used = std::int64_t{p.n_informative} + p.n_redundant + p.n_repeated;
  require(used <= p.n_features, "n_informative (" + std::to_string(p.n_informative) + ") + n_redundant (" +
                                    std::to_string(p.n_redundant) + ") + n_repeated (" + std::to_string(p.n_repeated) +
                                    ") = " + std::to_string(used) + " must be <= n_features (" +
                                    std::to_string(p.n_features) + ")");
  const std::int64_t clusters = std::int64_t{p.n_classes} * p.n_clusters_per_class;
  const bool fits = p.n_informative >= 62 || clusters <= (std::int64_t{1} << p.n_informative);
  require(fits, "n_classes(" + std::to_string(p.n_classes) + ") * n_clusters_per_class(" +
                    std::to_string(p.n_clusters_per_class) + ") must be smaller or equal 2**n_informative(" +
                    std::to_string(p.n_informative) + ")=" +
                    (p.n_informative < 62 ? std::to_string(std::int64_t{1} << p.n_informative) : std::string("2^62+")));
  // Centroids differ in (at most) 30 sampled bits, as in sklearn's _generate_hypercube.
  require(clusters <= (std::int64_t{1} << 30),
          "n_classes * n_clusters_per_class = " + std::to_string(clusters) + " clusters; at most 2^30 are supported");
  if (p.weights) {
    const auto& w = *p.weights;
    require(w.size() == static_cast<std::size_t>(p.n_classes) || w.size() + 1 == static_cast<std::size_t>(p.n_classes),
            "weights has " + std::to_string(w.size()) + " values; it must have n_classes (" + std::to_string(p.n_classes) +
                ") or n_classes - 1");
    for (double x : w) require(std::isfinite(x) && x >= 0, "weights must be finite and >= 0 (got " + num(x) + ")");
    const auto full = class_weights(p);
    const double sum = std::accumulate(full.begin(), full.end(), 0.0);
    require(full.back() >= -1e-12 && sum <= 1.0 + 1e-9,
            "weights sum to " + num(sum) + (full.back() < 0 ? " (the inferred last weight is negative)" : "") +
                "; they must sum to at most 1");
  }
  validate_per_feature(p.shift, "shift", p.n_features, false);
  validate_per_feature(p.scale, "scale", p.n_features, true);
  require(static_cast<double>(p.n_samples) * p.n_features < 9.0e18 / sizeof(double),
          "n_samples * n_features = " + num(static_cast<double>(p.n_samples) * p.n_features) + " is too large");
}

namespace {

// Distinct binary vertices of the d-dimensional hypercube, one row per cluster, as
// sklearn's _generate_hypercube: for d > 30 the leading d - 30 coordinates are free
// random bits and the last 30 are distinct. Row-major [clusters, d], values 0 or 1.
std::vector<double> hypercube_vertices(std::int64_t clusters, int d, RandomStream& rng) {
  std::vector<double> out(static_cast<std::size_t>(clusters * d));
  const int free_bits = std::max(0, d - 30);
  for (std::int64_t k = 0; k < clusters; ++k)
    for (int j = 0; j < free_bits; ++j) out[static_cast<std::size_t>(k * d + j)] = static_cast<double>(rng.below(2));
  const int bits = d - free_bits;
  const std::uint64_t space = std::uint64_t{1} << bits;
  std::vector<std::uint64_t> chosen;
  chosen.reserve(static_cast<std::size_t>(clusters));
  if (space <= 4 * static_cast<std::uint64_t>(clusters)) {
    // Dense: a partial Fisher-Yates over all vertices.
    std::vector<std::uint64_t> all(space);
    std::iota(all.begin(), all.end(), 0);
    for (std::int64_t k = 0; k < clusters; ++k) {
      const std::uint64_t pick = static_cast<std::uint64_t>(k) + rng.below(space - static_cast<std::uint64_t>(k));
      std::swap(all[static_cast<std::size_t>(k)], all[pick]);
      chosen.push_back(all[static_cast<std::size_t>(k)]);
    }
  } else {
    // Sparse: rejection of repeats (expected < 4/3 draws per vertex).
    std::unordered_set<std::uint64_t> seen;
    while (static_cast<std::int64_t>(chosen.size()) < clusters) {
      const std::uint64_t v = rng.below(space);
      if (seen.insert(v).second) chosen.push_back(v);
    }
  }
  for (std::int64_t k = 0; k < clusters; ++k)
    for (int j = 0; j < bits; ++j)  // most significant bit first, like numpy.unpackbits
      out[static_cast<std::size_t>(k * d + free_bits + j)] =
          static_cast<double>((chosen[static_cast<std::size_t>(k)] >> (bits - 1 - j)) & 1u);
  return out;
}

std::vector<std::int64_t> random_permutation(std::int64_t n, RandomStream& rng) {
  std::vector<std::int64_t> perm(static_cast<std::size_t>(n));
  std::iota(perm.begin(), perm.end(), 0);
  for (std::int64_t i = n - 1; i > 0; --i)
    std::swap(perm[static_cast<std::size_t>(i)], perm[rng.below(static_cast<std::uint64_t>(i + 1))]);
  return perm;
}

std::vector<double> per_feature(const std::optional<std::vector<double>>& given, int n_features, RandomStream& rng,
                                double random_low, double random_width) {
  std::vector<double> v(static_cast<std::size_t>(n_features));
  if (!given) {
    for (auto& x : v) x = random_low + random_width * rng.uniform();
  } else if (given->size() == 1) {
    std::fill(v.begin(), v.end(), (*given)[0]);
  } else {
    v = *given;
  }
  return v;
}

std::uint64_t fresh_seed() {
  std::random_device device;
  return (static_cast<std::uint64_t>(device()) << 32) ^ device();
}

// Rows per cluster, exactly as sklearn (the same double arithmetic before truncation).
std::vector<std::int64_t> cluster_row_counts(const ClassificationParams& p, std::int64_t K) {
  const std::int64_t N = p.n_samples;
  const int C = p.n_classes;
  const auto weights = class_weights(p);
  std::vector<std::int64_t> cluster_rows(static_cast<std::size_t>(K));
  std::int64_t assigned = 0;
  for (std::int64_t k = 0; k < K; ++k) {
    cluster_rows[static_cast<std::size_t>(k)] =
        static_cast<std::int64_t>(static_cast<double>(N) * weights[static_cast<std::size_t>(k % C)] / p.n_clusters_per_class);
    assigned += cluster_rows[static_cast<std::size_t>(k)];
  }
  for (std::int64_t i = 0; i < N - assigned; ++i) ++cluster_rows[static_cast<std::size_t>(i % K)];
  return cluster_rows;
}

// What stream 0 draws for the K clusters, in sklearn's order.
struct ClusterDraws {
  std::vector<double> centroids;  // [K, I]
  std::vector<double> A;          // K matrices [I, I]
  std::vector<double> B;          // [I, R]
  std::vector<int> repeat_of;     // logical source column of each repeated one
};

ClusterDraws draw_clusters(const ClassificationParams& p, std::int64_t K, RandomStream& rng) {
  const int I = p.n_informative, R = p.n_redundant;
  ClusterDraws d;
  d.centroids = hypercube_vertices(K, I, rng);
  for (auto& c : d.centroids) c = c * 2 * p.class_sep - p.class_sep;
  if (!p.hypercube) {
    std::vector<double> per_cluster(static_cast<std::size_t>(K)), per_dim(static_cast<std::size_t>(I));
    for (auto& u : per_cluster) u = rng.uniform();
    for (auto& u : per_dim) u = rng.uniform();
    for (std::int64_t k = 0; k < K; ++k)
      for (int j = 0; j < I; ++j)
        d.centroids[static_cast<std::size_t>(k * I + j)] *= per_cluster[static_cast<std::size_t>(k)] * per_dim[static_cast<std::size_t>(j)];
  }
  d.A.resize(static_cast<std::size_t>(K * I * I));
  for (auto& a : d.A) a = 2 * rng.uniform() - 1;
  d.B.resize(static_cast<std::size_t>(I) * R);
  for (auto& b : d.B) b = 2 * rng.uniform() - 1;
  d.repeat_of.resize(static_cast<std::size_t>(p.n_repeated));
  for (auto& r : d.repeat_of) r = static_cast<int>((I + R - 1) * rng.uniform() + 0.5);
  return d;
}

// Labels in cluster order, then flip_y of them to a random class.
std::vector<std::int32_t> cluster_labels(const ClassificationParams& p, const std::vector<std::int64_t>& cluster_rows,
                                         RandomStream& rng) {
  const std::int64_t N = p.n_samples;
  const int C = p.n_classes;
  std::vector<std::int32_t> labels(static_cast<std::size_t>(N));
  std::int64_t row = 0;
  for (std::size_t k = 0; k < cluster_rows.size(); ++k)
    for (std::int64_t r = 0; r < cluster_rows[k]; ++r)
      labels[static_cast<std::size_t>(row++)] = static_cast<std::int32_t>(static_cast<std::int64_t>(k) % C);
  std::vector<std::int64_t> flipped;
  for (std::int64_t i = 0; i < N; ++i)
    if (rng.uniform() < p.flip_y) flipped.push_back(i);
  for (auto i : flipped) labels[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(C)));
  return labels;
}

// Each output column's role, and for a repeated one the output column it copies
// (col_src[j]: the logical column that output column j holds).
void assign_roles(const ClassificationParams& p, const std::vector<int>& col_src, const std::vector<int>& repeat_of,
                  ClassificationData& out) {
  const int F = p.n_features, I = p.n_informative, R = p.n_redundant;
  const int useful = I + R + p.n_repeated;
  std::vector<int> col_dest(static_cast<std::size_t>(F));
  for (int j = 0; j < F; ++j) col_dest[static_cast<std::size_t>(col_src[static_cast<std::size_t>(j)])] = j;
  out.roles.resize(static_cast<std::size_t>(F));
  out.repeated_source.assign(static_cast<std::size_t>(F), -1);
  for (int j = 0; j < F; ++j) {
    const int logical = col_src[static_cast<std::size_t>(j)];
    out.roles[static_cast<std::size_t>(j)] = logical < I               ? FeatureRole::Informative
                                             : logical < I + R         ? FeatureRole::Redundant
                                             : logical < useful        ? FeatureRole::Repeated
                                                                       : FeatureRole::Noise;
    if (out.roles[static_cast<std::size_t>(j)] == FeatureRole::Repeated)
      out.repeated_source[static_cast<std::size_t>(j)] = col_dest[static_cast<std::size_t>(repeat_of[static_cast<std::size_t>(logical - I - R)])];
  }
}

}  // namespace

ClassificationData make_classification(const ClassificationParams& p) {
  validate(p);
  const std::int64_t N = p.n_samples;
  const int F = p.n_features, I = p.n_informative, R = p.n_redundant, P = p.n_repeated;
  const int useful = I + R + P;
  const int C = p.n_classes;
  const std::int64_t K = std::int64_t{C} * p.n_clusters_per_class;

  ClassificationData out;
  out.n_samples = N;
  out.n_features = F;
  out.n_classes = C;
  out.seed = p.random_state ? *p.random_state : fresh_seed();
  try {
    out.X.resize(static_cast<std::size_t>(N * F));
    out.y.resize(static_cast<std::size_t>(N));
  } catch (const std::bad_alloc&) {
    throw Error("make_classification: X of n_samples x n_features = " + std::to_string(N) + " x " + std::to_string(F) +
                " float32 values does not fit in memory");
  }

  const std::vector<std::int64_t> cluster_rows = cluster_row_counts(p, K);

  // Everything but the per-row normals comes from stream 0, in sklearn's order; the row
  // and column permutations are drawn last, so shuffling permutes and changes nothing else.
  RandomStream rng(out.seed, 0);
  const ClusterDraws draws = draw_clusters(p, K, rng);
  const std::vector<int>& repeat_of = draws.repeat_of;

  const std::vector<std::int32_t> labels = cluster_labels(p, cluster_rows, rng);
  const std::vector<double> shift = per_feature(p.shift, F, rng, -p.class_sep, 2 * p.class_sep);
  const std::vector<double> scale = per_feature(p.scale, F, rng, 1.0, 100.0);

  std::vector<std::int64_t> row_dest(static_cast<std::size_t>(N));
  std::vector<int> col_src(static_cast<std::size_t>(F));  // output column j holds logical column col_src[j]
  std::iota(row_dest.begin(), row_dest.end(), 0);
  std::iota(col_src.begin(), col_src.end(), 0);
  if (p.shuffle) {
    row_dest = random_permutation(N, rng);
    const auto cols = random_permutation(F, rng);
    for (int j = 0; j < F; ++j) col_src[static_cast<std::size_t>(j)] = static_cast<int>(cols[static_cast<std::size_t>(j)]);
  }
  for (std::int64_t i = 0; i < N; ++i) out.y[static_cast<std::size_t>(row_dest[static_cast<std::size_t>(i)])] = labels[static_cast<std::size_t>(i)];
  assign_roles(p, col_src, repeat_of, out);

  // Rows in blocks within one cluster: draw normals, mix the informative part with the
  // cluster's A (dgemm), derive redundant and repeated columns, shift and scale, then
  // scatter each row to its shuffled place with its columns permuted.
  constexpr std::int64_t kBlock = 256;
  std::vector<double> Z(static_cast<std::size_t>(kBlock * I));
  std::vector<double> L(static_cast<std::size_t>(kBlock * F));  // logical column order
  std::int64_t cluster_first = 0;
  for (std::int64_t k = 0; k < K; ++k) {
    const std::int64_t cluster_end = cluster_first + cluster_rows[static_cast<std::size_t>(k)];
    const double* Ak = draws.A.data() + k * I * I;
    const double* centroid = draws.centroids.data() + k * I;
    for (std::int64_t first = cluster_first; first < cluster_end; first += kBlock) {
      const std::int64_t b = std::min(kBlock, cluster_end - first);
      for (std::int64_t r = 0; r < b; ++r) {
        RandomStream row_rng(out.seed, 1 + static_cast<std::uint64_t>(first + r));
        double* z = Z.data() + r * I;
        for (int j = 0; j < I; ++j) z[j] = row_rng.normal();
        double* noise = L.data() + r * F + useful;
        for (int j = 0; j < F - useful; ++j) noise[j] = row_rng.normal();
      }
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(b), I, I, 1.0, Z.data(), I, Ak, I, 0.0,
                  L.data(), F);
      for (std::int64_t r = 0; r < b; ++r)
        for (int j = 0; j < I; ++j) L[static_cast<std::size_t>(r * F + j)] += centroid[j];
      if (R > 0)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(b), R, I, 1.0, L.data(), F, draws.B.data(), R,
                    0.0, L.data() + I, F);
      for (std::int64_t r = 0; r < b; ++r) {
        double* row = L.data() + r * F;
        for (int q = 0; q < P; ++q) row[I + R + q] = row[repeat_of[static_cast<std::size_t>(q)]];
        for (int j = 0; j < F; ++j) row[j] = (row[j] + shift[static_cast<std::size_t>(j)]) * scale[static_cast<std::size_t>(j)];
        float* dst = out.X.data() + row_dest[static_cast<std::size_t>(first + r)] * F;
        for (int j = 0; j < F; ++j) dst[j] = static_cast<float>(row[col_src[static_cast<std::size_t>(j)]]);
      }
    }
    cluster_first = cluster_end;
  }
  return out;
}

void write_classification(const std::string& path, const ClassificationData& data, const ClassificationParams& p) {
  AtomicH5Writer writer(path);
  writer.write<float>("X", data.X, {data.n_samples, data.n_features});
  writer.write<std::int32_t>("y", data.y, {data.n_samples});
  const std::string root = "/";
  writer.set_attribute_string(root, "generator",
                              "spmd-kit make_classification: sklearn's algorithm and parameters, xoshiro256++ "
                              "random stream (not numpy's: the same random_state gives other numbers)");
  for (const auto& [name, value, least] : counts(p)) writer.set_attribute_int(root, name, value);
  if (p.weights)
    writer.set_attribute_doubles(root, "weights", *p.weights);
  else
    writer.set_attribute_string(root, "weights", "None");
  writer.set_attribute_double(root, "flip_y", p.flip_y);
  writer.set_attribute_double(root, "class_sep", p.class_sep);
  writer.set_attribute_int(root, "hypercube", p.hypercube ? 1 : 0);
  for (const auto& [name, value] : {std::pair{"shift", &p.shift}, std::pair{"scale", &p.scale}}) {
    if (*value)
      writer.set_attribute_doubles(root, name, **value);
    else
      writer.set_attribute_string(root, name, "None");
  }
  writer.set_attribute_int(root, "shuffle", p.shuffle ? 1 : 0);
  // The seed as text: it is an unsigned 64-bit value, and "given" says whether it was chosen.
  writer.set_attribute_string(root, "random_state", std::to_string(data.seed));
  writer.set_attribute_string(root, "random_state_source", p.random_state ? "given" : "drawn from std::random_device");
  writer.commit();
}

ClassificationData make_classification_file(const std::string& path, const ClassificationParams& params) {
  ClassificationData data = make_classification(params);
  write_classification(path, data, params);
  return data;
}

}  // namespace spmd::data
