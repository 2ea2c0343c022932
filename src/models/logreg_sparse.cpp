// The sparse (CSR) logistic-regression chunk: logits over each row's entries, the dense
// kernels' softmax on a tile of rows, the gradient scattered into the chunk's double record.
#pragma GCC optimize("fp-contract=off")  // only the explicit std::fma may fuse

#include "spmd/models/logreg_sparse.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>

#include "spmd/models/cnn_aligned.hpp"
#include "spmd/models/logreg_kernel_spec.hpp"
#include "spmd/runtime/cpu_features.hpp"
#include "spmd/runtime/error.hpp"

namespace spmd::models {

using logreg_detail::kLanes;
using logreg_detail::kTileRows;
using logreg_detail::round_up;
using logreg_detail::TileShape;

struct LogregSparseWorkspace::Buffers {
  AlignedArray<float> logits32, delta32;
  AlignedArray<double> logits64, delta64, row_delta;  // row_delta: one row's d_c, widened
  template <class T>
  AlignedArray<T>& logits() {
    if constexpr (std::is_same_v<T, float>) return logits32;
    else return logits64;
  }
  template <class T>
  AlignedArray<T>& delta() {
    if constexpr (std::is_same_v<T, float>) return delta32;
    else return delta64;
  }
};

struct LogregSparseAccess {
  static LogregSparseWorkspace::Buffers& buffers(LogregSparseWorkspace& ws) { return *ws.buffers_; }
};

namespace {

// The softmax of the dense kernels in T (the same bits from every variant).
template <class T>
auto softmax_of(LogregKernel kernel) {
  using namespace logreg_detail;
  if constexpr (std::is_same_v<T, float>)
    return (kernel == LogregKernel::avx512 ? avx512_ops() : kernel == LogregKernel::avx2 ? avx2_ops() : portable_ops())
        .softmax;
  else
    return (kernel == LogregKernel::avx512   ? avx512_ops64()
            : kernel == LogregKernel::avx2 ? avx2_ops64()
                                           : portable_ops64())
        .softmax;
}

[[noreturn]] void bad_column(std::int64_t row, std::int64_t entry, std::int32_t column, int features) {
  throw Error("logreg: row " + std::to_string(row) + " (counted from the chunk's first row), entry " +
              std::to_string(entry) + ": column " + std::to_string(column) + " is outside [0, " +
              std::to_string(features) + ")");
}

}  // namespace

std::int64_t logreg_sparse_chunk_rows(std::int64_t global_rows, std::int64_t features, std::int64_t nonzeros) {
  if (global_rows < 0 || features < 0 || nonzeros < 0)
    throw Error("logreg: sparse chunk size needs rows, features and non-zeros >= 0 (got " +
                std::to_string(global_rows) + ", " + std::to_string(features) + ", " + std::to_string(nonzeros) + ")");
  std::int64_t chunk = kLogregChunkRows;
  // An average chunk holds chunk * nonzeros / global_rows entries; stop once one chunk is the whole data.
  while (chunk < global_rows &&
         static_cast<__int128>(chunk) * nonzeros < static_cast<__int128>(features) * global_rows)
    chunk *= 2;
  return chunk;
}

LogregSparseWorkspace::LogregSparseWorkspace(LogregKernel kernel)
    : kernel_(kernel == LogregKernel::automatic ? logreg_best_kernel() : kernel),
      buffers_(std::make_unique<Buffers>()) {
  if (!logreg_kernel_supported(kernel_))
    throw Error(std::string("logreg: kernel '") + to_string(kernel_) + "' is not supported by this CPU" +
                runtime::cpu_cap_note());
}
LogregSparseWorkspace::~LogregSparseWorkspace() = default;
LogregSparseWorkspace::LogregSparseWorkspace(LogregSparseWorkspace&&) noexcept = default;
LogregSparseWorkspace& LogregSparseWorkspace::operator=(LogregSparseWorkspace&&) noexcept = default;

template <class T>
void logreg_sparse_chunk_partials(const CsrRows& X, const std::int32_t* labels, std::int64_t rows, int features,
                                  int classes, const T* W, double* out, LogregSparseWorkspace& workspace,
                                  const double* row_weights) {
  if (features < 1) throw Error("logreg: features must be >= 1 (got " + std::to_string(features) + ")");
  if (classes < 1) throw Error("logreg: classes must be >= 1 (got " + std::to_string(classes) + ")");
  if (rows < 0) throw Error("logreg: rows must be >= 0 (got " + std::to_string(rows) + ")");
  const int C = classes;
  const TileShape s{features, classes, round_up(features, logreg_detail::kLanesOf<T>), round_up(classes, kLanes)};
  auto& b = LogregSparseAccess::buffers(workspace);
  T* z = b.logits<T>().reserve(static_cast<std::size_t>(kTileRows) * s.padded_classes);
  T* d = b.delta<T>().reserve(static_cast<std::size_t>(kTileRows) * C);
  double* dc = b.row_delta.reserve(static_cast<std::size_t>(C));
  const auto softmax = softmax_of<T>(workspace.kernel());
  double* grad = out + 1;
  std::fill(grad, grad + static_cast<std::size_t>(features) * C, 0.0);
  double loss = 0.0;
  double row_loss[kTileRows];
  for (std::int64_t tile = 0; tile < rows; tile += kTileRows) {
    const int n = static_cast<int>(std::min<std::int64_t>(kTileRows, rows - tile));
    for (int i = 0; i < n; ++i) {
      const std::int64_t r = tile + i;
      if (labels[r] < 0 || labels[r] >= C)
        throw Error("logreg: label " + std::to_string(labels[r]) + " of row " + std::to_string(r) +
                    " (counted from the chunk's first row) is outside [0, " + std::to_string(C) + ")");
      T* zr = z + static_cast<std::size_t>(i) * s.padded_classes;
      std::fill(zr, zr + s.padded_classes, T(0));
      for (std::int64_t k = X.row_start[r]; k < X.row_start[r + 1]; ++k) {
        const std::int32_t col = X.columns[k];
        if (col < 0 || col >= features) bad_column(r, k - X.row_start[r], col, features);
        const T x = static_cast<T>(X.values[k]);
        const T* w = W + static_cast<std::size_t>(col) * C;
        for (int c = 0; c < C; ++c) zr[c] = std::fma(x, w[c], zr[c]);
      }
    }
    softmax(z, labels + tile, n, s, d, row_loss);
    if (row_weights == nullptr) {
      for (int i = 0; i < n; ++i) loss += row_loss[i];
    } else {
      const double* wt = row_weights + tile;
      for (int c = 0; c < C; ++c)
        for (int i = 0; i < n; ++i) d[c * kTileRows + i] = d[c * kTileRows + i] * static_cast<T>(wt[i]);
      for (int i = 0; i < n; ++i) loss += wt[i] * row_loss[i];
    }
    for (int i = 0; i < n; ++i) {
      const std::int64_t r = tile + i;
      for (int c = 0; c < C; ++c) dc[c] = static_cast<double>(d[c * kTileRows + i]);
      for (std::int64_t k = X.row_start[r]; k < X.row_start[r + 1]; ++k) {
        const double x = static_cast<double>(X.values[k]);
        double* g = grad + static_cast<std::size_t>(X.columns[k]) * C;
        for (int c = 0; c < C; ++c) g[c] = std::fma(dc[c], x, g[c]);
      }
    }
  }
  out[0] = loss;
}

template void logreg_sparse_chunk_partials<float>(const CsrRows&, const std::int32_t*, std::int64_t, int, int,
                                                  const float*, double*, LogregSparseWorkspace&, const double*);
template void logreg_sparse_chunk_partials<double>(const CsrRows&, const std::int32_t*, std::int64_t, int, int,
                                                   const double*, double*, LogregSparseWorkspace&, const double*);

}  // namespace spmd::models
