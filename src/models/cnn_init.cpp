#include "spmd/models/cnn_init.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace spmd::models {
namespace {
// Std of N(0,1) truncated to [-2, 2]; dividing by it restores unit variance.
constexpr double kTruncatedNormalStd = 0.87962566103423978;
}  // namespace

double lecun_normal_stddev(int fan_in) {
  if (fan_in < 1) throw std::invalid_argument("lecun_normal_stddev: fan_in must be >= 1, got " + std::to_string(fan_in));
  return std::sqrt(1.0 / fan_in) / kTruncatedNormalStd;
}

void cnn_init(CnnParams& params, const Key& member_key) {
  const auto& table = params.layout().tensors();
  for (std::size_t t = 0; t < table.size(); ++t) {
    const auto tensor = params.tensor(t);
    if (table[t].fan_in == 0) {
      std::fill(tensor.begin(), tensor.end(), 0.0f);
    } else {
      const Key tensor_key = member_key.fold_in(static_cast<std::uint32_t>(t));
      fill_truncated_normal(tensor_key, static_cast<float>(lecun_normal_stddev(table[t].fan_in)), tensor);
    }
  }
}

Key ensemble_member_key(std::uint64_t seed, int member, int num_members) {
  if (num_members < 1 || member < 0 || member >= num_members)
    throw std::invalid_argument("ensemble_member_key: need 0 <= member < num_members, got member=" +
                                std::to_string(member) + " num_members=" + std::to_string(num_members));
  return Key(seed).split_at(2, 1).split_at(num_members, member);
}

Key epoch_shuffle_key(std::uint64_t seed, int epoch) {
  if (epoch < 1) throw std::invalid_argument("epoch_shuffle_key: epochs count from 1, got " + std::to_string(epoch));
  Key rng = Key(seed).split_at(2, 0);
  Key input = rng;
  for (int e = 1; e <= epoch; ++e) {
    input = rng.split_at(2, 1);
    rng = rng.split_at(2, 0);
  }
  return input;
}

std::vector<std::int64_t> epoch_permutation(std::uint64_t seed, int epoch, std::int64_t n) {
  return random_permutation(epoch_shuffle_key(seed, epoch), n);
}

}  // namespace spmd::models
