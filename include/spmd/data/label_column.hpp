#pragma once
// A label column read on its own, for features that are not a dense dataset beside it (a
// sparse matrix, data/sparse_matrix.hpp). `key` names either
//  - an integer dataset [N] or [N, 1] (class indices, checked as load_shard checks labels), or
//  - an AnnData categorical column (obs/<name> in .h5ad, anndata >= 0.8: a group with
//    encoding-type "categorical", datasets codes [N] and categories [K]): the classes are
//    the K categories, class c = categories[c]; a code of -1 (a missing value) is refused
//    naming the row.
#include <cstdint>
#include <string>
#include <vector>

namespace spmd::runtime {
class Context;
}

namespace spmd::data {

struct LabelColumn {
  std::vector<std::int32_t> labels;        // [rows] of this rank, in [0, classes)
  int classes = 0;
  std::vector<std::int64_t> class_counts;  // [classes] over all ranks
  std::vector<std::string> class_names;    // [classes] for a categorical column, else empty
  std::vector<std::string> warnings;       // the same on every rank
  std::string description;                 // "AnnData categorical 'obs/cell_type' (7 categories)"
};

// Collective: rank 0 reads the metadata, every rank its rows [first_row, first_row + rows).
// global_rows: N of the features, which the column must match. classes > 0: labels must lie
// in [0, classes) (a categorical column must have that many categories); else inferred.
// Every problem is the same CollectiveError on every rank, naming the file, the column and
// the row.
LabelColumn load_label_column(const runtime::Context& ctx, const std::string& path, const std::string& key,
                              std::int64_t global_rows, std::int64_t first_row, std::int64_t rows, int classes);

}  // namespace spmd::data
