// The fixed-order tree sum: the same bits for every way of cutting the chunks into
// contiguous holders (ranks, devices), few nodes per holder, and the right total.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "spmd/models/partial_sum_tree.hpp"
#include "spmd/runtime/error.hpp"
#include "spmd/workloads/logreg_objective.hpp"
#include "order_sensitive_records.hpp"

using spmd::models::PartialSumTree;
using spmd::models::TreeNode;

namespace {

constexpr std::size_t kRecord = 3;

std::vector<double> make_leaves(std::int64_t chunks, std::mt19937& rng) {
  return spmd::test::order_sensitive_records(chunks, kRecord, rng);
}

// Holders own [cuts[h], cuts[h+1]); each reduces its leaves; a second tree takes every
// holder's nodes in order. Returns the root.
std::vector<double> reduce_by_holders(const std::vector<double>& leaves, std::int64_t chunks,
                                      const std::vector<std::int64_t>& cuts) {
  PartialSumTree total(chunks, kRecord);
  total.reset(0);
  for (std::size_t h = 0; h + 1 < cuts.size(); ++h) {
    PartialSumTree holder(chunks, kRecord);
    holder.reset(cuts[h]);
    for (std::int64_t c = cuts[h]; c < cuts[h + 1]; ++c) {
      if (c % 2 == 0) {  // both ways of giving a leaf
        std::memcpy(holder.leaf_slot(), &leaves[static_cast<std::size_t>(c) * kRecord], kRecord * sizeof(double));
        holder.commit_leaf();
      } else {
        holder.push_leaf(&leaves[static_cast<std::size_t>(c) * kRecord]);
      }
    }
    const auto expected = PartialSumTree::canonical_nodes(cuts[h], cuts[h + 1], chunks);
    EXPECT_EQ(std::vector<TreeNode>(holder.nodes().begin(), holder.nodes().end()), expected);
    EXPECT_LE(holder.nodes().size(), 2 * static_cast<std::size_t>(std::ceil(std::log2(chunks + 1.0))) + 1);
    for (std::size_t i = 0; i < holder.nodes().size(); ++i) total.push_node(holder.nodes()[i], holder.data() + i * kRecord);
  }
  EXPECT_NE(total.root(), nullptr);
  if (total.root() == nullptr) return {};
  return {total.root(), total.root() + kRecord};
}

TEST(PartialSumTree, SameBitsForEveryCutIntoHolders) {
  std::mt19937 rng(7);
  for (std::int64_t chunks = 1; chunks <= 70; ++chunks) {
    const auto leaves = make_leaves(chunks, rng);
    const auto one = reduce_by_holders(leaves, chunks, {0, chunks});
    for (int trial = 0; trial < 12; ++trial) {
      std::uniform_int_distribution<int> holders_dist(1, 9);
      std::uniform_int_distribution<std::int64_t> cut(0, chunks);
      std::vector<std::int64_t> cuts{0, chunks};
      for (int h = holders_dist(rng); h > 1; --h) cuts.push_back(cut(rng));  // empty holders too
      std::sort(cuts.begin(), cuts.end());
      const auto many = reduce_by_holders(leaves, chunks, cuts);
      ASSERT_EQ(many.size(), kRecord);
      EXPECT_EQ(std::memcmp(many.data(), one.data(), kRecord * sizeof(double)), 0)
          << chunks << " chunks, " << cuts.size() - 1 << " holders";
    }
  }
}

// A device's in-place reduction of its chunks' records (in_place_tree_plan, what the CUDA
// logreg shard runs on the GPU) gives its canonical nodes with the tree's own bits.
TEST(PartialSumTree, InPlacePlanGivesTheNodesOfTheTree) {
  std::mt19937 rng(11);
  for (std::int64_t chunks = 1; chunks <= 70; ++chunks) {
    const auto leaves = make_leaves(chunks, rng);
    for (std::int64_t first = 0; first < chunks; first += 1 + first / 3)
      for (std::int64_t end = first + 1; end <= chunks; end += 1 + (end - first) / 2) {
        PartialSumTree tree(chunks, kRecord);
        tree.reset(first);
        for (std::int64_t c = first; c < end; ++c) tree.push_leaf(&leaves[static_cast<std::size_t>(c) * kRecord]);
        const auto plan = spmd::models::in_place_tree_plan(first, end, chunks);
        ASSERT_EQ(plan.nodes, std::vector<TreeNode>(tree.nodes().begin(), tree.nodes().end()));
        std::vector<double> records(leaves.begin() + first * kRecord, leaves.begin() + end * kRecord);
        std::vector<double> nodes(plan.nodes.size() * kRecord);
        spmd::models::run_in_place_tree_plan(plan, records.data(), kRecord, nodes.data());
        EXPECT_EQ(std::memcmp(nodes.data(), tree.data(), nodes.size() * sizeof(double)), 0)
            << "chunks [" << first << ", " << end << ") of " << chunks;
      }
  }
}

TEST(PartialSumTree, TotalIsTheSumAndMatchesThePairwiseDefinition) {
  // Integers add exactly: the total must be the plain sum.
  for (std::int64_t chunks : {1, 2, 3, 5, 8, 13, 64, 100}) {
    std::vector<double> leaves(static_cast<std::size_t>(chunks) * kRecord);
    double expected[kRecord] = {0, 0, 0};
    for (std::size_t i = 0; i < leaves.size(); ++i) {
      leaves[i] = static_cast<double>((i * 7919) % 1000) - 300.0;
      expected[i % kRecord] += leaves[i];
    }
    const auto root = reduce_by_holders(leaves, chunks, {0, chunks});
    for (std::size_t k = 0; k < kRecord; ++k) EXPECT_EQ(root[k], expected[k]) << chunks;
  }
  // Five chunks: ((c0 + c1) + (c2 + c3)) + c4, exactly this order.
  std::mt19937 rng(3);
  const auto leaves = make_leaves(5, rng);
  const auto root = reduce_by_holders(leaves, 5, {0, 2, 5});
  for (std::size_t k = 0; k < kRecord; ++k) {
    const auto c = [&](int i) { return leaves[static_cast<std::size_t>(i) * kRecord + k]; };
    const double definition = ((c(0) + c(1)) + (c(2) + c(3))) + c(4);
    EXPECT_EQ(std::memcmp(&root[k], &definition, sizeof(double)), 0);
  }
}

TEST(PartialSumTree, CanonicalNodesOfARange) {
  using V = std::vector<TreeNode>;
  // [13, 25) of 25 chunks: 13, [14,16), [16,24), then 24 stands for [24,32) (nothing past 24).
  EXPECT_EQ(PartialSumTree::canonical_nodes(13, 25, 25), (V{{0, 13}, {1, 7}, {4, 1}}));
  EXPECT_EQ(PartialSumTree::canonical_nodes(0, 12, 25), (V{{3, 0}, {2, 2}}));
  EXPECT_EQ(PartialSumTree::canonical_nodes(0, 25, 25), (V{{5, 0}}));
  EXPECT_EQ(PartialSumTree::canonical_nodes(0, 1, 1), (V{{0, 0}}));
  EXPECT_TRUE(PartialSumTree::canonical_nodes(4, 4, 9).empty());
}

TEST(PartialSumTree, RefusesNodesOutOfPlace) {
  PartialSumTree tree(10, kRecord);
  const double record[kRecord] = {1, 2, 3};
  tree.reset(2);
  EXPECT_THROW(tree.push_node({0, 3}, record), spmd::Error);  // a gap
  EXPECT_THROW(tree.push_node({1, 2}, record), spmd::Error);  // starts at 4
  tree.push_node({1, 1}, record);                             // [2, 4)
  EXPECT_EQ(tree.next_chunk(), 4);
  EXPECT_EQ(tree.root(), nullptr);
  EXPECT_THROW(tree.reset(11), spmd::Error);
  EXPECT_THROW(PartialSumTree(0, kRecord), spmd::Error);
  PartialSumTree last(3, kRecord);
  last.reset(3);
  EXPECT_THROW(last.commit_leaf(), spmd::Error);  // past the last chunk
}

TEST(BalancedChunkRange, PartsAreContiguousWholeChunksNearestToEvenShares) {
  using spmd::workloads::balanced_chunk_range;
  for (std::int64_t rows : {0, 1, 5, 511, 512, 513, 2047, 50000, 60000, 100003}) {
    for (std::int64_t chunk : {1, 7, 512, 2048}) {
      const std::int64_t chunks = (rows + chunk - 1) / chunk;
      for (int parts = 1; parts <= 9; ++parts) {
        std::int64_t next = 0;
        for (int p = 0; p < parts; ++p) {
          const auto r = balanced_chunk_range(rows, chunk, p, parts);
          EXPECT_EQ(r.first, next) << rows << " " << chunk << " " << p << "/" << parts;
          EXPECT_GE(r.size, 0);
          next = r.end();
          // The boundary is the chunk boundary nearest to the even share.
          const double share = static_cast<double>(p) * rows / parts / chunk;
          if (r.first < chunks) EXPECT_LE(std::abs(r.first - share), 0.5 + 1e-9) << rows << " " << chunk << " " << p;
        }
        EXPECT_EQ(next, chunks);
      }
    }
  }
  EXPECT_THROW(balanced_chunk_range(10, 0, 0, 1), spmd::Error);
  EXPECT_THROW(balanced_chunk_range(10, 2, 1, 1), spmd::Error);
  EXPECT_THROW(balanced_chunk_range(-1, 2, 0, 1), spmd::Error);
}

}  // namespace
