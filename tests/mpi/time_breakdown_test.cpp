// reduce_time_breakdown over whatever rank count ctest launches, on made-up accounts whose
// min, mean, max, shares and slowest rank are known: rank r computes (r + 1) s, waits
// (P - r) s in MPI, and the last rank computes most (ties go to the lowest rank).
#include <gtest/gtest.h>

#include "spmd/runtime/collectives.hpp"
#include "spmd/runtime/time_account.hpp"
#include "spmd/workloads/time_breakdown.hpp"

using namespace spmd::runtime;
using spmd::workloads::TimeBreakdown;

namespace {
constexpr std::int64_t kS = 1'000'000'000;

TimeSpent made_up(int rank, int P) {
  TimeSpent t;
  t.ns[static_cast<int>(TimeCategory::Compute)] = (rank + 1) * kS;
  t.ns[static_cast<int>(TimeCategory::Communication)] = (P - rank) * kS;
  t.ns[static_cast<int>(TimeCategory::Io)] = kS / 2;
  t.ns[static_cast<int>(TimeCategory::Other)] = kS / 2;
  t.total_ns = t.sum_ns();  // P + 2 s on every rank
  return t;
}
}  // namespace

TEST(TimeBreakdown, MinMeanMaxSharesAndSlowestRank) {
  Context ctx(MPI_COMM_WORLD, ContextOptions{"cpu", 1, 60.0});
  const int P = ctx.size();
  const TimeBreakdown b = spmd::workloads::reduce_time_breakdown(ctx, made_up(ctx.rank(), P));
  EXPECT_EQ(b.ranks, P);
  const auto& c = b.at(TimeCategory::Compute);
  EXPECT_DOUBLE_EQ(c.min, 1.0);
  EXPECT_DOUBLE_EQ(c.max, P);
  EXPECT_DOUBLE_EQ(c.mean, (P + 1) / 2.0);
  const auto& m = b.at(TimeCategory::Communication);
  EXPECT_DOUBLE_EQ(m.min, 1.0);
  EXPECT_DOUBLE_EQ(m.max, P);
  EXPECT_DOUBLE_EQ(b.at(TimeCategory::HostDevice).max, 0.0);
  EXPECT_DOUBLE_EQ(b.total.min, P + 2.0);
  EXPECT_DOUBLE_EQ(b.total.max, P + 2.0);
  EXPECT_EQ(b.slowest_rank, P - 1);
  EXPECT_EQ(b.slowest_host, ctx.host());  // one machine in these tests
  EXPECT_DOUBLE_EQ(b.load_imbalance, P / ((P + 1) / 2.0));
  EXPECT_EQ(b.max_sum_error_ns, 0);
  double percent = 0;
  for (double p : b.mean_percent) percent += p;
  EXPECT_NEAR(percent, 100.0, 1e-9);
  EXPECT_NEAR(b.mean_percent[static_cast<int>(TimeCategory::Compute)], 100.0 * ((P + 1) / 2.0) / (P + 2.0), 1e-9);
  const std::string table = spmd::workloads::time_breakdown_table(b);
  EXPECT_NE(table.find("slowest rank " + std::to_string(P - 1)), std::string::npos) << table;
  const auto j = spmd::workloads::to_json(b);
  for (const char* k : {"compute", "communication", "io", "host_device", "other", "total"})
    EXPECT_TRUE(j.at(k).contains("min") && j.at(k).contains("mean") && j.at(k).contains("max")) << k;
  EXPECT_EQ(j.at("slowest_rank").get<int>(), P - 1);
}

TEST(TimeBreakdown, EqualComputeNamesTheLowestRankAndABrokenAccountShows) {
  Context ctx(MPI_COMM_WORLD, ContextOptions{"cpu", 1, 60.0});
  TimeSpent t;
  t.ns[static_cast<int>(TimeCategory::Compute)] = kS;
  t.total_ns = kS + (ctx.rank() == ctx.size() - 1 ? 7 : 0);  // the last rank lost 7 ns
  const TimeBreakdown b = spmd::workloads::reduce_time_breakdown(ctx, t);
  EXPECT_EQ(b.slowest_rank, 0);
  EXPECT_DOUBLE_EQ(b.load_imbalance, 1.0);
  EXPECT_EQ(b.max_sum_error_ns, 7);
}
