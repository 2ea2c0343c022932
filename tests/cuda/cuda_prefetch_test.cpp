// DevicePrefetcher (prefetch_to_device on a GPU): the bytes survive the trip for several
// depths and batch sizes (empty arrays, a short last batch), order, how far the producer
// runs ahead, exceptions, destruction before draining (with readers still running), and
// the GPU it lives on; skipped visibly without a GPU. The refusal of a device that is not a
// usable GPU, and the option checks, run everywhere.
#include <gtest/gtest.h>

#include "gpu_test_support.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "spmd/backends/cuda/cuda_device.hpp"
#include "spmd//runtime/devices.hpp"
#include "spmd/runtime/error.hpp"

#include <cuda_runtime_api.h>

#include "spmd/backends/cuda/check.hpp"
#include "spmd/backends/cuda/prefetch.hpp"
#include "spmd/backends/cuda/device_buffer.hpp"
#include "spmd/backends/cuda/stream.hpp"

namespace {

using spmd::runtime::DeviceInfo;
using spmd::sharding::GpuBatch;
using spmd::sharding::DevicePrefetcher;
using spmd::sharding::HostBatch;
using spmd::sharding::HostBytes;
using namespace std::chrono_literals;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

template <class Pred>
bool eventually(Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

int current_gpu() {
  int device = -1;
  SPMD_CHECK_CUDA(cudaGetDevice(&device), "test: current GPU");
  return device;
}

// Byte j of array a of batch k. Modulo a prime, so that no power-of-two period hides an
// array landing at the wrong offset or a batch in the wrong slot.
std::uint8_t pattern(std::int64_t k, std::size_t a, std::size_t j) {
  return static_cast<std::uint8_t>((static_cast<std::uint64_t>(k) * 131 + a * 71 + j * 7 + (j >> 9)) % 251);
}

using Sizes = std::vector<std::size_t>;  // bytes of each array of one batch
using Arrays = std::vector<std::vector<std::uint8_t>>;

Arrays host_arrays(const Sizes& sizes, std::int64_t k) {
  Arrays arrays(sizes.size());
  for (std::size_t a = 0; a < sizes.size(); ++a) {
    arrays[a].resize(sizes[a]);
    for (std::size_t j = 0; j < sizes[a]; ++j) arrays[a][j] = pattern(k, a, j);
  }
  return arrays;
}

std::int64_t tag_of(std::int64_t k) { return 1000 + 7 * k; }

// Counts what the producer did, for the bound and lifetime checks.
struct ProducerLog {
  std::atomic<int> calls{0};
  std::mutex mutex;
  std::vector<std::weak_ptr<const void>> owners;  // batch k's HostBatch::owner
};

// Batches 0 .. count-1 of sizes_of(k) bytes. via_owner: each batch's bytes travel in
// HostBatch::owner; otherwise the producer keeps them only until its next call and then
// scribbles over them, so a prefetcher that read them late would deliver wrong bytes.
template <class SizesOf>
DevicePrefetcher::Producer scripted_producer(SizesOf sizes_of, std::int64_t count, bool via_owner,
                                             std::shared_ptr<ProducerLog> log) {
  auto next_k = std::make_shared<std::int64_t>(0);
  auto previous = std::make_shared<std::shared_ptr<Arrays>>();
  return [=]() -> std::optional<HostBatch> {
    ++log->calls;
    if (*previous) {
      for (auto& array : **previous) std::fill(array.begin(), array.end(), std::uint8_t{0xEE});
      previous->reset();
    }
    const std::int64_t k = *next_k;
    if (k == count) return std::nullopt;
    auto arrays = std::make_shared<Arrays>(host_arrays(sizes_of(k), k));
    HostBatch batch;
    batch.tag = tag_of(k);
    for (const auto& array : *arrays) batch.arrays.push_back(HostBytes{array.empty() ? nullptr : array.data(), array.size()});
    if (via_owner) {
      std::lock_guard<std::mutex> lock(log->mutex);
      log->owners.push_back(arrays);
      batch.owner = std::move(arrays);
    } else {
      *previous = std::move(arrays);
    }
    ++*next_k;
    return batch;
  };
}

// Runs on a CUDA-internal thread, in stream order: delays the readers queued behind it, so
// that a slot refilled before its readers ran would be caught. The delay travels in the
// pointer itself, so nothing on the test's stack has to outlive the stream.
void CUDART_CB sleep_on_stream(void* microseconds) {
  std::this_thread::sleep_for(std::chrono::microseconds(reinterpret_cast<std::uintptr_t>(microseconds)));
}
void* delay_arg(int microseconds) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(microseconds)); }
void CUDART_CB set_flag_on_stream(void* flag) { static_cast<std::atomic<bool>*>(flag)->store(true); }

// Takes every batch, checks what the view says, queues a device-to-host copy of each array
// on one reader stream WITHOUT waiting for it (readers run behind the prefetcher, as in
// training), and compares every byte at the end.
void expect_round_trip(std::size_t depth, const std::vector<Sizes>& script, bool via_owner, int reader_delay_us) {
  SCOPED_TRACE("depth " + std::to_string(depth) + (via_owner ? ", bytes via owner" : ", bytes kept by producer") +
               ", reader delay " + std::to_string(reader_delay_us) + " us");
  const std::size_t arrays = script.front().size();
  std::vector<std::size_t> capacities(arrays, 0);
  for (const Sizes& sizes : script)
    for (std::size_t a = 0; a < arrays; ++a) capacities[a] = std::max(capacities[a], sizes[a]);
  capacities.back() += 13;  // slack: a capacity larger than any batch is fine

  std::vector<std::vector<std::size_t>> out_offset(script.size(), std::vector<std::size_t>(arrays));
  std::size_t out_bytes = 0;
  for (std::size_t k = 0; k < script.size(); ++k)
    for (std::size_t a = 0; a < arrays; ++a) {
      out_offset[k][a] = out_bytes;
      out_bytes += script[k][a];
    }

  auto log = std::make_shared<ProducerLog>();
  const auto count = static_cast<std::int64_t>(script.size());
  SPMD_CHECK_CUDA(cudaSetDevice(0), "test GPU");
  spmd::tensor::Stream reader;  // before the prefetcher: it must outlive the last release
  spmd::tensor::PinnedBuffer<std::uint8_t> out(out_bytes, "test: read-back");
  DevicePrefetcher p = spmd::sharding::prefetch_to_device(
      spmd::test::cuda_device(0), scripted_producer([&](std::int64_t k) { return script[static_cast<std::size_t>(k)]; }, count,
                                       via_owner, log),
      depth, capacities);
  EXPECT_EQ(p.depth(), depth);
  EXPECT_EQ(p.array_capacities(), capacities);

  for (std::int64_t k = 0; k < count; ++k) {
    const std::optional<GpuBatch> batch = p.next();
    ASSERT_TRUE(batch.has_value()) << "batch " << k;
    EXPECT_EQ(batch->index(), k);
    EXPECT_EQ(batch->tag(), tag_of(k)) << "batches out of order";
    ASSERT_EQ(batch->size(), arrays);
    if (via_owner) {
      std::lock_guard<std::mutex> lock(log->mutex);
      EXPECT_TRUE(log->owners.at(static_cast<std::size_t>(k)).expired())
          << "batch " << k << "'s host memory was kept after it was staged";
    }
    batch->wait_on(reader.get());
    if (reader_delay_us > 0)
      SPMD_CHECK_CUDA(cudaLaunchHostFunc(reader.get(), sleep_on_stream, delay_arg(reader_delay_us)), "test: delay readers");
    for (std::size_t a = 0; a < arrays; ++a) {
      const auto& array = (*batch)[a];
      const std::size_t bytes = script[static_cast<std::size_t>(k)][a];
      ASSERT_EQ(array.bytes, bytes) << "batch " << k << " array " << a;
      if (bytes == 0) {
        EXPECT_EQ(array.data, nullptr) << "batch " << k << " array " << a;
        continue;
      }
      ASSERT_NE(array.data, nullptr);
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(array.data) % 256, 0u) << "batch " << k << " array " << a;
      SPMD_CHECK_CUDA(cudaMemcpyAsync(out.data() + out_offset[static_cast<std::size_t>(k)][a], array.as<std::uint8_t>(),
                                      bytes, cudaMemcpyDeviceToHost, reader.get()),
                      "test: read a batch back");
    }
  }
  EXPECT_FALSE(p.next().has_value());
  EXPECT_FALSE(p.next().has_value()) << "the end must stay the end";
  EXPECT_EQ(log->calls.load(), count + 1) << "the producer is called once per batch, plus the call that ends";
  reader.synchronize("test: read-back");
  for (std::size_t k = 0; k < script.size(); ++k)
    for (std::size_t a = 0; a < arrays; ++a)
      for (std::size_t j = 0; j < script[k][a]; ++j)
        ASSERT_EQ(out.data()[out_offset[k][a] + j], pattern(static_cast<std::int64_t>(k), a, j))
            << "batch " << k << " array " << a << " byte " << j;
}

TEST(CudaPrefetch, RoundTripsEveryByteInOrderForEveryDepth) {
  SKIP_WITHOUT_GPU();
  // Three arrays (say features, labels, mask): full batches, empty arrays, an all-empty
  // batch, sizes around the 256-byte alignment, and a short last batch.
  const std::vector<Sizes> script = {{1000, 4, 257}, {0, 4, 0},   {999, 0, 1},  {0, 0, 0},
                                     {1, 1, 256},    {256, 4, 255}, {257, 3, 0}, {1000, 4, 257},
                                     {512, 0, 128},  {1000, 4, 257}, {3, 2, 1}};
  for (const std::size_t depth : {1, 2, 3})
    for (const bool via_owner : {false, true}) {
      expect_round_trip(depth, script, via_owner, 0);
      expect_round_trip(depth, script, via_owner, 300);
    }
  // One batch only, and one that is empty.
  expect_round_trip(2, {{77, 5}}, false, 0);
  expect_round_trip(1, {{0, 0}}, true, 0);
}

TEST(CudaPrefetch, LargeBatchesSurviveSlowReaders) {
  SKIP_WITHOUT_GPU();
  // Copies that take a while, and readers that lag behind: a slot refilled before its
  // readers ran, or pinned bytes overwritten before their copy, would show as wrong bytes.
  std::vector<Sizes> script(16, Sizes{std::size_t{4} << 20, 4096});
  script.back() = Sizes{(std::size_t{4} << 20) / 3 + 1, 1365};
  for (const std::size_t depth : {1, 2}) expect_round_trip(depth, script, false, 2000);
}

TEST(CudaPrefetch, ProducerRunsExactlyDepthAhead) {
  SKIP_WITHOUT_GPU();
  for (const std::size_t depth : {1, 2, 3}) {
    auto log = std::make_shared<ProducerLog>();
    DevicePrefetcher p(spmd::test::cuda_device(0),
                       scripted_producer([](std::int64_t k) { return Sizes{static_cast<std::size_t>(k % 5) * 10}; },
                                         std::numeric_limits<std::int64_t>::max(), false, log),
                       depth, {40});
    const int d = static_cast<int>(depth);
    ASSERT_TRUE(eventually([&] { return log->calls.load() == d; })) << "depth " << depth;
    std::this_thread::sleep_for(30ms);
    EXPECT_EQ(log->calls.load(), d) << "depth " << depth << ": the producer ran past the bound";
    for (int taken = 1; taken <= 2 * d + 2; ++taken) {  // past the ring's size: slots recycle
      const auto batch = p.next();
      ASSERT_TRUE(batch.has_value());
      EXPECT_EQ(batch->index(), taken - 1);
      ASSERT_TRUE(eventually([&] { return log->calls.load() == d + taken; })) << "depth " << depth;
      std::this_thread::sleep_for(10ms);
      EXPECT_EQ(log->calls.load(), d + taken) << "depth " << depth << " after " << taken << " taken";
    }
  }  // destroyed with the queue full and the producer waiting for room
}

TEST(CudaPrefetch, NeverMoreThanDepthAheadUnderRacing) {
  SKIP_WITHOUT_GPU();
  // Producer call k sees k batches made; the consumer counts what it took just after next()
  // returns (so it may lag by one). Bounded means k - taken <= depth.
  for (const std::size_t depth : {1, 2, 4}) {
    std::atomic<int> taken{0}, worst{0};
    int k = 0;
    std::vector<std::uint8_t> bytes(64, 1);
    DevicePrefetcher p(
        spmd::test::cuda_device(0),
        [&]() -> std::optional<HostBatch> {
          if (k == 400) return std::nullopt;
          const int ahead = k - taken.load();
          int w = worst.load();
          while (ahead > w && !worst.compare_exchange_weak(w, ahead)) {
          }
          ++k;
          return HostBatch{{HostBytes{bytes.data(), bytes.size()}}, k - 1, nullptr};
        },
        depth, {64});
    int expected = 0;
    while (const auto batch = p.next()) {
      ASSERT_EQ(batch->tag(), expected++);
      ++taken;
      if (expected % 40 == 0) std::this_thread::sleep_for(1ms);  // let the producer fill up
    }
    EXPECT_EQ(expected, 400);
    EXPECT_LE(worst.load(), static_cast<int>(depth)) << "depth " << depth;
    EXPECT_GE(worst.load(), static_cast<int>(depth) - 1) << "depth " << depth << ": the producer never ran ahead";
  }
}

TEST(CudaPrefetch, ProducerExceptionReachesTheConsumerAfterEarlierBatches) {
  SKIP_WITHOUT_GPU();
  auto log = std::make_shared<ProducerLog>();
  auto good = scripted_producer([](std::int64_t k) { return Sizes{static_cast<std::size_t>(100 + k)}; }, 100, false, log);
  int calls = 0;
  DevicePrefetcher p(
      spmd::test::cuda_device(0),
      [&]() -> std::optional<HostBatch> {
        if (calls++ == 5) throw std::runtime_error("reading batch 5 failed");
        return good();
      },
      2, {200});
  for (std::int64_t k = 0; k < 5; ++k) {
    const auto batch = p.next();
    ASSERT_TRUE(batch.has_value());
    ASSERT_EQ(batch->index(), k);
    batch->synchronize();
    std::vector<std::uint8_t> back((*batch)[0].bytes);
    SPMD_CHECK_CUDA(cudaMemcpy(back.data(), (*batch)[0].data, back.size(), cudaMemcpyDeviceToHost), "test: read back");
    EXPECT_EQ(back, host_arrays(Sizes{static_cast<std::size_t>(100 + k)}, k)[0]) << "batch " << k;
  }
  for (int again = 0; again < 2; ++again) {
    try {
      p.next();
      FAIL() << "the producer's exception was not rethrown";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "reading batch 5 failed");
    }
  }
}

// The error next() reports once the batches before `bad` are taken.
std::string error_for_bad_batch(std::int64_t bad, HostBatch bad_batch, std::vector<std::size_t> capacities) {
  std::vector<std::uint8_t> bytes(capacities[0], 3);
  std::int64_t k = 0;
  DevicePrefetcher p(
      spmd::test::cuda_device(0),
      [&]() -> std::optional<HostBatch> {
        if (k++ == bad) return bad_batch;
        HostBatch batch{{}, k - 1, nullptr};
        for (const std::size_t capacity : capacities)
          batch.arrays.push_back(HostBytes{bytes.data(), std::min(bytes.size(), capacity)});
        return batch;
      },
      2, capacities);
  for (std::int64_t taken = 0; taken < bad; ++taken) {
    const auto batch = p.next();
    if (!batch || batch->index() != taken) return "batch " + std::to_string(taken) + " missing before the error";
  }
  try {
    p.next();
  } catch (const spmd::Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(CudaPrefetch, BatchesThatDoNotFitTheSlotsAreErrorsNamingTheBatch) {
  SKIP_WITHOUT_GPU();
  std::vector<std::uint8_t> big(65, 0);
  const std::string too_big = error_for_bad_batch(3, HostBatch{{{big.data(), 64}, {big.data(), 9}}, 42, nullptr}, {64, 8});
  EXPECT_TRUE(contains(too_big, "batch 3 (tag 42), array 1: 9 bytes do not fit the slot's 8 bytes")) << too_big;
  const std::string wrong_count = error_for_bad_batch(0, HostBatch{{{big.data(), 1}}, 0, nullptr}, {64, 8});
  EXPECT_TRUE(contains(wrong_count, "has 1 arrays; the prefetcher's slots hold 2")) << wrong_count;
  const std::string null_data = error_for_bad_batch(2, HostBatch{{{nullptr, 5}}, 7, nullptr}, {64});
  EXPECT_TRUE(contains(null_data, "array 0: data is null but bytes is 5")) << null_data;
}

TEST(CudaPrefetch, DestructionWaitsForReadersAndStopsTheProducer) {
  SKIP_WITHOUT_GPU();
  SPMD_CHECK_CUDA(cudaSetDevice(0), "test GPU");
  spmd::tensor::Stream reader;
  const std::size_t bytes = 1 << 16;
  spmd::tensor::PinnedBuffer<std::uint8_t> out(bytes, "test: read-back");
  std::atomic<bool> reader_done{false};
  auto log = std::make_shared<ProducerLog>();
  {
    DevicePrefetcher p(spmd::test::cuda_device(0),
                       scripted_producer([&](std::int64_t) { return Sizes{bytes}; },
                                         std::numeric_limits<std::int64_t>::max(), false, log),
                       2, {bytes});
    ASSERT_TRUE(p.next().has_value());
    const auto batch = p.next();
    ASSERT_TRUE(batch.has_value());
    // A reader still queued behind a slow step when the prefetcher goes away.
    batch->wait_on(reader.get());
    SPMD_CHECK_CUDA(cudaLaunchHostFunc(reader.get(), sleep_on_stream, delay_arg(50000)), "test: slow step");
    SPMD_CHECK_CUDA(cudaMemcpyAsync(out.data(), (*batch)[0].data, bytes, cudaMemcpyDeviceToHost, reader.get()),
                    "test: read back");
    SPMD_CHECK_CUDA(cudaLaunchHostFunc(reader.get(), set_flag_on_stream, &reader_done), "test: reader done");
  }
  EXPECT_TRUE(reader_done.load()) << "the destructor freed a slot that a reader stream was still going to read";
  EXPECT_LE(log->calls.load(), 2 + 2) << "the producer ran past its bound";
  reader.synchronize("test: read-back");
  for (std::size_t j = 0; j < bytes; ++j) ASSERT_EQ(out.data()[j], pattern(1, 0, j)) << "byte " << j;

  // Destroyed while a slow producer call is in progress: the call finishes, then the thread
  // ends.
  std::atomic<bool> call_finished{false};
  {
    std::vector<std::uint8_t> one(1, 9);
    DevicePrefetcher slow(
        spmd::test::cuda_device(0),
        [&]() -> std::optional<HostBatch> {
          std::this_thread::sleep_for(30ms);
          call_finished = true;
          return HostBatch{{HostBytes{one.data(), 1}}, 0, nullptr};
        },
        1, {1});
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_TRUE(call_finished.load());
  // Destroyed right after construction, nothing taken.
  {
    const auto empty_batches = [] { return std::optional<HostBatch>(HostBatch{{HostBytes{}}, 0, nullptr}); };
    DevicePrefetcher idle(spmd::test::cuda_device(0), empty_batches, 3, {0});
  }
}

TEST(CudaPrefetch, LivesOnItsGpuAndMakesItCurrent) {
  SKIP_WITHOUT_GPU();
  const int visible = spmd::tensor::visible_gpu_count();
  std::vector<int> ordinals{0};
  if (visible > 1) ordinals.push_back(visible - 1);
  for (const int ordinal : ordinals) {
    SCOPED_TRACE("prefetcher on GPU " + std::to_string(ordinal) + " of " + std::to_string(visible));
    const int other = visible - 1 - ordinal;  // another GPU when there is one
    SPMD_CHECK_CUDA(cudaSetDevice(ordinal), "test GPU");
    spmd::tensor::Stream reader;  // on the prefetcher's GPU, as wait_on requires
    SPMD_CHECK_CUDA(cudaSetDevice(other), "test GPU");
    std::atomic<int> producer_gpu{-2};
    std::vector<std::uint8_t> bytes(300);
    for (std::size_t j = 0; j < bytes.size(); ++j) bytes[j] = pattern(0, 0, j);
    int k = 0;
    DevicePrefetcher p(
        spmd::test::cuda_device(ordinal),
        [&]() -> std::optional<HostBatch> {
          int d = -1;
          if (cudaGetDevice(&d) == cudaSuccess) producer_gpu = d;
          if (k == 3) return std::nullopt;
          return HostBatch{{HostBytes{bytes.data(), bytes.size()}}, k++, nullptr};
        },
        2, {bytes.size()});
    EXPECT_EQ(current_gpu(), ordinal) << "the constructor did not make the prefetcher's GPU current";
    EXPECT_EQ(p.device().ordinal, ordinal);
    SPMD_CHECK_CUDA(cudaSetDevice(other), "test GPU");
    const auto first = p.next();
    ASSERT_TRUE(first.has_value());
    EXPECT_EQ(current_gpu(), ordinal) << "next() did not make the prefetcher's GPU current";
    EXPECT_EQ(producer_gpu.load(), ordinal) << "the producer does not run with the prefetcher's GPU current";
    cudaPointerAttributes attributes{};
    SPMD_CHECK_CUDA(cudaPointerGetAttributes(&attributes, (*first)[0].data), "test: where the batch lives");
    EXPECT_EQ(attributes.type, cudaMemoryTypeDevice);
    EXPECT_EQ(attributes.device, ordinal);
    if (other != ordinal) {
      SPMD_CHECK_CUDA(cudaSetDevice(other), "test GPU");
      spmd::tensor::Stream foreign;
      try {
        first->wait_on(foreign.get());
        FAIL() << "wait_on accepted a stream of another GPU";
      } catch (const spmd::Error& e) {
        EXPECT_TRUE(contains(e.what(), "wait_on with a stream of GPU " + std::to_string(other))) << e.what();
      }
    }
    first->wait_on(reader.get());
    std::vector<std::uint8_t> back(bytes.size());
    SPMD_CHECK_CUDA(cudaMemcpyAsync(back.data(), (*first)[0].data, back.size(), cudaMemcpyDeviceToHost, reader.get()),
                    "test: read back");
    reader.synchronize("test: read back");
    EXPECT_EQ(back, bytes);

    // Moving the prefetcher keeps the batch it handed out and the stream of batches.
    DevicePrefetcher moved = std::move(p);
    first->synchronize();
    EXPECT_THROW(p.next(), spmd::Error);
    const auto second = moved.next();
    ASSERT_TRUE(second.has_value());
    EXPECT_EQ(second->tag(), 1);
    // The first batch was released by that call: using it is refused, not undefined.
    try {
      first->wait_on(reader.get());
      FAIL() << "wait_on on a released batch was accepted";
    } catch (const spmd::Error& e) {
      EXPECT_TRUE(contains(e.what(), "already released")) << e.what();
    }
  }
}

// Runs with or without a GPU (the point is the machine without one).
TEST(CudaPrefetch, RefusesADeviceThatIsNotAUsableGpuWithAClearError) {
  std::atomic<int> calls{0};
  const auto producer = [&]() -> std::optional<HostBatch> {
    ++calls;
    return std::nullopt;
  };
  std::string why_none;
  const int visible = spmd::tensor::visible_gpu_count(&why_none);
  // No GPU at all, or an ordinal one past the last visible GPU.
  DeviceInfo device = spmd::test::cuda_device(visible);
  device.global_index = 5;
  try {
    DevicePrefetcher p(device, producer, 2, {1024, 16});
    FAIL() << "a prefetcher was made for CUDA ordinal " << visible << " with " << visible << " GPU(s) visible";
  } catch (const spmd::Error& e) {
    const std::string m = e.what();
    EXPECT_TRUE(contains(m, "CUDA prefetcher on device 5 ('gpu " + std::to_string(visible) + "')")) << m;
    if (visible == 0) {
      EXPECT_TRUE(contains(m, "needs a GPU, but none is usable: " + why_none)) << m;
      EXPECT_TRUE(contains(m, "--backend cpu")) << m;
    } else {
      EXPECT_TRUE(contains(m, "is not one of the " + std::to_string(visible) + " visible GPU(s)")) << m;
    }
  }
  DeviceInfo cpu;
  cpu.name = "cpu:0";
  try {
    DevicePrefetcher p(cpu, producer, 2, {1024});
    FAIL() << "a prefetcher was made for a CPU device";
  } catch (const spmd::Error& e) {
    EXPECT_TRUE(contains(e.what(), "the device's backend is cpu, not cuda")) << e.what();
  }
  EXPECT_EQ(calls.load(), 0) << "the producer was called although construction failed";
}

// Options are checked before the device: these fail the same with or without a GPU.
TEST(CudaPrefetch, RejectsBadOptionsBeforeTouchingTheDevice) {
  const auto producer = []() -> std::optional<HostBatch> { return std::nullopt; };
  DeviceInfo cpu;  // never a usable GPU: an option error must come first
  const auto message = [&](std::size_t depth, DevicePrefetcher::Producer fn, std::vector<std::size_t> capacities) {
    try {
      DevicePrefetcher p(cpu, std::move(fn), depth, std::move(capacities));
    } catch (const spmd::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_TRUE(contains(message(0, producer, {8}), "size (prefetch depth) must be >= 1, got 0"));
  EXPECT_TRUE(contains(message(2, DevicePrefetcher::Producer{}, {8}), "the producer function is empty"));
  EXPECT_TRUE(contains(message(2, producer, {}), "array_capacities is empty"));
  const std::size_t huge = std::numeric_limits<std::size_t>::max() - 100;
  EXPECT_TRUE(contains(message(2, producer, {8, huge}), "add up to more bytes than a size_t holds (array 1"))
      << message(2, producer, {8, huge});
  EXPECT_TRUE(contains(message(2, producer, {huge, 8}), "add up to more bytes than a size_t holds"))
      << message(2, producer, {huge, 8});
}

}  // namespace

