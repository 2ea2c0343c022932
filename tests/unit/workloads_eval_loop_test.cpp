// The evaluation data path: blocks of rows through prefetch_to_device (row_blocks.hpp) and the
// evaluation loop on top of them (eval_loop.hpp), against a plain loop over the rows,
// with blocks of one step, several steps and all rows, at sizes k*step and k*step +- 1.
#include <gtest/gtest.h>

#include <numeric>

#include "spmd/runtime/context.hpp"
#include "spmd/runtime/error.hpp"
#include "spmd/workloads/eval_loop.hpp"
#include "spmd/workloads/row_blocks.hpp"

using namespace spmd;
using sharding::ConstHostView;
using sharding::DType;
using workloads::BlockReader;
using workloads::RowBlock;
using workloads::RowBlocks;

namespace {

// Row i: features (i, -i), label i % 7.
struct Rows {
  std::vector<float> features;
  std::vector<std::int32_t> labels;
  explicit Rows(std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) {
      features.push_back(static_cast<float>(i));
      features.push_back(-static_cast<float>(i));
      labels.push_back(static_cast<std::int32_t>(i % 7));
    }
  }
  std::int64_t rows() const { return static_cast<std::int64_t>(labels.size()); }
  std::vector<ConstHostView> columns() const {
    return {ConstHostView(DType::Float32, {rows(), 2}, reinterpret_cast<const std::byte*>(features.data())),
            ConstHostView(DType::Int32, {rows()}, reinterpret_cast<const std::byte*>(labels.data()))};
  }
};

}  // namespace

TEST(RowBlocks, InMemoryBlocksViewEveryRowOnceInOrder) {
  const Rows data(10);
  for (const std::int64_t block_rows : {1, 3, 5, 10, 64}) {
    RowBlocks blocks(workloads::in_memory_blocks(data.columns(), block_rows), 2);
    std::int64_t next = 0;
    while (auto b = blocks.next()) {
      EXPECT_EQ(b->first, next);
      EXPECT_EQ(b->rows, std::min<std::int64_t>(block_rows, 10 - next));
      ASSERT_EQ(b->columns.size(), 2u);
      // Views into the rows held in memory, not copies.
      EXPECT_EQ(b->columns[0].data<float>().data(), data.features.data() + 2 * next);
      EXPECT_EQ(b->columns[1].data<std::int32_t>().data(), data.labels.data() + next);
      EXPECT_EQ(b->columns[0].shape(), (sharding::Shape{b->rows, 2}));
      next += b->rows;
    }
    EXPECT_EQ(next, 10) << "block rows " << block_rows;
  }
}

TEST(RowBlocks, NoRowsGiveOneEmptyBlockWithTheColumnsShapes) {
  const Rows data(0);
  RowBlocks blocks(workloads::in_memory_blocks(data.columns(), 4), 2);
  const auto b = blocks.next();
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->rows, 0);
  EXPECT_EQ(b->columns[0].shape(), (sharding::Shape{0, 2}));
  EXPECT_FALSE(blocks.next().has_value());
}

TEST(RowBlocks, BlockRowsAreWholeStepsNearSixteenMiB) {
  EXPECT_EQ(workloads::block_rows_for(512, 784 * 4 + 4) % 512, 0);
  EXPECT_EQ(workloads::block_rows_for(512, 784 * 4 + 4), 10 * 512);  // 10 steps of 1.6 MB
  EXPECT_EQ(workloads::block_rows_for(1 << 20, 1 << 10), 1 << 20);   // a step larger than 16 MiB: one step
  EXPECT_EQ(workloads::block_rows_for(3, 1), 3 * ((16 << 20) / 3));
  EXPECT_THROW(workloads::block_rows_for(0, 4), Error);
  EXPECT_THROW(workloads::in_memory_blocks({}, 4), Error);
}

TEST(RowBlocks, ReaderFollowsStepsAcrossBlocksAndFailsOnStraddlingSteps) {
  const Rows data(10);
  {
    RowBlocks blocks(workloads::in_memory_blocks(data.columns(), 4), 2);
    BlockReader reader(blocks, 2);
    EXPECT_EQ(reader.rows(0, 2)->first, 0);
    EXPECT_EQ(reader.rows(2, 2)->first, 0);
    EXPECT_EQ(reader.rows(4, 2)->first, 4);
    EXPECT_EQ(reader.rows(8, 2)->first, 8);
    // Past the rows: the empty block, placed where the step asked, with the columns' shapes.
    const RowBlock* idle = reader.rows(10, 0);
    EXPECT_EQ(idle->first, 10);
    EXPECT_EQ(idle->rows, 0);
    EXPECT_EQ(idle->columns[0].shape(), (sharding::Shape{0, 2}));
    EXPECT_FALSE(reader.failed());
  }
  {
    RowBlocks blocks(workloads::in_memory_blocks(data.columns(), 4), 2);
    BlockReader reader(blocks, 2);
    EXPECT_EQ(reader.rows(2, 4), nullptr);  // rows 2..5 straddle the blocks [0, 4) and [4, 8)
    EXPECT_NE(reader.error().find("straddle"), std::string::npos) << reader.error();
    EXPECT_EQ(reader.rows(0, 2), nullptr) << "a failed reader hands out no block";
    EXPECT_NE(reader.rows(4, 0), nullptr) << "all-padding steps still get the empty block";
  }
  {
    RowBlocks blocks(workloads::in_memory_blocks(data.columns(), 4), 2);
    BlockReader reader(blocks, 2);
    EXPECT_EQ(reader.rows(8, 4), nullptr);  // rows 8..11: the last block ends at 10
    EXPECT_NE(reader.error().find("straddle the row blocks at row 10"), std::string::npos) << reader.error();
  }
  {
    RowBlocks blocks(workloads::in_memory_blocks(data.columns(), 4), 2);
    BlockReader reader(blocks, 2);
    EXPECT_EQ(reader.rows(12, 2), nullptr);  // past every block
    EXPECT_NE(reader.error().find("ended before rows [12, 14)"), std::string::npos) << reader.error();
  }
}

// A producer that fails (a read error on the prefetch thread) reaches the consumer as a
// failed reader: the blocks made before it first, then no block, the message kept with the
// rank, and an agreement that throws the same CollectiveError (here on one rank).
TEST(RowBlocks, ProducerFailureReachesTheReaderAndTheAgreement) {
  runtime::Context ctx(MPI_COMM_WORLD, {"cpu", 1, 60.0});
  const Rows data(12);
  workloads::BlockSource source = workloads::in_memory_blocks(data.columns(), 4);
  int calls = 0;
  source.producer = [inner = source.producer, &calls]() -> std::optional<RowBlock> {
    if (++calls == 2) throw Error("'f.h5': features dataset 'x': row 5 has a non-finite value (nan) at element 1");
    return inner();
  };
  RowBlocks blocks(std::move(source), 2);
  // agree_at: every kAgreementSteps steps (a block is only 2 steps of 2 rows here)
  BlockReader reader(blocks, 2);
  ASSERT_NE(reader.rows(0, 2), nullptr);
  EXPECT_NO_THROW(reader.agree_at(ctx, workloads::kAgreementSteps));
  EXPECT_NO_THROW(reader.agree(ctx));
  EXPECT_EQ(reader.rows(4, 2), nullptr);
  EXPECT_TRUE(reader.failed());
  EXPECT_EQ(reader.error().rfind("rank 0: 'f.h5'", 0), 0u) << reader.error();
  EXPECT_NO_THROW(reader.agree_at(ctx, workloads::kAgreementSteps + 1)) << "not an agreement step";
  try {
    reader.agree_at(ctx, 2 * workloads::kAgreementSteps);
    ADD_FAILURE() << "expected a CollectiveError";
  } catch (const CollectiveError& e) {
    EXPECT_NE(std::string(e.what()).find("row 5 has a non-finite value"), std::string::npos) << e.what();
  }
  EXPECT_THROW(reader.agree(ctx), CollectiveError);
}

// The padded loop on a failing stream: every step still runs (all padding once the rows
// cannot be read: in-step collectives keep matching), on_output only sees the readable
// steps, and the loop ends with the agreement's CollectiveError.
TEST(EvalLoop, FailedStreamKeepsTheStepsAndEndsWithTheAgreement) {
  runtime::Context ctx(MPI_COMM_WORLD, {"cpu", 1, 60.0});
  const Rows data(1000);
  const std::int64_t step_rows = 4, steps = 400;
  for (const std::int64_t block_steps : {1, 3, 100}) {
    workloads::BlockSource source = workloads::in_memory_blocks(data.columns(), block_steps * step_rows);
    int calls = 0;
    source.producer = [inner = source.producer, &calls]() -> std::optional<RowBlock> {
      if (++calls == 2) throw Error("read failed");
      return inner();
    };
    RowBlocks blocks(std::move(source), 2);
    std::vector<std::int64_t> batches;
    std::int64_t outputs = 0;
    workloads::EvalLoopOptions o;
    o.columns = {{1}};
    workloads::EvalLoop loop(1, o);
    const sharding::StepPlan plan(sharding::BatchMode::PadWithMask, data.rows(), {1, step_rows}, steps);
    EXPECT_THROW(loop.run(ctx, blocks, plan,
                          [&](const workloads::EvalStep& a) {
                            batches.push_back(a.rows());
                            outputs += a.readable;
                          }),
                 CollectiveError);
    // The first block's steps compute; the second block fails to arrive at step block_steps,
    // the steps from there run as padding, and the next agreement (every block, at least
    // kAgreementSteps apart) ends the loop.
    const std::int64_t period = std::max(workloads::kAgreementSteps, block_steps);
    const std::int64_t readable = block_steps, run = period * (block_steps / period + 1);
    ASSERT_EQ(static_cast<std::int64_t>(batches.size()), run) << "blocks of " << block_steps << " steps";
    for (std::int64_t s = 0; s < run; ++s)
      EXPECT_EQ(batches[static_cast<size_t>(s)], s < readable ? step_rows : 0) << s;
    EXPECT_EQ(outputs, readable);
  }
}

// The loop against a plain loop: every step's real rows, shapes and padding.
TEST(EvalLoop, StepsSeeTheirRowsPaddedToOneShapeAcrossBlocks) {
  runtime::Context ctx(MPI_COMM_WORLD, {"cpu", 1, 60.0});
  const int d = 2;
  const std::int64_t step_rows = 4, min_device_batch = 3;
  // Zero padding, and poisoned padding (0xFF: labels -1), which must leave the mask 0.
  for (const std::uint8_t padding : {std::uint8_t{0}, std::uint8_t{0xFF}})
  for (const std::int64_t n : {7, 8, 9, 0}) {
    for (const std::int64_t block_steps : {1, 2, 100}) {
      const Rows data(n);
      const std::int64_t steps = (n + step_rows - 1) / step_rows + 1;  // and one step past the rows
      std::vector<std::int64_t> seen_rows;
      std::int64_t calls = 0, expected_step = 0;
      workloads::EvalLoopOptions o;
      o.columns = {{0, sharding::Batched::Padding::Unread}, {1, sharding::Batched::Padding::Filled, padding}};
      o.with_mask = true;
      workloads::EvalLoop loop(d, o);
      auto step = [&](const workloads::EvalStep& a) {
        ++calls;
        EXPECT_EQ(a.step, expected_step);
        EXPECT_EQ(a.first, std::min(n, expected_step * step_rows));
        EXPECT_EQ(a.rows(), std::min(step_rows, n - a.first));
        ++expected_step;
        const auto& sh = a.shards;
        const auto features = sh[0], labels = sh[1], mask = sh[2];
        EXPECT_EQ(labels.shape(), (sharding::Shape{d, sh.device_batch()}));
        EXPECT_EQ(sh.device_batch(), std::max<std::int64_t>((a.rows() + d - 1) / d, min_device_batch));
        sharding::HostArray out(DType::Int32, {d, sh.device_batch()});
        for (int i = 0; i < d; ++i)
          for (std::int64_t r = 0; r < sh.device_batch(); ++r) {
            const std::int64_t k = i * sh.device_batch() + r;  // row of the padded batch
            const bool real = k < a.rows();
            EXPECT_EQ(r < sh.real_rows(i), real);
            EXPECT_EQ(mask.at(i).data<std::uint8_t>()[static_cast<size_t>(r)], real ? 1 : 0);
            const std::int32_t y = labels.at(i).data<std::int32_t>()[static_cast<size_t>(r)];
            if (!real) {
              EXPECT_EQ(y, padding ? -1 : 0);
              continue;
            }
            // The device's features (in place, real rows only) name the same row.
            const float x = features.at(i).data<float>()[static_cast<size_t>(2 * r)];
            EXPECT_EQ(y, static_cast<std::int64_t>(x) % 7);
            out.data<std::int32_t>()[static_cast<size_t>(k)] = static_cast<std::int32_t>(x);
          }
        loop.unpad(out);
        ASSERT_EQ(out.rows(), a.rows());  // un-padded to the real rows
        for (const auto v : out.data<std::int32_t>()) seen_rows.push_back(v);
      };
      RowBlocks blocks(workloads::in_memory_blocks(data.columns(), block_steps * step_rows), 2);
      const sharding::StepPlan plan(sharding::BatchMode::PadWithMask, n, {d, step_rows / d}, steps, min_device_batch);
      loop.run(ctx, blocks, plan, step);
      EXPECT_EQ(calls, steps);
      std::vector<std::int64_t> all(static_cast<size_t>(n));
      std::iota(all.begin(), all.end(), 0);
      EXPECT_EQ(seen_rows, all) << "n " << n << ", blocks of " << block_steps << " step(s)";
    }
  }
}

// Every strategy's plan in the one loop: the steps each runs, the rows it sees, and the count
// barrier of infinite padding stopping after the last real row.
TEST(EvalLoop, EachPlanRunsItsStepsOverTheRows) {
  runtime::Context ctx(MPI_COMM_WORLD, {"cpu", 1, 60.0});
  using sharding::BatchMode;
  const int d = 2;
  const std::int64_t B = 3, n = 20;  // steps of 6 rows: 3 full, 2 rows left
  const Rows data(n);
  struct Case {
    BatchMode mode;
    std::int64_t steps, rows, last_device_batch;
  };
  for (const Case c : {Case{BatchMode::DropRemainder, 3, 18, B}, Case{BatchMode::KeepRemainder, 4, 20, 1},
                       Case{BatchMode::PadWithMask, 4, 20, B}, Case{BatchMode::InfinitePad, 4, 20, B}}) {
    SCOPED_TRACE(to_string(c.mode));
    workloads::EvalLoopOptions o;
    o.columns = {{1}};
    o.count_window = 3;
    workloads::EvalLoop loop(d, o);
    RowBlocks blocks(workloads::in_memory_blocks(data.columns(), 2 * d * B), 2);
    std::int64_t rows = 0, last_device_batch = 0;
    const std::int64_t run = loop.run(ctx, blocks, sharding::StepPlan(c.mode, n, {d, B}), [&](const workloads::EvalStep& a) {
      EXPECT_EQ(a.first, rows);
      rows += a.rows();
      last_device_batch = a.shards.device_batch();
    });
    EXPECT_EQ(run, c.steps);
    EXPECT_EQ(rows, c.rows);
    EXPECT_EQ(last_device_batch, c.last_device_batch);
  }
}
