// What the always-on time account (runtime/time_account.hpp) costs: nanoseconds per
// TimeScope (enter + leave: two clock reads) on the accounting thread, on another thread
// (a flag test), and per DevicePool::run of an empty job on one CPU device with and without
// an account running (the per-step dispatch every workload makes).
//
//   bench_time_account [iterations=10000000]
//
// Prints '#' header lines and one fixed-width row per case: median ns per operation over 7
// runs. A workload step makes one dispatch and 0-3 MPI calls, so the account adds ~2 scopes
// (~50-100 ns) to each step; compare with the step times of `spmd eval` / `logreg`.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <thread>
#include <vector>

#include "spmd/runtime/devices.hpp"
#include "spmd/runtime/time_account.hpp"

namespace {

using spmd::runtime::TimeCategory;
using spmd::runtime::TimeScope;

double median_ns(long iterations, const std::function<void(long)>& body) {
  std::vector<double> runs;
  for (int r = 0; r < 7; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    body(iterations);
    runs.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() /
                   static_cast<double>(iterations));
  }
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

void scopes(long n) {
  for (long i = 0; i < n; ++i) {
    TimeScope s(i & 1 ? TimeCategory::Communication : TimeCategory::Compute);
    asm volatile("" ::: "memory");
  }
}

}  // namespace

int main(int argc, char** argv) {
  const long n = argc > 1 ? std::atol(argv[1]) : 10'000'000;
  std::printf("# time account cost, %ld operations per run, median of 7 runs\n", n);
  std::printf("# %-44s %10s\n", "case", "ns/op");
  double off = 0, on = 0, other = 0, pool_off = 0, pool_on = 0;
  off = median_ns(n, scopes);  // no account running: a flag test
  {
    spmd::runtime::TimeAccount account;
    on = median_ns(n, scopes);
    std::thread t([&] { other = median_ns(n, scopes); });
    t.join();
    (void)account.stop();
  }
  std::vector<spmd::runtime::DeviceInfo> one(1);
  one[0].name = "cpu:0";
  spmd::runtime::DevicePool pool(std::move(one));
  const std::function<void(int)> job = [](int) { asm volatile("" ::: "memory"); };
  const long dispatches = std::max(1L, n / 10);
  pool_off = median_ns(dispatches, [&](long k) {
    for (long i = 0; i < k; ++i) pool.run(job);
  });
  {
    spmd::runtime::TimeAccount account;
    pool_on = median_ns(dispatches, [&](long k) {
      for (long i = 0; i < k; ++i) pool.run(job);
    });
    (void)account.stop();
  }
  std::printf("  %-44s %10.1f\n", "TimeScope, no account running", off);
  std::printf("  %-44s %10.1f\n", "TimeScope, accounting thread", on);
  std::printf("  %-44s %10.1f\n", "TimeScope, another thread", other);
  std::printf("  %-44s %10.1f\n", "DevicePool::run (1 CPU device), no account", pool_off);
  std::printf("  %-44s %10.1f\n", "DevicePool::run (1 CPU device), accounting", pool_on);
  return 0;
}
