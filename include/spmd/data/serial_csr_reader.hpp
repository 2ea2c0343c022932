#pragma once
// A rank's rows of a CSR matrix (sparse_matrix.hpp) read on their own and handed over dense:
// float32 [rows, columns], zeros where the row has no entry, so that every model that takes
// dense rows (spmd eval's, ONNX graphs) evaluates sparse files as they are stored, without a
// dense copy of the file. Each call reads the rows' part of indptr, then only their entries.
//
// As SerialRowReader (serial_row_reader.hpp): HDF5's POSIX driver, independent reads, no MPI
// call, so that a prefetch thread can stream rows while the main thread runs the collectives;
// the same rule on threads (no other thread inside HDF5 while one reads through it).
//
// Entries as scipy.sparse reads them: a column given twice in a row adds up (X.toarray());
// the order of a row's entries does not matter. Values are converted to float32 strictly (a
// float64 beyond float32's range fails the read), and must be finite.
#include <cstdint>
#include <string>
#include <vector>

#include "spmd/data/h5_handle.hpp"
#include "spmd/data/h5_reader.hpp"
#include "spmd/data/sparse_matrix.hpp"

namespace spmd::data {

class SerialCsrReader {
 public:
  // Opens the matrix's group in `path` and checks that it still is what `expected` says
  // (layout, shape, non-zeros, types: the file may have been replaced since it was probed).
  // Throws spmd::Error naming the file and the group.
  SerialCsrReader(std::string path, const SparseMatrixInfo& expected);

  // Rows [first_row, first_row + count) as float32 [count, columns] into out (every element
  // written). Throws spmd::Error naming the file, the group and the row for a range outside
  // the matrix, indptr decreasing or leaving [0, nnz], a column outside [0, columns), a value
  // that is not finite as float32, or a failed read (a damaged or truncated file).
  void read_dense(std::int64_t first_row, std::int64_t count, float* out);

 private:
  std::string path_, where_;
  SparseMatrixInfo info_;
  H5Reader file_;
  // Declared after the file, so that they close before it.
  H5Dataset indptr_, indices_, values_;
  H5Dataspace indptr_space_, indices_space_, values_space_;
  H5PropList strict_;  // transfer list whose conversions fail instead of clamping
  // Reused from call to call (allocated once for the largest block).
  std::vector<std::int64_t> row_start_, columns_;
  std::vector<float> entries_;
};

}  // namespace spmd::data
