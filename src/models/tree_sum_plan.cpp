#include "spmd/models/tree_sum_plan.hpp"

#include <algorithm>
#include <bit>
#include <iterator>
#include <string>

#include "spmd/runtime/error.hpp"

namespace spmd::models {

TreeNode effective_node(TreeNode node, std::int64_t global_chunks) {
  // The right child of (l, j) starts at j 2^l + 2^(l-1).
  while (node.level > 0 && (node.index << node.level) + (std::int64_t{1} << (node.level - 1)) >= global_chunks) {
    --node.level;
    node.index *= 2;
  }
  return node;
}

namespace {

// A message's tag names the sum it is an operand of, by level, and the side. It is unique
// for a (sender, receiver) pair within an evaluation: both form or hold only nodes that
// cover some of their own chunks, so if two different sums of one level (disjoint nodes)
// needed operands from the same sender, both ranks' contiguous ranges would reach from
// the first node into the second and share its last chunk. (The operand's own level would
// not do: an operand that stands for a node whose right part lies past the last chunk is
// named by a lower level than its parent's child.)
int tag_of(const TreeNode& parent, int side) { return 2 * parent.level + side; }

class Planner {
 public:
  Planner(std::int64_t chunks, std::span<const std::int64_t> bounds, int rank)
      : chunks_(chunks), bounds_(bounds), rank_(rank) {}

  TreeSumPlan plan() {
    TreeSumPlan p;
    p.own_nodes = PartialSumTree::canonical_nodes(bounds_[rank_], bounds_[rank_ + 1], chunks_);
    for (auto& n : p.own_nodes) n = effective_node(n, chunks_);
    const int depth = std::bit_width(static_cast<std::uint64_t>(chunks_ - 1));  // the root's level
    const TreeNode root = effective_node({depth, 0}, chunks_);
    const Best best = best_of(root);
    p.total_rank = best.ranks.front();
    p.messages = best.messages;
    place(root, p.total_rank, p);
    // Children before parents on every rank, and a rank waits only for nodes of a lower
    // level than the one it forms: by induction on the level, every wait ends.
    std::stable_sort(p.steps.begin(), p.steps.end(), [](const auto& a, const auto& b) {
      return a.node.level != b.node.level ? a.node.level < b.node.level : a.node.index < b.node.index;
    });
    for (auto& step : p.steps)
      for (auto* operand : {&step.left, &step.right})
        if (operand->from == TreeSumPlan::Operand::From::kOwnStep) operand->index = step_of(p, pending_[operand->index]);
    return p;
  }

 private:
  struct Best {
    std::int64_t messages = 0;
    std::vector<int> ranks;  // ascending
  };

  // The rank holding chunk c: the last rank whose range starts at or before it (empty
  // ranks start where the next one does, so the last one is never empty).
  int holder(std::int64_t c) const {
    const auto it = std::upper_bound(bounds_.begin(), bounds_.end() - 1, c);
    return static_cast<int>(std::distance(bounds_.begin(), it)) - 1;
  }
  // The rank whose range holds every chunk of the node, or -1 if it straddles ranks.
  int inside(const TreeNode& n) const {
    const int h = holder(n.first_chunk());
    return std::min(n.end_chunk(), chunks_) <= bounds_[static_cast<std::size_t>(h) + 1] ? h : -1;
  }
  std::pair<TreeNode, TreeNode> children(const TreeNode& n) const {
    return {effective_node({n.level - 1, 2 * n.index}, chunks_), effective_node({n.level - 1, 2 * n.index + 1}, chunks_)};
  }

  // Recomputed where needed rather than stored: the plan keeps O(log chunks) nodes.
  Best best_of(const TreeNode& n) const {
    if (const int h = inside(n); h >= 0) return {0, {h}};
    const auto [left, right] = children(n);
    const Best a = best_of(left), b = best_of(right);
    Best out{a.messages + b.messages, {}};
    std::set_intersection(a.ranks.begin(), a.ranks.end(), b.ranks.begin(), b.ranks.end(), std::back_inserter(out.ranks));
    if (out.ranks.empty()) {
      ++out.messages;
      std::set_union(a.ranks.begin(), a.ranks.end(), b.ranks.begin(), b.ranks.end(), std::back_inserter(out.ranks));
    }
    return out;
  }

  // n straddles ranks and is formed on rank `at`; records this rank's part of it and below.
  // Only subtrees holding chunks of this rank can involve it (a node is formed, and sent
  // from, only on ranks that hold some of its chunks).
  void place(const TreeNode& n, int at, TreeSumPlan& p) {
    if (inside(n) >= 0) return;
    const auto [left, right] = children(n);
    TreeSumPlan::Step step;
    step.node = n;
    int side = 0;
    for (const TreeNode& child : {left, right}) {
      const Best b = best_of(child);
      const bool stays = std::binary_search(b.ranks.begin(), b.ranks.end(), at);
      const int from = stays ? at : b.ranks.front();
      const int tag = tag_of(n, side);
      TreeSumPlan::Operand& operand = side == 0 ? step.left : step.right;
      const bool own_leaf = inside(child) >= 0;
      if (from == rank_ && at == rank_) {
        operand.from = own_leaf ? TreeSumPlan::Operand::From::kOwnNode : TreeSumPlan::Operand::From::kOwnStep;
        operand.index = own_leaf ? own_index(p, child) : remember(child);
      } else if (at == rank_) {
        operand = {TreeSumPlan::Operand::From::kRank, 0, from, tag};
      } else if (from == rank_) {
        if (own_leaf)
          p.sends.push_back({own_index(p, child), at, tag});
        else
          outgoing_.push_back({child, at, tag});
      }
      if (!own_leaf && holds_chunks_of(child)) place(child, from, p);
      ++side;
    }
    if (at == rank_) {
      for (const auto& o : outgoing_)
        if (o.node == n) step.send_to = o.to, step.tag = o.tag;
      p.steps.push_back(step);
    }
  }

  bool holds_chunks_of(const TreeNode& n) const {
    return bounds_[rank_] < std::min(n.end_chunk(), chunks_) && n.first_chunk() < bounds_[rank_ + 1];
  }
  std::size_t own_index(const TreeSumPlan& p, const TreeNode& n) const {
    const auto it = std::find(p.own_nodes.begin(), p.own_nodes.end(), n);
    if (it == p.own_nodes.end())
      throw Error("tree sum plan: internal error: node (level " + std::to_string(n.level) + ", index " +
                  std::to_string(n.index) + ") is not one of rank " + std::to_string(rank_) + "'s canonical nodes");
    return static_cast<std::size_t>(std::distance(p.own_nodes.begin(), it));
  }
  // A step's operand that is an earlier step of this rank, by node until the steps are sorted.
  std::size_t remember(const TreeNode& n) {
    pending_.push_back(n);
    return pending_.size() - 1;
  }
  std::size_t step_of(const TreeSumPlan& p, const TreeNode& n) const {
    for (std::size_t i = 0; i < p.steps.size(); ++i)
      if (p.steps[i].node == n) return i;
    throw Error("tree sum plan: internal error: rank " + std::to_string(rank_) + " adds a sum it does not form");
  }

  struct Outgoing {
    TreeNode node;
    int to, tag;
  };
  std::int64_t chunks_;
  std::span<const std::int64_t> bounds_;
  int rank_;
  std::vector<TreeNode> pending_;   // nodes named by kOwnStep operands before sorting
  std::vector<Outgoing> outgoing_;  // this rank's sums that go to another rank
};

}  // namespace

TreeSumPlan plan_tree_sum(std::int64_t global_chunks, std::span<const std::int64_t> rank_bounds, int rank) {
  const auto ranks = static_cast<std::int64_t>(rank_bounds.size()) - 1;
  bool ordered = ranks >= 1 && rank_bounds.front() == 0 && rank_bounds.back() == global_chunks;
  for (std::size_t r = 1; ordered && r < rank_bounds.size(); ++r) ordered = rank_bounds[r - 1] <= rank_bounds[r];
  if (global_chunks < 1 || !ordered || rank < 0 || rank >= ranks)
    throw Error("tree sum plan: needs at least one chunk, rank bounds rising from 0 to the chunk count (" +
                std::to_string(global_chunks) + ") and 0 <= rank < ranks (got " + std::to_string(rank_bounds.size()) +
                " bounds, rank " + std::to_string(rank) + ")");
  return Planner(global_chunks, rank_bounds, rank).plan();
}

}  // namespace spmd::models
