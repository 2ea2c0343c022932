#include <gtest/gtest.h>

#include "spmd/backends/backend.hpp"
#include "spmd/runtime/agree.hpp"
#include "spmd/runtime/devices.hpp"
#include "spmd/runtime/error.hpp"

using namespace spmd::runtime;

TEST(AssignGpus, KPerRankByLocalRankModuloVisible) {
  EXPECT_EQ(assign_gpus(0, 1, 4), (std::vector<int>{0}));
  EXPECT_EQ(assign_gpus(3, 1, 4), (std::vector<int>{3}));
  EXPECT_EQ(assign_gpus(1, 2, 4), (std::vector<int>{2, 3}));
  EXPECT_EQ(assign_gpus(2, 2, 4), (std::vector<int>{0, 1}));  // wraps
  EXPECT_EQ(assign_gpus(5, 1, 1), (std::vector<int>{0}));     // one visible GPU per task (Slurm)
  EXPECT_TRUE(assign_gpus(0, 1, 0).empty());
  for (int local = 0; local < 8; ++local)
    for (int k = 1; k <= 3; ++k)
      for (int visible = 1; visible <= 8; ++visible)
        for (int g : assign_gpus(local, k, visible)) {
          EXPECT_GE(g, 0);
          EXPECT_LT(g, visible);
        }
}

TEST(BackendNames, AcceptsRegisteredAndRejectsOthers) {
  EXPECT_NO_THROW(spmd::backends::check_backend_name("auto"));
  EXPECT_NO_THROW(spmd::backends::check_backend_name("cpu"));
  EXPECT_NO_THROW(spmd::backends::check_backend_name("cuda"));
  try {
    spmd::backends::check_backend_name("gpu");
    FAIL();
  } catch (const spmd::Error& e) {
    EXPECT_NE(std::string(e.what()).find("--backend"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("auto, cpu, cuda"), std::string::npos) << e.what();
  }
}

TEST(StableHash, IsFnv1aAndSensitive) {
  EXPECT_EQ(stable_hash(""), 1469598103934665603ull);
  EXPECT_NE(stable_hash("a=1\n"), stable_hash("a=2\n"));
  EXPECT_EQ(stable_hash("devices=2\n"), stable_hash("devices=2\n"));
}
