// The time account (runtime/time_account.hpp): nested scopes charge each moment once, the
// categories add up to the total exactly, other threads do not account, device workers'
// copies move from compute to host_device through DevicePool::run (once per nested timer,
// never more than the dispatch took). Sleeps give lower bounds only; upper bounds are the
// window itself, so a loaded machine cannot fail these.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "spmd/runtime/devices.hpp"
#include "spmd/runtime/error.hpp"
#include "spmd/runtime/time_account.hpp"

using namespace spmd::runtime;

namespace {
void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }
constexpr std::int64_t kMs = 1'000'000;

// Stops the account; every account must add up to its total to the nanosecond.
TimeSpent stopped(TimeAccount& account) {
  const TimeSpent t = account.stop();
  EXPECT_EQ(t.sum_ns(), t.total_ns);
  return t;
}

std::vector<DeviceInfo> host_devices(int n) {
  std::vector<DeviceInfo> d(static_cast<size_t>(n));
  for (int k = 0; k < n; ++k) {
    d[static_cast<size_t>(k)].local_index = k;
    d[static_cast<size_t>(k)].name = "cpu:" + std::to_string(k);
  }
  return d;
}
}  // namespace

TEST(TimeAccount, NestedScopesChargeEachMomentOnceAndSumExactly) {
  TimeAccount account;
  sleep_ms(5);  // other
  {
    TimeScope compute(TimeCategory::Compute);
    sleep_ms(20);
    {
      TimeScope communication(TimeCategory::Communication);
      sleep_ms(10);
      TimeScope io(TimeCategory::Io);  // innermost wins
      sleep_ms(10);
    }
    sleep_ms(5);
  }
  const TimeSpent t = stopped(account);
  EXPECT_GE(t.at(TimeCategory::Compute), 25 * kMs);
  EXPECT_GE(t.at(TimeCategory::Communication), 10 * kMs);
  EXPECT_GE(t.at(TimeCategory::Io), 10 * kMs);
  EXPECT_GE(t.at(TimeCategory::Other), 5 * kMs);
  EXPECT_EQ(t.at(TimeCategory::HostDevice), 0);
  // Compute excludes the 20 ms spent in the scopes nested in it.
  EXPECT_LE(t.at(TimeCategory::Compute), t.total_ns - 25 * kMs);
}

TEST(TimeAccount, OtherThreadsDoNotAccount) {
  TimeAccount account;
  std::thread worker([] {
    TimeScope io(TimeCategory::Io);
    TimeScope communication(TimeCategory::Communication);
    sleep_ms(20);
  });
  worker.join();
  const TimeSpent t = stopped(account);
  EXPECT_EQ(t.at(TimeCategory::Io), 0);
  EXPECT_EQ(t.at(TimeCategory::Communication), 0);
  EXPECT_EQ(t.at(TimeCategory::Other), t.total_ns);
  // After stop, scopes on the main thread do nothing either.
  { TimeScope compute(TimeCategory::Compute); }
}

TEST(TimeAccount, OneAtATimeAndScopesWithoutOneAreHarmless) {
  { TimeScope compute(TimeCategory::Compute); }
  TimeAccount account;
  EXPECT_THROW(TimeAccount second, spmd::Error);
  const TimeSpent t = stopped(account);
  EXPECT_THROW(account.stop(), spmd::Error);
}

TEST(TimeAccount, ReclassifyMovesNoMoreThanTheScopeCharged) {
  TimeAccount account;
  sleep_ms(5);
  {
    TimeScope compute(TimeCategory::Compute);
    sleep_ms(10);
    compute.reclassify(TimeCategory::HostDevice, std::int64_t{1} << 50);  // far more than it took
  }
  const TimeSpent t = stopped(account);
  EXPECT_LT(t.at(TimeCategory::Compute), 5 * kMs);  // only the moment between the move and the scope's end
  EXPECT_GE(t.at(TimeCategory::HostDevice), 10 * kMs);
  EXPECT_GE(t.at(TimeCategory::Other), 5 * kMs);  // untouched by the move
}

TEST(TimeAccount, DevicePoolChargesComputeAndTheSlowestDevicesCopies) {
  DevicePool pool(host_devices(2));
  TimeAccount account;
  pool.run([](int i) {
    DeviceTransferTimer outer;  // nested timers on a worker count once
    {
      DeviceTransferTimer inner;
      sleep_ms(i == 0 ? 10 : 30);
    }
    sleep_ms(5);
  });
  sleep_ms(5);
  const TimeSpent t = stopped(account);
  // The slowest device copied for >= 35 ms (30 + 5 in the outer timer), counted once: the
  // dispatch took about as long, so less than twice that.
  EXPECT_GE(t.at(TimeCategory::HostDevice), 35 * kMs);
  EXPECT_LT(t.at(TimeCategory::HostDevice), 70 * kMs);
  EXPECT_GE(t.at(TimeCategory::Other), 5 * kMs);
  // The workers' counters were taken: nothing left over for the next dispatch.
  pool.run([](int) { EXPECT_EQ(take_thread_transfer_ticks(), 0); });
}

TEST(TimeAccount, TransferTimerOnTheMainThreadIsHostDevice) {
  TimeAccount account;
  {
    DeviceTransferTimer copy;
    sleep_ms(10);
  }
  const TimeSpent t = stopped(account);
  EXPECT_GE(t.at(TimeCategory::HostDevice), 10 * kMs);
  EXPECT_EQ(take_thread_transfer_ticks(), 0);
}

TEST(TimeAccount, SimulatedSlowDeviceIsCompute) {
  DevicePool pool(host_devices(1));  // one CPU device: runs on the calling thread
  pool.set_simulated_delay(0.02);
  TimeAccount account;
  pool.run([](int) {});
  const TimeSpent t = stopped(account);
  EXPECT_GE(t.at(TimeCategory::Compute), 20 * kMs);
  EXPECT_EQ(t.sum_ns(), t.total_ns);
}
