#include "spmd/workloads/time_breakdown.hpp"

#include <cstdlib>
#include <span>

#include "spmd/runtime/collectives.hpp"
#include "spmd/workloads/report.hpp"

namespace spmd::workloads {

namespace {
constexpr int kC = runtime::kTimeCategories;
constexpr int kValues = kC + 1;  // the categories, then the total
double seconds(std::int64_t ns) { return static_cast<double>(ns) * 1e-9; }
}  // namespace

TimeBreakdown reduce_time_breakdown(const runtime::Context& ctx, const runtime::TimeSpent& mine) {
  double v[kValues];
  for (int c = 0; c < kC; ++c) v[c] = seconds(mine.ns[static_cast<std::size_t>(c)]);
  v[kC] = seconds(mine.total_ns);
  // Max of (v, -v): the maxima and the minima in one allreduce.
  double extremes[2 * kValues];
  for (int i = 0; i < kValues; ++i) {
    extremes[i] = v[i];
    extremes[kValues + i] = -v[i];
  }
  runtime::allreduce_max(ctx, std::span<double>(extremes, 2 * kValues));
  // Sums of the seconds and of each rank's shares of its own total.
  double sums[kValues + kC];
  for (int i = 0; i < kValues; ++i) sums[i] = v[i];
  for (int c = 0; c < kC; ++c) sums[kValues + c] = v[kC] > 0 ? v[c] / v[kC] : 0.0;
  runtime::allreduce_sum(ctx, std::span<double>(sums, kValues + kC));
  std::int64_t error = std::llabs(mine.sum_ns() - mine.total_ns);
  runtime::allreduce_max(ctx, std::span<std::int64_t>(&error, 1));
  const auto slowest = runtime::allreduce_maxloc(ctx, v[static_cast<int>(runtime::TimeCategory::Compute)]);
  std::string host = ctx.rank() == slowest.rank ? ctx.host() : std::string();
  runtime::broadcast(ctx, host, slowest.rank);

  TimeBreakdown b;
  b.ranks = ctx.size();
  const double P = static_cast<double>(ctx.size());
  const auto spread = [&](int i) { return TimeBreakdown::Spread{-extremes[kValues + i], sums[i] / P, extremes[i]}; };
  for (int c = 0; c < kC; ++c) {
    b.category[static_cast<std::size_t>(c)] = spread(c);
    b.mean_percent[static_cast<std::size_t>(c)] = 100.0 * sums[kValues + c] / P;
  }
  b.total = spread(kC);
  b.slowest_rank = slowest.rank;
  b.slowest_host = host;
  const auto& compute = b.at(runtime::TimeCategory::Compute);
  b.load_imbalance = compute.mean > 0 ? compute.max / compute.mean : 1.0;
  b.max_sum_error_ns = error;
  return b;
}

std::string time_breakdown_table(const TimeBreakdown& b) {
  std::string out = format("# time breakdown over %d rank%s (seconds; mean %%: share of each rank's total, averaged over ranks)\n",
                           b.ranks, b.ranks == 1 ? "" : "s");
  out += format("#   %-13s %10s %10s %10s %9s\n", "category", "min", "mean", "max", "mean %");
  const auto row = [&](const char* name, const TimeBreakdown::Spread& s, double percent) {
    out += format("#   %-13s %10.4f %10.4f %10.4f %9.1f\n", name, s.min, s.mean, s.max, percent);
  };
  for (int c = 0; c < kC; ++c)
    row(runtime::to_string(static_cast<runtime::TimeCategory>(c)), b.category[static_cast<std::size_t>(c)],
        b.mean_percent[static_cast<std::size_t>(c)]);
  row("total", b.total, 100.0);
  out += format("# load imbalance (max/mean compute) %.2f, slowest rank %d (%s)\n", b.load_imbalance, b.slowest_rank,
                b.slowest_host.c_str());
  return out;
}

nlohmann::json to_json(const TimeBreakdown& b) {
  nlohmann::json j;
  const auto spread = [](const TimeBreakdown::Spread& s) {
    return nlohmann::json{{"min", s.min}, {"mean", s.mean}, {"max", s.max}};
  };
  for (int c = 0; c < kC; ++c)
    j[runtime::to_string(static_cast<runtime::TimeCategory>(c))] = spread(b.category[static_cast<std::size_t>(c)]);
  j["total"] = spread(b.total);
  j["slowest_rank"] = b.slowest_rank;
  j["slowest_host"] = b.slowest_host;
  j["load_imbalance"] = b.load_imbalance;
  j["max_sum_error_ns"] = b.max_sum_error_ns;
  return j;
}

}  // namespace spmd::workloads
