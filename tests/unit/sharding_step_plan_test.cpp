// The step plan of every mode over simulated ranks (split_for_process), for
// N = k*P*d*B and k*P*d*B +- 1, with each step's rows padded and sharded by pad_shard_unpad
// as the evaluation loop does: which rows each step holds, masks, zero padding, step counts,
// and that only padded steps copy.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "spmd/runtime/error.hpp"
#include "spmd/sharding/pad_shard_unpad.hpp"
#include "spmd/sharding/step_plan.hpp"
#include "spmd/sharding/split.hpp"

namespace {

using namespace spmd::sharding;

// One simulated rank's shard: column 0 int32 [n, 2] = (id+1, -(id+1)), column 1 float32 [n]
// = id+1, where id is the global row index. Real rows are never zero, padding always is.
struct Shard {
  RowRange range;
  HostArray ids;
  HostArray values;
  Shard(std::int64_t n, int rank, int ranks) : range(split_for_process(n, rank, ranks)) {
    ids = HostArray(DType::Int32, {range.size, 2});
    values = HostArray(DType::Float32, {range.size});
    for (std::int64_t i = 0; i < range.size; ++i) {
      const auto id = static_cast<std::int32_t>(range.first + i + 1);
      ids.data<std::int32_t>()[static_cast<std::size_t>(2 * i)] = id;
      ids.data<std::int32_t>()[static_cast<std::size_t>(2 * i + 1)] = -id;
      values.data<float>()[static_cast<std::size_t>(i)] = static_cast<float>(id);
    }
  }
};

// What the evaluation loop does with a plan: each step's real rows of the shard, padded and
// sharded by pad_shard_unpad with the plan's min device batch, with a mask of ones.
class Stepper {
 public:
  struct Step {
    StepLayout layout;
    const Shards* shards;
    std::int64_t rows() const { return layout.rows; }
    std::int64_t real_rows() const { return layout.real_rows; }
    bool padded() const { return layout.real_rows < layout.rows; }
  };
  Stepper(const Shard& shard, StepPlan plan)
      : shard_(shard), plan_(std::move(plan)), wrapper_(plan_.geometry().devices),
        ones_(static_cast<std::size_t>(plan_.geometry().step_rows()), 1) {}
  std::optional<Step> next() {
    if (plan_.steps() && next_ >= *plan_.steps()) return std::nullopt;
    StepLayout layout = plan_.layout(next_++);
    const auto rows = [&](const HostArray& c) { return ConstHostView(c).slice_rows(layout.shard_first, layout.real_rows); };
    const ConstHostView mask(DType::UInt8, {layout.real_rows}, reinterpret_cast<const std::byte*>(ones_.data()));
    const Shards& sh = wrapper_.shard({rows(shard_.ids), rows(shard_.values), mask}, plan_.min_device_batch());
    return Step{std::move(layout), &sh};
  }
  const StepPlan& plan() const { return plan_; }

 private:
  const Shard& shard_;
  StepPlan plan_;
  PadShardUnpad wrapper_;
  std::vector<std::uint8_t> ones_;
  std::int64_t next_ = 0;
};

struct Layout {
  int ranks;
  int devices;
  std::int64_t device_batch;
  std::int64_t n;
  std::string name() const {
    return "P=" + std::to_string(ranks) + " d=" + std::to_string(devices) + " B=" + std::to_string(device_batch) +
           " N=" + std::to_string(n);
  }
  BatchGeometry geometry() const { return {devices, device_batch}; }
};

std::vector<Layout> layouts() {
  std::vector<Layout> out;
  for (const int P : {1, 2, 3, 4})
    for (const int d : {1, 2, 3})
      for (const std::int64_t B : {1, 2, 5})
        for (const std::int64_t k : {0, 1, 2, 3}) {
          const std::int64_t base = k * P * d * B;
          for (const std::int64_t n : {base - 1, base, base + 1})
            if (n >= 0) out.push_back({P, d, B, n});
        }
  return out;
}

// Checks the structure of one step, records the global ids of its real rows in
// visits[id] and returns how many it saw. Real rows come first; padding is zero, mask 0.
std::int64_t check_batch(const Stepper::Step& b, const Shard& shard, const BatchGeometry& g, std::vector<int>& visits) {
  const std::int64_t rows = b.rows(), bdev = b.layout.device_batch;
  const Shards& sh = *b.shards;
  EXPECT_EQ(sh.size(), 3u);
  EXPECT_EQ(rows, g.devices * bdev);
  EXPECT_EQ(sh.device_batch(), bdev);
  EXPECT_EQ(sh.batch(), b.real_rows());
  EXPECT_EQ(sh[0].shape(), (Shape{g.devices, bdev, 2}));
  EXPECT_EQ(sh[1].shape(), (Shape{g.devices, bdev}));
  EXPECT_EQ(sh[2].shape(), (Shape{g.devices, bdev}));
  const auto ids = sh[0].data<std::int32_t>();
  const auto values = sh[1].data<float>();
  const auto mask = sh[2].data<std::uint8_t>();
  std::int64_t real = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto i = static_cast<std::size_t>(r);
    const bool is_real = r < b.real_rows();
    EXPECT_EQ(mask[i], is_real ? 1 : 0) << "row " << r;
    if (is_real) {
      const std::int32_t id = ids[2 * i];
      EXPECT_EQ(id, shard.range.first + b.layout.shard_first + r + 1) << "row " << r << " is not the shard's next row";
      EXPECT_EQ(ids[2 * i + 1], -id);
      EXPECT_EQ(values[i], static_cast<float>(id));
      if (id >= 1 && id <= static_cast<std::int32_t>(visits.size())) ++visits[static_cast<std::size_t>(id - 1)];
      ++real;
    } else {
      EXPECT_EQ(ids[2 * i], 0) << "padding row " << r << " is not zero";
      EXPECT_EQ(ids[2 * i + 1], 0);
      EXPECT_EQ(values[i], 0.0f);
    }
  }
  // Full steps are views into the shard; only padded steps come from the padding buffer.
  if (!b.padded() && rows > 0)
    EXPECT_EQ(sh[0].bytes(), ConstHostView(shard.ids).slice_rows(b.layout.shard_first, rows).bytes());
  // Devices: b_dev rows each, device-major, real rows first.
  EXPECT_EQ(static_cast<int>(b.layout.devices.size()), g.devices);
  std::int64_t device_real = 0, offset = 0;
  for (int j = 0; j < g.devices; ++j) {
    const DeviceRows& dev = b.layout.devices[static_cast<std::size_t>(j)];
    EXPECT_EQ(dev.first, offset) << "device " << j;
    EXPECT_EQ(dev.rows, bdev) << "device " << j;
    EXPECT_EQ(dev.real_rows, std::clamp(b.real_rows() - j * bdev, std::int64_t{0}, bdev));
    EXPECT_EQ(dev.real_rows, sh.real_rows(j));
    EXPECT_EQ(sh[0].at(j).bytes(), sh[0].bytes() + offset * 2 * static_cast<std::int64_t>(sizeof(std::int32_t)));
    offset += dev.rows;
    device_real += dev.real_rows;
  }
  EXPECT_EQ(offset, rows);
  EXPECT_EQ(device_real, b.real_rows());
  EXPECT_EQ(real, b.real_rows());
  return real;
}

TEST(ShardingBatching, PadModeRunsTheGlobalStepCountOnEveryRankAndVisitsEachRowOnce) {
  for (const Layout& L : layouts()) {
    SCOPED_TRACE(L.name());
    const BatchGeometry g = L.geometry();
    const std::int64_t steps = pad_step_count(L.n, L.ranks, g);
    // Independent of the library: the largest shard needs ceil(ceil(N/P) / dB) steps.
    const std::int64_t largest = (L.n + L.ranks - 1) / L.ranks;
    EXPECT_EQ(steps, (largest + g.step_rows() - 1) / g.step_rows());
    std::vector<int> visits(static_cast<std::size_t>(L.n), 0);
    for (int p = 0; p < L.ranks; ++p) {
      const Shard shard(L.n, p, L.ranks);
      EXPECT_LE(local_step_count(BatchMode::PadWithMask, shard.range.size, g), steps);
      Stepper batcher(shard, StepPlan(BatchMode::PadWithMask, shard.range.size, g, steps));
      EXPECT_EQ(batcher.plan().steps(), steps);
      std::int64_t ran = 0;
      while (const auto b = batcher.next()) {
        EXPECT_EQ(b->rows(), g.step_rows()) << "pad mode has one shape";
        check_batch(*b, shard, g, visits);
        ++ran;
      }
      EXPECT_EQ(ran, steps) << "rank " << p;
      EXPECT_EQ(batcher.next(), std::nullopt);
    }
    for (std::size_t id = 0; id < visits.size(); ++id) EXPECT_EQ(visits[id], 1) << "row " << id;
  }
}

TEST(ShardingBatching, InfinitePaddingStopsWhenTheGlobalCountIsZero) {
  for (const Layout& L : layouts()) {
    SCOPED_TRACE(L.name());
    const BatchGeometry g = L.geometry();
    std::vector<Shard> shards;
    std::vector<Stepper> batchers;
    shards.reserve(static_cast<std::size_t>(L.ranks));  // the steppers refer to them
    for (int p = 0; p < L.ranks; ++p) shards.emplace_back(L.n, p, L.ranks);
    for (const auto& s : shards) batchers.emplace_back(s, StepPlan(BatchMode::InfinitePad, s.range.size, g));
    std::vector<int> visits(static_cast<std::size_t>(L.n), 0);
    std::int64_t steps = 0, counted = 0;
    // The ranks in lock step; the sum over ranks stands for count_real_rows' allreduce.
    for (;;) {
      std::int64_t global = 0;
      for (int p = 0; p < L.ranks; ++p) {
        const auto b = batchers[static_cast<std::size_t>(p)].next();
        ASSERT_NE(b, std::nullopt) << "infinite padding ended on its own";
        EXPECT_EQ(b->rows(), g.step_rows());
        global += check_batch(*b, shards[static_cast<std::size_t>(p)], g, visits);
      }
      if (global == 0) break;
      counted += global;
      ++steps;
      ASSERT_LE(steps, L.n + 1) << "no termination";
    }
    EXPECT_EQ(counted, L.n);
    EXPECT_EQ(steps, pad_step_count(L.n, L.ranks, g));
    for (std::size_t id = 0; id < visits.size(); ++id) EXPECT_EQ(visits[id], 1) << "row " << id;
    // Past the end: still all zero, mask 0 (the tail's rows were cleared from the buffer).
    for (int extra = 0; extra < 2; ++extra) {
      const auto b = batchers[0].next();
      EXPECT_EQ(check_batch(*b, shards[0], g, visits), 0);
    }
    EXPECT_EQ(batchers[0].plan().steps(), std::nullopt);
  }
}

TEST(ShardingBatching, DropRemainderDropsExactlyTheRemainder) {
  for (const Layout& L : layouts()) {
    SCOPED_TRACE(L.name());
    const BatchGeometry g = L.geometry();
    std::vector<int> visits(static_cast<std::size_t>(L.n), 0);
    for (int p = 0; p < L.ranks; ++p) {
      const Shard shard(L.n, p, L.ranks);
      Stepper batcher(shard, StepPlan(BatchMode::DropRemainder, shard.range.size, g));
      std::int64_t steps = 0;
      while (const auto b = batcher.next()) {
        EXPECT_EQ(b->rows(), g.step_rows());
        EXPECT_FALSE(b->padded());
        check_batch(*b, shard, g, visits);
        ++steps;
      }
      const std::int64_t kept = shard.range.size / g.step_rows() * g.step_rows();
      EXPECT_EQ(steps, shard.range.size / g.step_rows());
      // Exactly the shard's first `kept` rows were seen, the rest never.
      for (std::int64_t i = 0; i < shard.range.size; ++i)
        EXPECT_EQ(visits[static_cast<std::size_t>(shard.range.first + i)], i < kept ? 1 : 0) << "rank " << p << " row " << i;
    }
  }
}

TEST(ShardingBatching, KeepRemainderEndsWithTheSmallerBatch) {
  for (const Layout& L : layouts()) {
    SCOPED_TRACE(L.name());
    const BatchGeometry g = L.geometry();
    std::vector<int> visits(static_cast<std::size_t>(L.n), 0);
    for (int p = 0; p < L.ranks; ++p) {
      const Shard shard(L.n, p, L.ranks);
      Stepper batcher(shard, StepPlan(BatchMode::KeepRemainder, shard.range.size, g));
      std::vector<std::int64_t> sizes;
      while (const auto b = batcher.next()) {
        // The last step's shape is the smallest that shards its rows: on one device
        // exactly its rows (no padding), on d devices ceil(r / d) each.
        EXPECT_EQ(b->layout.device_batch, (b->real_rows() + g.devices - 1) / g.devices);
        if (g.devices == 1) EXPECT_FALSE(b->padded());
        check_batch(*b, shard, g, visits);
        sizes.push_back(b->real_rows());
      }
      const std::int64_t n = shard.range.size, full = n / g.step_rows(), rest = n % g.step_rows();
      std::vector<std::int64_t> expected(static_cast<std::size_t>(full), g.step_rows());
      if (rest) expected.push_back(rest);
      EXPECT_EQ(sizes, expected) << "rank " << p;
    }
    for (std::size_t id = 0; id < visits.size(); ++id) EXPECT_EQ(visits[id], 1) << "row " << id;
  }
}

TEST(ShardingBatching, ReferenceExampleOfUnevenHosts) {
  // The reference's case: n=4097 over 8 hosts gives the first host 513 rows and the others
  // 512; with per-host steps of d*b = 512 rows (the evaluation guide says d=8, b=128 but counts 512 per
  // host step, so d=8, b=64 here) the first host needs 2 steps, the others 1.
  const BatchGeometry g{8, 64};
  EXPECT_EQ(local_step_count(BatchMode::PadWithMask, split_for_process(4097, 0, 8).size, g), 2);
  EXPECT_EQ(local_step_count(BatchMode::PadWithMask, split_for_process(4097, 1, 8).size, g), 1);
  EXPECT_EQ(local_step_count(BatchMode::DropRemainder, split_for_process(4097, 0, 8).size, g), 1);
  EXPECT_EQ(pad_step_count(4097, 8, g), 2);
  // The evaluation guide's single-device numbers: 10000 rows by 512 -> 19 full + 272, or 9728 kept.
  const BatchGeometry one{1, 512};
  EXPECT_EQ(local_step_count(BatchMode::KeepRemainder, 10000, one), 20);
  EXPECT_EQ(StepPlan(BatchMode::KeepRemainder, 10000, one).layout(19).rows, 272);
  EXPECT_EQ(local_step_count(BatchMode::DropRemainder, 10000, one) * 512, 9728);
}

TEST(ShardingBatching, OptionsAreValidated) {
  EXPECT_THROW(StepPlan(BatchMode::PadWithMask, -1, {2, 2}), spmd::Error);
  EXPECT_THROW(StepPlan(BatchMode::PadWithMask, 10, {0, 4}), spmd::Error);
  EXPECT_THROW(StepPlan(BatchMode::PadWithMask, 10, {2, 0}), spmd::Error);
  // 10 rows at 4 per step need 3 steps; asking for 2 would drop data.
  EXPECT_THROW(StepPlan(BatchMode::PadWithMask, 10, {2, 2}, 2), spmd::Error);
  EXPECT_NO_THROW(StepPlan(BatchMode::PadWithMask, 10, {2, 2}, 3));
  EXPECT_THROW(StepPlan(BatchMode::InfinitePad, 10, {2, 2}, 5), spmd::Error);
  EXPECT_THROW(StepPlan(BatchMode::KeepRemainder, 10, {2, 2}, 3), spmd::Error);
  EXPECT_THROW(StepPlan(BatchMode::DropRemainder, 10, {2, 2}, 3), spmd::Error);  // only 2 full steps
  EXPECT_THROW(StepPlan(BatchMode::DropRemainder, 10, {2, 2}, std::nullopt, 1), spmd::Error);  // min batch: pad only
  EXPECT_THROW(StepPlan(BatchMode::DropRemainder, 10, {2, 2}).layout(2), spmd::Error);
  EXPECT_NO_THROW(StepPlan(BatchMode::InfinitePad, 10, {2, 2}).layout(100));
  for (const auto mode : {BatchMode::DropRemainder, BatchMode::KeepRemainder, BatchMode::PadWithMask, BatchMode::InfinitePad})
    EXPECT_EQ(parse_batch_mode(to_string(mode)), mode);
  try {
    parse_batch_mode("pad-infinite");
    FAIL();
  } catch (const spmd::Error& e) {
    EXPECT_NE(std::string(e.what()).find("infinite-pad"), std::string::npos);
  }
}

TEST(ShardingBatching, EmptyShardRunsTheGlobalSteps) {
  // A rank with no rows (N < P) still yields the global number of all-padding steps.
  const Shard shard(0, 0, 1);
  Stepper batcher(shard, StepPlan(BatchMode::PadWithMask, 0, {3, 2}, 4));
  int steps = 0;
  while (const auto b = batcher.next()) {
    EXPECT_EQ(b->real_rows(), 0);
    EXPECT_EQ(b->rows(), 6);
    const auto mask = (*b->shards)[2].data<std::uint8_t>();
    EXPECT_EQ(mask.size(), 6u);
    EXPECT_TRUE(std::all_of(mask.begin(), mask.end(), [](std::uint8_t m) { return m == 0; }));
    ++steps;
  }
  EXPECT_EQ(steps, 4);
}

}  // namespace
