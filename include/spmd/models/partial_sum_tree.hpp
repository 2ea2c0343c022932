#pragma once
// A fixed-order sum of per-chunk records (vectors of doubles), the same bits however the
// chunks are spread over ranks and devices, with little data to exchange.
//
// The order is a binary tree over global chunk indices 0 .. n-1: node (level l, index j)
// covers chunks [j 2^l, (j+1) 2^l); its record is left child + right child, element by
// element; a child lying wholly at or past chunk n is absent and the parent is then the
// other child unchanged. The root covers [0, 2^K) with 2^K >= n. Every node's value is
// fixed by this definition, so whoever computes it gets the same bits.
//
// A holder of the contiguous chunk range [a, b) reduces its leaves, in order, to the
// range's canonical nodes: the largest complete nodes inside it (about 2 log2(b - a) of
// them). Pushed in order into one tree, every holder's nodes end at the root; across ranks,
// models/tree_sum_plan.hpp says where each node above them is added instead, so that a
// rank sends and receives only a few records.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace spmd::models {

struct TreeNode {
  int level = 0;
  std::int64_t index = 0;
  std::int64_t first_chunk() const { return index << level; }
  std::int64_t end_chunk() const { return (index + 1) << level; }
  friend bool operator==(const TreeNode&, const TreeNode&) = default;
};

class PartialSumTree {
 public:
  // global_chunks >= 1; record: doubles per chunk (0 only for canonical_nodes).
  PartialSumTree(std::int64_t global_chunks, std::size_t record);

  // Empties the tree; the next chunk pushed must be first_chunk. Keeps the storage.
  void reset(std::int64_t first_chunk);

  // Where to write the record of chunk next_chunk() (no copy), then commit_leaf().
  double* leaf_slot();
  void commit_leaf();
  // The record of chunk next_chunk(), copied (or added straight into its left sibling).
  void push_leaf(const double* record);
  // A node whose first chunk is next_chunk() (for instance one of another rank's
  // canonical nodes). Throws spmd::Error if it does not start there.
  void push_node(TreeNode node, const double* record);

  std::int64_t next_chunk() const { return next_; }
  std::size_t record_size() const { return record_; }
  // The canonical nodes of [first_chunk, next_chunk()), left to right, and their records,
  // contiguous (nodes().size() * record_size() doubles).
  std::span<const TreeNode> nodes() const { return nodes_; }
  const double* data() const { return slots_.data(); }
  // Holds the whole tree: the root's record (the total), or nullptr if not complete.
  const double* root() const;

  // The canonical nodes of [first, end) without any data (to know what a rank will send).
  static std::vector<TreeNode> canonical_nodes(std::int64_t first, std::int64_t end, std::int64_t global_chunks);

 private:
  bool is_root(const TreeNode& node) const;
  double* slot(std::size_t position) { return slots_.data() + position * record_; }
  void ensure_slot(std::size_t position);
  void reduce_top();  // merges or promotes the top node while the tree's rules allow

  std::int64_t chunks_;
  std::size_t record_;
  std::int64_t next_ = 0;
  std::vector<TreeNode> nodes_;
  std::vector<double> slots_;  // nodes_[i]'s record at slot(i); one more slot for a leaf
};

// How a holder of chunks [first, end) reduces their records, stored one per chunk in order
// (slot s holds chunk first + s), in place to the range's canonical nodes: `adds` in order
// (slot dst += slot src, element by element: a node's left child plus its right), after which
// canonical node k's record lies in slot node_slots[k]. A device carries it out where it
// computed the records and sends only the nodes (push_node them in order): the same bits.
struct InPlaceTreePlan {
  std::vector<TreeNode> nodes;
  std::vector<std::int64_t> node_slots;
  std::vector<std::int64_t> adds;  // dst0, src0, dst1, src1, ...
};
InPlaceTreePlan in_place_tree_plan(std::int64_t first, std::int64_t end, std::int64_t global_chunks);
// The plan on the host: records [end - first][record] (changed), the nodes' records into
// nodes_out [nodes][record].
void run_in_place_tree_plan(const InPlaceTreePlan& plan, double* records, std::size_t record, double* nodes_out);

}  // namespace spmd::models
