// Parameter layout and Flax-default initialisation of the ensemble CNN.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "spmd/models/cnn_init.hpp"
#include "spmd/models/cnn_params.hpp"

namespace {

using spmd::models::CnnConfig;
using spmd::models::CnnLayout;
using spmd::models::CnnParams;

const CnnConfig kDefault = CnnConfig::seed_default();

TEST(CnnParamsLayout, TableMatchesTheSeedModel) {
  const CnnLayout layout(kDefault);
  const auto& t = layout.tensors();
  std::size_t offset = 0;
  const std::size_t sizes[] = {3 * 3 * 1 * 32, 32, 3 * 3 * 32 * 64, 64, 3136 * 256, 256, 256 * 10, 10};
  const int fan_ins[] = {9, 0, 288, 0, 3136, 0, 256, 0};
  for (std::size_t i = 0; i < t.size(); ++i) {
    EXPECT_EQ(t[i].offset, offset) << t[i].name;
    EXPECT_EQ(t[i].size, sizes[i]) << t[i].name;
    EXPECT_EQ(t[i].fan_in, fan_ins[i]) << t[i].name;
    EXPECT_EQ(t[i].offset % 16, 0u) << t[i].name << " starts off a cache line";
    offset += t[i].size;
  }
  EXPECT_EQ(offset, 824458u);
  EXPECT_EQ(offset, layout.param_count());
  EXPECT_EQ(t[2].name, "Conv_1/kernel");
  EXPECT_EQ((std::array<int, 4>{3, 3, 32, 64}), t[2].shape);
  CnnParams p(kDefault);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p.data()) % 64, 0u);
  EXPECT_EQ(p.tensor(layout.denses()[0].kernel).data(), p.data() + t[4].offset);
  EXPECT_TRUE(std::all_of(p.flat().begin(), p.flat().end(), [](float v) { return v == 0.0f; }));
}

TEST(CnnInit, KernelsAreTruncatedLecunNormalAndBiasesZero) {
  CnnParams p(kDefault);
  spmd::models::cnn_init(p, spmd::models::ensemble_member_key(0, 0, 1));
  for (const auto& info : p.layout().tensors()) {
    const auto v = p.flat().subspan(info.offset, info.size);
    if (info.fan_in == 0) {
      EXPECT_TRUE(std::all_of(v.begin(), v.end(), [](float x) { return x == 0.0f; })) << info.name;
      continue;
    }
    double sum = 0, sq = 0;
    float max_abs = 0;
    for (float x : v) {
      sum += x;
      sq += static_cast<double>(x) * x;
      max_abs = std::max(max_abs, std::abs(x));
    }
    const double n = static_cast<double>(v.size());
    const double sd = std::sqrt(sq / n - (sum / n) * (sum / n));
    const double target = std::sqrt(1.0 / info.fan_in);  // variance 1/fan_in after truncation
    // The sample std of n truncated normals has relative spread ~ 0.41/sqrt(n); allow 5 of those.
    EXPECT_NEAR(sd / target, 1.0, 5 * 0.41 / std::sqrt(n) + 1e-3) << info.name;
    const double bound = 2.0 * spmd::models::lecun_normal_stddev(info.fan_in);
    EXPECT_LE(max_abs, static_cast<float>(bound)) << info.name;
    EXPECT_GT(max_abs, 0.9 * bound) << info.name;  // truncated at 2 std, not at 1
  }
  EXPECT_NEAR(spmd::models::lecun_normal_stddev(288), std::sqrt(1.0 / 288) / 0.87962566103423978, 1e-15);
}

TEST(CnnInit, MemberDependsOnSeedAndGlobalIndexOnlyNotOnLayout) {
  const std::uint64_t seed = 17;
  const int members = 5;
  // Every member generated alone...
  std::vector<CnnParams> alone(members, CnnParams(kDefault));
  for (int g = 0; g < members; ++g) spmd::models::cnn_init(alone[g], spmd::models::ensemble_member_key(seed, g, members));
  // ...and as ranks would hold them: the key of member g is the same whatever the layout,
  // and the parameters generated from the full split list are the same as alone.
  const auto keys = spmd::models::Key(seed).split(2)[1].split(members);
  for (int ranks : {1, 2, 3, 5, 8}) {
    for (int rank = 0; rank < ranks; ++rank) {
      const int lo = rank * members / ranks, hi = (rank + 1) * members / ranks;  // may be empty
      for (int g = lo; g < hi; ++g)
        EXPECT_EQ(spmd::models::ensemble_member_key(seed, g, members), keys[static_cast<std::size_t>(g)]);
    }
  }
  for (int g : {0, members - 1}) {
    CnnParams p(kDefault);
    spmd::models::cnn_init(p, keys[static_cast<std::size_t>(g)]);
    ASSERT_TRUE(std::equal(p.flat().begin(), p.flat().end(), alone[g].flat().begin())) << "member " << g;
  }
  // Different members, and different seeds, differ in every kernel.
  const CnnLayout& layout = alone[0].layout();
  const std::size_t conv1_kernel = layout.convs()[0].kernel, conv2_kernel = layout.convs()[1].kernel;
  for (int g = 1; g < members; ++g) {
    for (std::size_t t : {conv1_kernel, conv2_kernel, layout.denses()[0].kernel, layout.denses()[1].kernel}) {
      const auto a = alone[0].tensor(t), b = alone[g].tensor(t);
      std::size_t same = 0;
      for (std::size_t i = 0; i < a.size(); ++i) same += a[i] == b[i];
      EXPECT_LT(same, a.size() / 50 + 2) << "members 0 and " << g;
    }
  }
  CnnParams other_seed(kDefault);
  spmd::models::cnn_init(other_seed, spmd::models::ensemble_member_key(seed + 1, 0, members));
  EXPECT_FALSE(std::equal(other_seed.flat().begin(), other_seed.flat().end(), alone[0].flat().begin()));
  // The kernels of one member are not copies of each other's streams.
  EXPECT_NE(alone[0].tensor(conv1_kernel)[0], alone[0].tensor(conv2_kernel)[0]);
  EXPECT_THROW(spmd::models::ensemble_member_key(seed, members, members), std::invalid_argument);
}

}  // namespace
