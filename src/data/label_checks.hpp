#pragma once
// Private to src/data: the checks every reader of a label column makes (load_shard's labels,
// a sparse matrix's label column), so that they refuse and infer alike.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "spmd/runtime/context.hpp"

namespace spmd::data {

// What a pass over the labels found on the way (global row indices).
struct LabelScan {
  std::int64_t above_row = -1, above_value = 0;      // first label >= bound (an id, not a class)
  std::int64_t outside_row = -1, outside_value = 0;  // first label < 0, or >= classes when classes > 0
  std::int64_t largest = -1;                         // of the labels in [0, bound)

  // Label v of global row `row`; returns what the int32 column stores (-1 for a label outside
  // int32 or the bound, reported by the checks). limit: classes, or bound when inferred.
  std::int32_t see(std::int64_t row, std::int64_t v, std::int64_t bound, std::int64_t limit);
};

// The bound a scan takes: class indices up to label_bound(global_rows) when classes are
// inferred (classes <= 0), anything when they are given.
std::int64_t scan_bound(std::int64_t global_rows, int classes);

struct CheckedLabels {
  int classes = 0;
  std::vector<std::int64_t> class_counts;  // over all ranks
  std::vector<std::string> warnings;
};

// Collective: refuses on every rank (CollectiveError naming `where`, the row and the rank)
// a label above the bound or outside the classes, infers classes when not given (1 + the
// largest label of any rank), counts examples per class over the ranks and warns about
// inferred classes without any.
CheckedLabels agree_on_labels(const runtime::Context& ctx, const std::string& where, std::int64_t global_rows,
                              int classes, const LabelScan& scan, std::span<const std::int32_t> labels);

}  // namespace spmd::data
