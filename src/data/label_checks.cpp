#include "label_checks.hpp"

#include <algorithm>
#include <limits>

#include "spmd/data/dataset.hpp"
#include "spmd/runtime/agree.hpp"
#include "spmd/runtime/collectives.hpp"
#include "row_read.hpp"

namespace spmd::data {

std::int32_t LabelScan::see(std::int64_t row, std::int64_t v, std::int64_t bound, std::int64_t limit) {
  if (v >= bound && above_row < 0) {
    above_row = row;
    above_value = v;
  }
  if ((v < 0 || v >= limit) && outside_row < 0) {
    outside_row = row;
    outside_value = v;
  }
  const bool fits = v >= 0 && v < bound && v <= std::numeric_limits<std::int32_t>::max();
  if (fits) largest = std::max(largest, v);
  return fits ? static_cast<std::int32_t>(v) : -1;
}

std::int64_t scan_bound(std::int64_t global_rows, int classes) {
  // A label is an index into the classes (a weight matrix [features, classes], per-class
  // counts): one far above the number of examples is an id to remap, not a class. With
  // classes given, the range check says it more precisely.
  return classes > 0 ? std::numeric_limits<std::int64_t>::max() : label_bound(global_rows);
}

CheckedLabels agree_on_labels(const runtime::Context& ctx, const std::string& where, std::int64_t global_rows,
                              int classes, const LabelScan& scan, std::span<const std::int32_t> labels) {
  const std::int64_t bound = scan_bound(global_rows, classes);
  std::string error;
  if (scan.above_row >= 0)
    error = rank_prefix(ctx) + where + ": row " + std::to_string(scan.above_row) + " has label " +
            std::to_string(scan.above_value) + ", above the largest class index this program accepts for " +
            std::to_string(global_rows) + " examples (" + std::to_string(bound - 1) +
            "): labels must be class indices 0..C-1; remap ids first (numpy: ids, y = np.unique(y, "
            "return_inverse=True))";
  runtime::agree_or_throw(ctx.comm(), error);
  std::string how;
  std::int64_t limit = classes;
  if (classes <= 0) {
    std::int64_t largest = scan.largest;
    runtime::allreduce_max(ctx, std::span<std::int64_t>(&largest, 1));
    limit = std::max<std::int64_t>(largest + 1, 0);
    how = "classes inferred as " + std::to_string(limit) + " = 1 + the largest label";
  } else {
    how = "classes = " + std::to_string(classes);
  }
  if (scan.outside_row >= 0)
    error = rank_prefix(ctx) + where + ": row " + std::to_string(scan.outside_row) + " has label " +
            std::to_string(scan.outside_value) + ", outside [0, " + std::to_string(limit) + ") (" + how + ")";
  runtime::agree_or_throw(ctx.comm(), error);
  CheckedLabels out;
  // Examples per class over all ranks: inferred classes that no example has (ids such as
  // 1001..1004 make 1005 classes) are worth a warning, as they cost a weight column each.
  if (limit > 0) {
    out.class_counts.assign(static_cast<std::size_t>(limit), 0);
    for (auto label : labels) ++out.class_counts[static_cast<std::size_t>(label)];
    runtime::allreduce_sum(ctx, std::span<std::int64_t>(out.class_counts));
    const auto empty = std::count(out.class_counts.begin(), out.class_counts.end(), 0);
    if (empty > 0 && classes <= 0)
      out.warnings.push_back(where + ": " + std::to_string(empty) + " of the " + std::to_string(limit) +
                             " inferred classes (1 + the largest label) have no example; each still costs a "
                             "weight column. Set --classes if they are real classes absent from this data, or "
                             "remap the labels to 0..K-1 (numpy: np.unique(y, return_inverse=True))");
  }
  out.classes = static_cast<int>(limit);
  return out;
}

}  // namespace spmd::data
