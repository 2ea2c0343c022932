#pragma once
// Sparse matrices stored row-compressed (CSR) in HDF5, as the tools that make them write them:
//  - AnnData (.h5ad, anndata >= 0.7): a group (X, layers/..., obsm/...) with attributes
//    encoding-type = "csr_matrix" and shape = [N, F], datasets data, indices, indptr;
//  - h5sparse: attributes h5sparse_format = "csr" and h5sparse_shape = [N, F];
//  - scipy.sparse written with h5py: a group with data, indices, indptr and a shape (an
//    attribute or a dataset `shape`).
// indptr [N + 1] (any integer type; indptr[0] = 0, non-decreasing, indptr[N] = nnz), indices
// [nnz] (integers in [0, F)), data [nnz] (any numeric type, finite; float32 in memory).
// Column-compressed groups (encoding-type csc_matrix, h5sparse_format csc) are refused, with
// how to convert them: their rows cannot be read by rank.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "spmd/data/dataset.hpp"
#include "spmd/data/element_type.hpp"
#include "spmd/runtime/large_pages.hpp"

namespace spmd::runtime {
class Context;
}

namespace spmd::data {

class H5Reader;

struct SparseMatrixInfo {
  std::string group;   // as named ("X")
  std::string layout;  // "AnnData csr_matrix", "h5sparse csr", "CSR group (data, indices, indptr, shape)"
  std::int64_t rows = 0, columns = 0, nonzeros = 0;
  ElementType values_type = ElementType::Float32;
  ElementType indices_type = ElementType::Int32;
  ElementType indptr_type = ElementType::Int64;
  // "CSR [2000 x 5000], 41234 non-zeros (0.41 %), data float32, indices int32 (AnnData csr_matrix)"
  std::string describe() const;
};

// nullopt when `name` is not a group of `file` (a dataset, or nothing: the dense reader says
// what is wrong). A group that is not a valid CSR matrix (CSC, a missing part, a shape
// that disagrees with indptr or with data's length, indptr[0] != 0 or indptr[N] != nnz)
// throws spmd::Error naming the file, the group and what is wrong.
std::optional<SparseMatrixInfo> probe_sparse_matrix(const H5Reader& file, const std::string& name);

// Collective (rank 0 reads the metadata, every rank gets its answer or the same
// CollectiveError). nullopt as above.
std::optional<SparseMatrixInfo> probe_sparse_matrix(const runtime::Context& ctx, const std::string& path,
                                                    const std::string& name);

// This rank's rows [first_row, first_row + rows) of a CSR matrix.
struct SparseShard {
  std::vector<std::int64_t> row_start;        // [rows + 1], from 0: row r is entries [row_start[r], row_start[r + 1])
  runtime::LargeVector<std::int32_t> columns; // [entries]
  runtime::LargeVector<float> values;         // [entries]
  SparseMatrixInfo info;
  std::int64_t global_rows = 0, first_row = 0, rows = 0;
  bool ones_column = false;  // OnesColumn::append: every row ends with column info.columns, value 1.0

  std::int64_t sample_size() const { return info.columns; }
  std::int64_t row_size() const { return info.columns + (ones_column ? 1 : 0); }
  std::int64_t entries() const { return row_start.empty() ? 0 : row_start.back(); }
};

// Collective. Reads indptr's part for the rows, then only their entries (MPI-IO, collective
// transfers, in pieces), and checks them: indptr non-decreasing, every column in [0, F), every
// value finite; a failure on any rank is the same CollectiveError everywhere, naming the
// file, the dataset, the rank and the row. ones: OnesColumn::append adds the intercept's
// column (one entry per row).
SparseShard load_sparse_rows(const runtime::Context& ctx, const std::string& path, const SparseMatrixInfo& info,
                             std::int64_t first_row, std::int64_t rows, OnesColumn ones = OnesColumn::none);

}  // namespace spmd::data
