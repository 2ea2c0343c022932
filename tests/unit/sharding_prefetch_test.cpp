// Prefetcher: order, the bound on how far the producer runs ahead, exceptions, and
// destruction before the stream is drained.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <thread>

#include "spmd/runtime/error.hpp"
#include "spmd/sharding/prefetch.hpp"

namespace {

using spmd::sharding::prefetch_to_device;
using spmd::sharding::Prefetcher;
using namespace std::chrono_literals;

// Waits up to 5 s for pred; false on timeout.
template <class Pred>
bool eventually(Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

TEST(ShardingPrefetch, PreservesOrderAndEnds) {
  for (const std::size_t depth : {1, 2, 7}) {
    int i = 0;
    auto p = prefetch_to_device<int>([&]() -> std::optional<int> { return i < 500 ? std::optional<int>(i++) : std::nullopt; }, depth);
    for (int expected = 0; expected < 500; ++expected) {
      const auto item = p.next();
      ASSERT_TRUE(item.has_value());
      ASSERT_EQ(*item, expected);
    }
    EXPECT_FALSE(p.next().has_value());
    EXPECT_FALSE(p.next().has_value()) << "the end must stay the end";
  }
}

TEST(ShardingPrefetch, ProducerStopsExactlyDepthAhead) {
  for (const std::size_t depth : {1, 2, 3, 5}) {
    std::atomic<int> produced{0};
    Prefetcher<int> p([&]() -> std::optional<int> { return produced++; }, depth);
    ASSERT_TRUE(eventually([&] { return produced.load() == static_cast<int>(depth); }));
    std::this_thread::sleep_for(30ms);
    EXPECT_EQ(produced.load(), static_cast<int>(depth)) << "the producer ran past the queue bound";
    for (int taken = 1; taken <= 3; ++taken) {
      EXPECT_EQ(p.next(), taken - 1);
      ASSERT_TRUE(eventually([&] { return produced.load() == static_cast<int>(depth) + taken; }));
      std::this_thread::sleep_for(20ms);
      EXPECT_EQ(produced.load(), static_cast<int>(depth) + taken);
    }
  }
}

TEST(ShardingPrefetch, NeverMoreThanDepthAheadUnderRacing) {
  // Each producer call k sees k items already produced; the consumer counts what it took
  // (just after next() returns, so it may lag by one). Bounded means k - taken <= depth.
  for (const std::size_t depth : {1, 2, 4}) {
    std::atomic<int> taken{0};
    std::atomic<int> worst{0};
    int k = 0;
    Prefetcher<int> p(
        [&]() -> std::optional<int> {
          if (k == 2000) return std::nullopt;
          const int ahead = k - taken.load();
          int w = worst.load();
          while (ahead > w && !worst.compare_exchange_weak(w, ahead)) {
          }
          return k++;
        },
        depth);
    int expected = 0;
    while (auto item = p.next()) {
      ASSERT_EQ(*item, expected++);
      ++taken;
      if (expected % 50 == 0) std::this_thread::sleep_for(1ms);  // let the producer fill up
    }
    EXPECT_EQ(expected, 2000);
    EXPECT_LE(worst.load(), static_cast<int>(depth));
    EXPECT_GE(worst.load(), static_cast<int>(depth) - 1) << "the producer never ran ahead: no prefetching";
  }
}

TEST(ShardingPrefetch, ProducerExceptionReachesTheConsumerAfterEarlierItems) {
  int i = 0;
  Prefetcher<int> p(
      [&]() -> std::optional<int> {
        if (i == 3) throw std::runtime_error("reading batch 3 failed");
        return i++;
      },
      2);
  EXPECT_EQ(p.next(), 0);
  EXPECT_EQ(p.next(), 1);
  EXPECT_EQ(p.next(), 2);
  for (int again = 0; again < 2; ++again) {
    try {
      p.next();
      FAIL() << "the producer's exception was not rethrown";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "reading batch 3 failed");
    }
  }
}

TEST(ShardingPrefetch, DestructionBeforeDrainingStopsTheThread) {
  std::atomic<int> produced{0};
  {
    Prefetcher<std::unique_ptr<int>> p([&] { return std::optional(std::make_unique<int>(produced++)); }, 3);
    EXPECT_EQ(**p.next(), 0);
    ASSERT_TRUE(eventually([&] { return produced.load() == 4; }));
  }  // queue full, producer waiting for room: the destructor must wake and join it
  const int at_destruction = produced.load();
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(produced.load(), at_destruction) << "the producer kept running after destruction";
  // Destroyed while a (slow) producer call is in progress, and right after construction.
  {
    Prefetcher<int> slow([]() -> std::optional<int> { std::this_thread::sleep_for(30ms); return 1; }, 1);
    std::this_thread::sleep_for(5ms);
  }
  { Prefetcher<int> idle([]() -> std::optional<int> { return 1; }, 2); }
}

TEST(ShardingPrefetch, InvalidArguments) {
  EXPECT_THROW(Prefetcher<int>([]() -> std::optional<int> { return 1; }, 0), spmd::Error);
  EXPECT_THROW(Prefetcher<int>(Prefetcher<int>::Producer{}, 2), spmd::Error);
}

}  // namespace
