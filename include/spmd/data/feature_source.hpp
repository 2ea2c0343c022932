#pragma once
// What a streaming pass (spmd eval) reads a features key as: a dense dataset [N, ...] as
// stored, or a CSR group (sparse_matrix.hpp) whose rows are read as dense float32 [N, F]
// (serial_csr_reader.hpp), so that any model taking dense rows evaluates a sparse file.
#include <optional>
#include <string>

#include "spmd/data/dataset.hpp"
#include "spmd/data/sparse_matrix.hpp"

namespace spmd::runtime {
class Context;
}

namespace spmd::data {

struct FeatureSource {
  // A dense dataset's shape (probe_shape: its labels dataset checked too); for a CSR matrix,
  // rows N, sample shape {F}, float32 (the rows as read), and no labels type: its labels are
  // a column of their own (label_column.hpp), checked when read.
  DatasetShape shape;
  std::optional<SparseMatrixInfo> sparse;
};

// Collective (rank 0 reads the metadata; the same CollectiveError everywhere).
FeatureSource probe_feature_source(const runtime::Context& ctx, const std::string& path, const DatasetKeys& keys);
// The same on this process alone; throws spmd::Error.
FeatureSource probe_feature_source(const std::string& path, const DatasetKeys& keys);

}  // namespace spmd::data
