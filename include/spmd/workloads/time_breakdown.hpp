#pragma once
// Why P ranks are not P times faster: every rank's time account (runtime/time_account.hpp)
// over the workload, reduced over the ranks at its end. Rank 0 prints it as a fixed-width
// table and --json carries it as "time_breakdown":
//   {"compute": {"min": s, "mean": s, "max": s}, "communication": {...}, "io": {...},
//    "host_device": {...}, "other": {...}, "total": {...},
//    "slowest_rank": r, "slowest_host": "node2", "load_imbalance": max/mean compute,
//    "max_sum_error_ns": 0}
// Seconds; min/mean/max over ranks of each rank's own figure (the min of compute and the
// min of total may come from different ranks).
#include <array>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "spmd/runtime/context.hpp"
#include "spmd/runtime/time_account.hpp"

namespace spmd::workloads {

struct TimeBreakdown {
  struct Spread {
    double min = 0, mean = 0, max = 0;  // seconds, over ranks
  };
  int ranks = 1;
  std::array<Spread, runtime::kTimeCategories> category{};   // indexed by runtime::TimeCategory
  std::array<double, runtime::kTimeCategories> mean_percent{};  // category / the rank's total x 100, mean over ranks
  Spread total;
  int slowest_rank = 0;  // the rank with the most compute (the lowest of equals)
  std::string slowest_host;
  double load_imbalance = 1;  // max / mean compute; 1 when no rank computed
  // The largest |sum of a rank's categories - its total| over ranks, in nanoseconds: 0 when
  // the account is sound (it is by construction; the tests check it).
  std::int64_t max_sum_error_ns = 0;
  const Spread& at(runtime::TimeCategory c) const { return category[static_cast<int>(c)]; }
};

// Collective over ctx.comm(): every rank passes its own account (TimeAccount::stop()).
TimeBreakdown reduce_time_breakdown(const runtime::Context& ctx, const runtime::TimeSpent& mine);

// For rank 0 (nccl-tests style: '#' lines, fixed-width columns, units in the header):
//   # time breakdown over 4 ranks (seconds; mean %: share of each rank's total, averaged over ranks)
//   #   category             min       mean        max    mean %
//   #   compute           10.512     11.020     11.803      92.1
//   ...
//   #   total             11.950     11.962     11.970     100.0
//   # load imbalance (max/mean compute) 1.07, slowest rank 2 (node2)
std::string time_breakdown_table(const TimeBreakdown& b);

nlohmann::json to_json(const TimeBreakdown& b);

}  // namespace spmd::workloads
