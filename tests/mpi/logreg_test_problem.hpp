#pragma once
// A random logistic-regression problem, the same on every rank (seeded by N), and this
// rank's shard of it as spmd logreg would load it (logreg_rank_rows).
#include <cstdint>
#include <random>
#include <vector>

#include "spmd/data/dataset.hpp"
#include "spmd/workloads/logreg_objective.hpp"

namespace spmd::test {

struct LogregProblem {
  std::int64_t rows = 0;
  int features = 0, classes = 0;
  std::vector<float> X;            // [rows, features]
  std::vector<std::int32_t> y;     // [rows]
  std::vector<double> x;           // W [features * classes], the solver's iterate
};

inline LogregProblem make_logreg_problem(std::int64_t rows, int features, int classes, float pixel_low) {
  LogregProblem p{rows, features, classes, {}, {}, {}};
  std::mt19937 rng(static_cast<std::uint32_t>(rows));
  std::uniform_real_distribution<float> pixel(pixel_low, 1.0f);
  std::uniform_int_distribution<std::int32_t> label(0, classes - 1);
  std::normal_distribution<double> weight(0.0, 0.3);
  p.X.resize(static_cast<std::size_t>(rows) * features);
  p.y.resize(static_cast<std::size_t>(rows));
  p.x.resize(static_cast<std::size_t>(features) * classes);
  for (float& v : p.X) v = pixel(rng);
  for (auto& v : p.y) v = label(rng);
  for (double& v : p.x) v = weight(rng);
  return p;
}

inline data::LoadedShard logreg_shard(const LogregProblem& p, int rank, int size) {
  const auto mine = workloads::logreg_rank_rows(p.rows, rank, size);
  const std::int64_t F = p.features;
  data::LoadedShard shard;
  shard.features.assign(p.X.begin() + mine.first * F, p.X.begin() + mine.end() * F);
  shard.labels.assign(p.y.begin() + mine.first, p.y.begin() + mine.end());
  shard.sample_shape = {F};
  shard.sample_size = F;
  shard.global_rows = p.rows;
  shard.first_row = mine.first;
  shard.rows = mine.size;
  shard.classes = p.classes;
  return shard;
}

}  // namespace spmd::test
