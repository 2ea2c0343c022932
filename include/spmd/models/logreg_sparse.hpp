#pragma once
// The logistic-regression objective of models/logreg.hpp over rows stored compressed (CSR:
// each row's non-zero columns and values), at a cost in the non-zeros (O(nnz x C) per
// evaluation), not in N x F.
//
// Arithmetic (every variant and every layout gives the same bits; T = float in float32,
// double in float64), per row, its entries k in stored order:
//   logits   z_c = fma((T)x_k, W[col_k][c], z_c) from z_c = 0, one accumulator per class;
//   softmax  the dense kernels' own (logreg_kernel_spec.hpp: the variant's softmax, per-row
//            loss in double, summed in row order), weighted as they weight rows;
//   gradient G[col_k][c] = fma((double)d_c, (double)x_k, G[col_k][c]) in double, rows in
//            order (in float32 the product is exact in double: one rounding per term).
// Repeated columns in a row add up, as in scipy.sparse. Rows are cut into chunks of a global
// size (logreg_sparse_chunk_rows: large enough that a chunk's F x C record costs no more than
// its non-zeros) and the chunks' records are summed in PartialSumTree's order, as dense rows.
#include <cstdint>
#include <memory>

#include "spmd/models/logreg.hpp"

namespace spmd::models {

// Row r's entries are [row_start[r], row_start[r + 1]) of columns and values (any base:
// row_start[0] need not be 0). columns in [0, features).
struct CsrRows {
  const std::int64_t* row_start = nullptr;
  const std::int32_t* columns = nullptr;
  const float* values = nullptr;
  // The rows from `first` on (row_start advanced; entries stay where they are).
  CsrRows from(std::int64_t first) const { return {row_start + first, columns, values}; }
};

// The chunk size of a sparse problem of global_rows rows, features columns (with the
// intercept's) and nonzeros entries: kLogregChunkRows x the smallest power of two for which
// an average chunk holds at least `features` entries (so that zeroing and summing a chunk's
// F x C record costs no more than its non-zeros). Depends only on the data, never on the
// layout. Throws spmd::Error for negative arguments.
std::int64_t logreg_sparse_chunk_rows(std::int64_t global_rows, std::int64_t features, std::int64_t nonzeros);

// Scratch of the sparse kernels (logits and softmax of one tile), reused. One per thread.
class LogregSparseWorkspace {
 public:
  explicit LogregSparseWorkspace(LogregKernel kernel = LogregKernel::automatic);  // spmd::Error if unsupported
  ~LogregSparseWorkspace();
  LogregSparseWorkspace(LogregSparseWorkspace&&) noexcept;
  LogregSparseWorkspace& operator=(LogregSparseWorkspace&&) noexcept;
  LogregKernel kernel() const { return kernel_; }  // the softmax's variant; never automatic

 private:
  struct Buffers;
  friend struct LogregSparseAccess;
  LogregKernel kernel_;
  std::unique_ptr<Buffers> buffers_;
};

// One chunk's partials (logreg.hpp's record: out[0] loss sum, out[1 + f*C + c] gradient sum),
// out overwritten. W [features, classes] row-major in T. row_weights: nullptr or [rows].
// Throws spmd::Error for bad shapes, a column outside [0, features) or a label outside
// [0, classes), naming the row (counted from the chunk's first).
template <class T>
void logreg_sparse_chunk_partials(const CsrRows& X, const std::int32_t* labels, std::int64_t rows, int features,
                                  int classes, const T* W, double* out, LogregSparseWorkspace& workspace,
                                  const double* row_weights = nullptr);

}  // namespace spmd::models
