#include "spmd/models/partial_sum_tree.hpp"

#include <algorithm>
#include <bit>
#include <string>

#include "spmd/runtime/error.hpp"

namespace spmd::models {

PartialSumTree::PartialSumTree(std::int64_t global_chunks, std::size_t record)
    : chunks_(global_chunks), record_(record) {
  if (global_chunks < 1) throw Error("PartialSumTree: needs at least one chunk (got " + std::to_string(global_chunks) + ")");
  const int depth = std::bit_width(static_cast<std::uint64_t>(global_chunks - 1));
  // A canonical range has at most two nodes per level, plus the slot of a leaf in flight.
  const std::size_t capacity = 2 * static_cast<std::size_t>(depth) + 3;
  nodes_.reserve(capacity);
  slots_.resize(capacity * record_);
}

void PartialSumTree::reset(std::int64_t first_chunk) {
  if (first_chunk < 0 || first_chunk > chunks_)
    throw Error("PartialSumTree: first chunk " + std::to_string(first_chunk) + " outside [0, " +
                std::to_string(chunks_) + "]");
  nodes_.clear();
  next_ = first_chunk;
}

void PartialSumTree::ensure_slot(std::size_t position) {
  if ((position + 1) * record_ > slots_.size()) slots_.resize((position + 1) * record_);
}

double* PartialSumTree::leaf_slot() {
  ensure_slot(nodes_.size());
  return slot(nodes_.size());
}

bool PartialSumTree::is_root(const TreeNode& node) const {
  return node.index == 0 && (std::int64_t{1} << node.level) >= chunks_;
}

void PartialSumTree::commit_leaf() {
  if (next_ >= chunks_)
    throw Error("PartialSumTree: chunk " + std::to_string(next_) + " pushed, but there are only " +
                std::to_string(chunks_));
  nodes_.push_back({0, next_});
  ++next_;
  reduce_top();
}

void PartialSumTree::push_leaf(const double* record) { push_node({0, next_}, record); }

void PartialSumTree::push_node(TreeNode node, const double* record) {
  if (node.level < 0 || node.index < 0 || node.first_chunk() != next_ || node.first_chunk() >= chunks_)
    throw Error("PartialSumTree: node (level " + std::to_string(node.level) + ", index " +
                std::to_string(node.index) + ") does not start at the next chunk, " + std::to_string(next_));
  next_ = std::min(chunks_, node.end_chunk());
  // A right child whose left sibling is on top is added straight into it: the same
  // left + right as copying it first.
  if (node.index % 2 == 1 && !nodes_.empty() && nodes_.back() == TreeNode{node.level, node.index - 1}) {
    double* left = slot(nodes_.size() - 1);
    for (std::size_t i = 0; i < record_; ++i) left[i] += record[i];
    nodes_.back() = {node.level + 1, node.index / 2};
  } else {
    ensure_slot(nodes_.size());
    std::copy(record, record + record_, slot(nodes_.size()));
    nodes_.push_back(node);
  }
  reduce_top();
}

void PartialSumTree::reduce_top() {
  while (!nodes_.empty()) {
    const TreeNode top = nodes_.back();
    if (is_root(top)) return;
    if (top.index % 2 == 0) {
      // The right sibling lies wholly past the last chunk: the parent is this node as it is.
      if (((top.index + 1) << top.level) >= chunks_) {
        nodes_.back() = {top.level + 1, top.index / 2};
        continue;
      }
      return;  // waits for its right sibling
    }
    const std::size_t n = nodes_.size();
    if (n < 2 || nodes_[n - 2] != TreeNode{top.level, top.index - 1}) return;  // left sibling held elsewhere
    double* left = slot(n - 2);
    const double* right = slot(n - 1);
    for (std::size_t i = 0; i < record_; ++i) left[i] += right[i];
    nodes_.pop_back();
    nodes_.back() = {top.level + 1, top.index / 2};
  }
}

const double* PartialSumTree::root() const {
  return nodes_.size() == 1 && is_root(nodes_.front()) ? slots_.data() : nullptr;
}

std::vector<TreeNode> PartialSumTree::canonical_nodes(std::int64_t first, std::int64_t end, std::int64_t global_chunks) {
  if (first < 0 || end < first || end > global_chunks)
    throw Error("PartialSumTree: chunk range [" + std::to_string(first) + ", " + std::to_string(end) +
                ") outside [0, " + std::to_string(global_chunks) + ")");
  PartialSumTree ids(global_chunks, 0);
  ids.reset(first);
  for (std::int64_t c = first; c < end; ++c) ids.commit_leaf();
  return {ids.nodes_.begin(), ids.nodes_.end()};
}

InPlaceTreePlan in_place_tree_plan(std::int64_t first, std::int64_t end, std::int64_t global_chunks) {
  InPlaceTreePlan plan;
  plan.nodes = PartialSumTree::canonical_nodes(first, end, global_chunks);
  for (const TreeNode& node : plan.nodes) {
    const std::int64_t base = node.first_chunk(), stop = std::min(node.end_chunk(), global_chunks);
    // Bottom up: at each level a present right child is added into its left sibling; an absent
    // one (wholly past the last chunk) leaves the parent equal to the left child.
    for (int h = 1; h <= node.level; ++h) {
      const std::int64_t step = std::int64_t{1} << h, half = step / 2;
      for (std::int64_t left = base; left < stop; left += step)
        if (left + half < stop) {
          plan.adds.push_back(left - first);
          plan.adds.push_back(left + half - first);
        }
    }
    plan.node_slots.push_back(base - first);
  }
  return plan;
}

void run_in_place_tree_plan(const InPlaceTreePlan& plan, double* records, std::size_t record, double* nodes_out) {
  for (std::size_t a = 0; a + 1 < plan.adds.size(); a += 2) {
    double* dst = records + static_cast<std::size_t>(plan.adds[a]) * record;
    const double* src = records + static_cast<std::size_t>(plan.adds[a + 1]) * record;
    for (std::size_t i = 0; i < record; ++i) dst[i] += src[i];
  }
  for (std::size_t k = 0; k < plan.node_slots.size(); ++k) {
    const double* node = records + static_cast<std::size_t>(plan.node_slots[k]) * record;
    std::copy(node, node + record, nodes_out + k * record);
  }
}

}  // namespace spmd::models
