// Collectives over devices x ranks against plain arithmetic, for 1..3 devices per rank and
// whatever rank count ctest launches (1..4).
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <numeric>
#include <thread>

#include "spmd/runtime/agree.hpp"
#include "spmd/backends/backend.hpp"
#include "spmd/runtime/collectives.hpp"
#include "spmd/runtime/error.hpp"

using namespace spmd::runtime;

namespace {
ContextOptions cpu(int devices) { return ContextOptions{"cpu", devices, 60.0}; }
}  // namespace

class Collectives : public ::testing::TestWithParam<int> {};

TEST_P(Collectives, IntegerPsumIsExactInt64) {
  Context ctx(MPI_COMM_WORLD, cpu(GetParam()));
  // Values near 2^40 overflow int32 and lose bits in float: only an int64 sum is exact.
  PerDevice<std::int64_t> v;
  std::int64_t expected = 0;
  for (int g = 0; g < ctx.total_devices(); ++g) expected += (std::int64_t(1) << 40) + g;
  for (int d = 0; d < ctx.devices_per_rank(); ++d) v.push_back((std::int64_t(1) << 40) + ctx.global_device(d));
  EXPECT_EQ(psum(ctx, v), expected);
  PerDevice<std::int32_t> small;
  for (int d = 0; d < ctx.devices_per_rank(); ++d) small.push_back(2000000000);
  EXPECT_EQ(psum(ctx, small), std::int64_t(2000000000) * ctx.total_devices());
}

TEST_P(Collectives, VectorPsumPmeanPmaxAllGather) {
  Context ctx(MPI_COMM_WORLD, cpu(GetParam()));
  const int n = 5, total = ctx.total_devices();
  std::vector<std::vector<float>> data(static_cast<size_t>(ctx.devices_per_rank()));
  PerDevice<std::span<const float>> spans;
  for (int d = 0; d < ctx.devices_per_rank(); ++d) {
    for (int i = 0; i < n; ++i) data[d].push_back(static_cast<float>(ctx.global_device(d) * 10 + i));
    spans.emplace_back(data[d]);
  }
  const auto s = psum(ctx, spans);
  const auto m = pmean(ctx, spans);
  const auto mx = pmax(ctx, spans);
  const auto all = all_gather(ctx, spans);
  ASSERT_EQ(all.size(), static_cast<size_t>(total * n));
  for (int i = 0; i < n; ++i) {
    double sum = 0;
    for (int g = 0; g < total; ++g) sum += g * 10 + i;
    EXPECT_DOUBLE_EQ(s[i], sum);
    EXPECT_DOUBLE_EQ(m[i], sum / total);
    EXPECT_DOUBLE_EQ(mx[i], (total - 1) * 10 + i);
    for (int g = 0; g < total; ++g) EXPECT_EQ(all[static_cast<size_t>(g * n + i)], static_cast<float>(g * 10 + i));
  }
}

TEST_P(Collectives, OrderedPsumMatchesSequentialSumInGlobalOrder) {
  Context ctx(MPI_COMM_WORLD, cpu(GetParam()));
  // Values whose sum depends on the order: the ordered psum must equal the sequential sum
  // over global devices, bit for bit, whatever the layout.
  auto value = [](int g) { return g % 2 ? 1e16 : 1.0 + g * 0.1; };
  std::vector<std::vector<double>> data(static_cast<size_t>(ctx.devices_per_rank()));
  PerDevice<std::span<const double>> spans;
  for (int d = 0; d < ctx.devices_per_rank(); ++d) {
    data[d] = {value(ctx.global_device(d)), -value(ctx.global_device(d))};
    spans.emplace_back(data[d]);
  }
  const auto got = psum_ordered(ctx, spans);
  double a = 0, b = 0;
  for (int g = 0; g < ctx.total_devices(); ++g) {
    a += value(g);
    b += -value(g);
  }
  EXPECT_EQ(got[0], a);
  EXPECT_EQ(got[1], b);
}

TEST_P(Collectives, ReplicateUnreplicateBroadcast) {
  Context ctx(MPI_COMM_WORLD, cpu(GetParam()));
  std::vector<std::int32_t> mine = {ctx.rank() * 100 + 1, ctx.rank() * 100 + 2, 7};
  auto rep = replicate<std::int32_t>(ctx, mine);
  ASSERT_EQ(static_cast<int>(rep.size()), ctx.devices_per_rank());
  for (const auto& copy : rep) EXPECT_EQ(copy, (std::vector<std::int32_t>{1, 2, 7}));
  EXPECT_EQ(unreplicate(rep), (std::vector<std::int32_t>{1, 2, 7}));
  // Distinct buffers per device: writing one copy leaves the others.
  if (rep.size() > 1) {
    rep[1][0] = -1;
    EXPECT_EQ(rep[0][0], 1);
  }
  std::vector<double> v = ctx.rank() == 0 ? std::vector<double>{3.5, 4.5} : std::vector<double>{};
  broadcast(ctx, v, 0);
  EXPECT_EQ(v, (std::vector<double>{3.5, 4.5}));
}

INSTANTIATE_TEST_SUITE_P(DevicesPerRank, Collectives, ::testing::Values(1, 2, 3));

TEST(Agree, FailureOnOneRankThrowsOnEveryRankWithThatMessage) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int bad = size - 1;
  try {
    agree_or_throw(MPI_COMM_WORLD, rank == bad ? "rank " + std::to_string(rank) + ": labels out of range" : "");
    FAIL() << "expected a CollectiveError";
  } catch (const spmd::CollectiveError& e) {
    EXPECT_NE(std::string(e.what()).find("rank " + std::to_string(bad) + ": labels out of range"), std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(agree_or_throw(MPI_COMM_WORLD, ""));
  EXPECT_THROW(agree_on(MPI_COMM_WORLD, [&] { if (rank == 0) throw spmd::Error("boom"); }), spmd::CollectiveError);
}

TEST(Agree, DifferentOptionsOnOneRankAreNamed) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  EXPECT_NO_THROW(require_identical_on_all_ranks(MPI_COMM_WORLD, "a=1\nb=2\n", "options"));
  if (size == 1) return;
  const std::string mine = rank == size - 1 ? "a=1\nb=3\n" : "a=1\nb=2\n";
  try {
    require_identical_on_all_ranks(MPI_COMM_WORLD, mine, "options");
    FAIL() << "expected a CollectiveError";
  } catch (const spmd::CollectiveError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("'b=2'"), std::string::npos) << m;
    EXPECT_NE(m.find("rank " + std::to_string(size - 1) + " has 'b=3'"), std::string::npos) << m;
  }
}

TEST(DevicePool, RunsEveryDeviceConcurrentlyAndPropagatesErrors) {
  Context ctx(MPI_COMM_WORLD, cpu(3));
  std::atomic<int> inside{0}, peak{0};
  std::vector<int> seen(3, 0);
  ctx.pool().run([&](int d) {
    const int now = ++inside;
    int p = peak.load();
    while (now > p && !peak.compare_exchange_weak(p, now)) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    seen[static_cast<size_t>(d)] = d + 1;
    --inside;
  });
  EXPECT_EQ(seen, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(peak.load(), 3) << "device threads did not run concurrently";
  EXPECT_THROW(ctx.pool().run([](int d) { if (d == 1) throw spmd::Error("device 1 failed"); }), spmd::Error);
  // The pool stays usable after an error.
  int count = 0;
  std::mutex m;
  ctx.pool().run([&](int) { std::lock_guard<std::mutex> l(m); ++count; });
  EXPECT_EQ(count, 3);
}

TEST(Context, GlobalDeviceIndexIsRankMajor) {
  Context ctx(MPI_COMM_WORLD, cpu(2));
  EXPECT_EQ(ctx.total_devices(), 2 * ctx.size());
  for (int d = 0; d < 2; ++d) {
    EXPECT_EQ(ctx.global_device(d), ctx.rank() * 2 + d);
    EXPECT_EQ(ctx.devices()[static_cast<size_t>(d)].global_index, ctx.rank() * 2 + d);
  }
  EXPECT_GE(ctx.local_rank(), 0);
  EXPECT_LT(ctx.local_rank(), ctx.local_size());
}

TEST(Context, CudaBackendWithoutGpuFailsOnEveryRank) {
  if (spmd::backends::select_platform("cuda").error.empty()) GTEST_SKIP() << "a GPU is present";
  ContextOptions cuda{"cuda", 1, 60.0};
  cuda.select = &spmd::backends::select_platform;
  try {
    Context ctx(MPI_COMM_WORLD, cuda);
    FAIL() << "expected a CollectiveError";
  } catch (const spmd::CollectiveError& e) {
    EXPECT_NE(std::string(e.what()).find("--backend cuda"), std::string::npos) << e.what();
  }
  ContextOptions automatic{"auto", 1, 60.0};
  automatic.select = &spmd::backends::select_platform;
  Context autoctx(MPI_COMM_WORLD, automatic);
  EXPECT_EQ(autoctx.backend(), "cpu");
  EXPECT_NE(autoctx.backend_note().find("auto"), std::string::npos);
}
