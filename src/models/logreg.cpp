// Multiclass logistic regression: the public entry points of models/logreg.hpp. Validates
// shapes, owns the workspace, picks the kernel variant and runs the chunk driver (tiles of
// rows through logits -> softmax -> gradient while they are in cache, float gradient blocks
// folded into double chunk sums).
#pragma GCC optimize("fp-contract=off")  // the weighted loss w * loss, then +: two roundings, as on the GPU

#include "spmd/models/logreg.hpp"

#include <algorithm>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "spmd/models/argmax.hpp"
#include "spmd/models/cnn_aligned.hpp"
#include "spmd/models/logreg_kernel_spec.hpp"
#include "spmd/models/partial_sum_tree.hpp"
#include "spmd/runtime/cpu_features.hpp"
#include "spmd/runtime/error.hpp"

namespace spmd::models {

namespace {

using logreg_detail::KernelOps;
using logreg_detail::kLanes;
using logreg_detail::kTileRows;
using logreg_detail::round_up;
using logreg_detail::TileShape;

// The kernels' arrays in one precision (T: float, or double for float64).
template <class T>
struct KernelArrays {
  AlignedArray<T> transposed_weights;  // WT [C][Fpad]
  AlignedArray<T> logits;              // Z [kTileRows][Cpad]
  AlignedArray<T> softmax_delta;       // D [C][kTileRows]
  AlignedArray<T> gradient_block;      // Gf [C][Fpad]
};

// The kernel table of one variant in T's precision.
template <class T>
logreg_detail::KernelOpsOf<T> ops_for(LogregKernel kernel) {
  using namespace logreg_detail;
  if constexpr (std::is_same_v<T, float>)
    return kernel == LogregKernel::avx512 ? avx512_ops() : kernel == LogregKernel::avx2 ? avx2_ops() : portable_ops();
  else
    return kernel == LogregKernel::avx512 ? avx512_ops64() : kernel == LogregKernel::avx2 ? avx2_ops64() : portable_ops64();
}

}  // namespace

struct LogregWorkspace::Buffers {
  KernelArrays<float> f32;
  KernelArrays<double> f64;
  AlignedArray<double> gradient_chunk;     // Gd [C][Fpad]
  std::vector<double> partials;            // a zero record (logreg_value_and_grad of no rows)
  std::optional<PartialSumTree> tree;      // logreg_value_and_grad's reduction, kept between calls
  std::int64_t tree_chunks = 0;

  template <class T>
  KernelArrays<T>& arrays() {
    if constexpr (std::is_same_v<T, float>) return f32;
    else return f64;
  }
};

struct LogregWorkspaceAccess {
  using Buffers = LogregWorkspace::Buffers;
  static Buffers& buffers(LogregWorkspace& ws) { return *ws.buffers_; }
};

namespace {

using Buffers = LogregWorkspaceAccess::Buffers;

// The tile shape of the T kernels (Fpad: F rounded up to their lanes).
template <class T = float>
TileShape checked_shape(std::int64_t rows, int features, int classes) {
  if (features < 1) throw Error("logreg: features must be >= 1 (got " + std::to_string(features) + ")");
  if (classes < 1) throw Error("logreg: classes must be >= 1 (got " + std::to_string(classes) + ")");
  if (rows < 0) throw Error("logreg: rows must be >= 0 (got " + std::to_string(rows) + ")");
  return TileShape{features, classes, round_up(features, logreg_detail::kLanesOf<T>), round_up(classes, kLanes)};
}

// WT[c][f] = W[f][c], zero for f >= F.
template <class T>
const T* prepare_weights(const T* W, const TileShape& s, Buffers& b) {
  T* wt = b.arrays<T>().transposed_weights.reserve(static_cast<std::size_t>(s.classes) * s.padded_features);
  for (int c = 0; c < s.classes; ++c) {
    T* row = wt + static_cast<std::size_t>(c) * s.padded_features;
    for (int f = 0; f < s.features; ++f) row[f] = W[static_cast<std::size_t>(f) * s.classes + c];
    std::fill(row + s.features, row + s.padded_features, T(0));
  }
  return wt;
}

void check_labels(const std::int32_t* labels, std::int64_t first, std::int64_t count, int classes) {
  for (std::int64_t i = first; i < first + count; ++i)
    if (labels[i] < 0 || labels[i] >= classes)
      throw Error("logreg: label " + std::to_string(labels[i]) + " of row " + std::to_string(i) +
                  " (counted from the chunk's first row) is outside [0, " + std::to_string(classes) + ")");
}

// One chunk with W already transposed into the workspace (T: the kernels' precision).
template <class T, class Ops>
void chunk_partials_prepared(const Ops& ops, const float* X, const std::int32_t* labels, const double* row_weights,
                             std::int64_t rows, const TileShape& s, const T* wt, Buffers& b, double* out) {
  const std::size_t grad_size = static_cast<std::size_t>(s.classes) * s.padded_features;
  KernelArrays<T>& a = b.arrays<T>();
  T* z = a.logits.reserve(static_cast<std::size_t>(kTileRows) * s.padded_classes);
  T* d = a.softmax_delta.reserve(static_cast<std::size_t>(kTileRows) * s.classes);
  T* gf = a.gradient_block.reserve(grad_size);
  double* gd = b.gradient_chunk.reserve(grad_size);
  std::fill(gd, gd + grad_size, 0.0);
  std::fill(gf, gf + grad_size, T(0));
  double loss = 0.0;
  double row_loss[kTileRows];
  for (std::int64_t block = 0; block < rows; block += kLogregGradFloatBlockRows) {
    const std::int64_t block_end = std::min(rows, block + kLogregGradFloatBlockRows);
    check_labels(labels, block, block_end - block, s.classes);
    for (std::int64_t tile = block; tile < block_end; tile += kTileRows) {
      const int n = static_cast<int>(std::min<std::int64_t>(kTileRows, block_end - tile));
      const int next = static_cast<int>(std::clamp<std::int64_t>(rows - (tile + n), 0, kTileRows));
      const float* x = X + tile * s.features;
      const float* next_x = x + static_cast<std::int64_t>(n) * s.features;
      ops.logits(x, n, s, wt, z, next_x, next);
      ops.softmax(z, labels + tile, n, s, d, row_loss);
      if (row_weights == nullptr) {
        for (int i = 0; i < n; ++i) loss += row_loss[i];
      } else {
        const double* w = row_weights + tile;
        for (int c = 0; c < s.classes; ++c)
          for (int i = 0; i < n; ++i) d[c * kTileRows + i] = d[c * kTileRows + i] * static_cast<T>(w[i]);
        for (int i = 0; i < n; ++i) loss += w[i] * row_loss[i];
      }
      ops.gradient(x, d, n, s, gf, next_x, next);
    }
    for (std::size_t k = 0; k < grad_size; ++k) {  // lanes f >= F are junk, folded but never read
      gd[k] += static_cast<double>(gf[k]);
      gf[k] = T(0);
    }
  }
  out[0] = loss;
  for (int f = 0; f < s.features; ++f)
    for (int c = 0; c < s.classes; ++c)
      out[1 + static_cast<std::size_t>(f) * s.classes + c] = gd[static_cast<std::size_t>(c) * s.padded_features + f];
}

}  // namespace

const char* to_string(LogregKernel kernel) {
  switch (kernel) {
    case LogregKernel::automatic: return "automatic";
    case LogregKernel::portable: return "portable";
    case LogregKernel::avx2: return "avx2";
    case LogregKernel::avx512: return "avx512";
  }
  return "unknown";
}

const char* to_string(LogregPrecision precision) {
  return precision == LogregPrecision::float64 ? "float64" : "float32";
}

LogregPrecision parse_logreg_precision(const std::string& text, const std::string& option) {
  if (text == "float32") return LogregPrecision::float32;
  if (text == "float64") return LogregPrecision::float64;
  throw Error("--" + option + " must be float32 or float64 (got '" + text + "')");
}

bool logreg_kernel_supported(LogregKernel kernel) {
  switch (kernel) {
    case LogregKernel::avx512: return runtime::cpu_allows(runtime::CpuLevel::avx512);
    case LogregKernel::avx2: return runtime::cpu_allows(runtime::CpuLevel::avx2);
    default: return true;
  }
}

LogregKernel logreg_best_kernel() {
  if (logreg_kernel_supported(LogregKernel::avx512)) return LogregKernel::avx512;
  if (logreg_kernel_supported(LogregKernel::avx2)) return LogregKernel::avx2;
  return LogregKernel::portable;
}

LogregWorkspace::LogregWorkspace(LogregKernel kernel)
    : kernel_(kernel == LogregKernel::automatic ? logreg_best_kernel() : kernel),
      buffers_(std::make_unique<Buffers>()) {
  if (!logreg_kernel_supported(kernel_))
    throw Error(std::string("logreg: kernel '") + to_string(kernel_) + "' is not supported by this CPU" + runtime::cpu_cap_note());
}
LogregWorkspace::~LogregWorkspace() = default;
LogregWorkspace::LogregWorkspace(LogregWorkspace&&) noexcept = default;
LogregWorkspace& LogregWorkspace::operator=(LogregWorkspace&&) noexcept = default;

template <class T>
void logreg_chunk_partials(const float* X, const std::int32_t* labels, std::int64_t rows, int features, int classes,
                           const T* W, double* out, LogregWorkspace& workspace, const double* row_weights) {
  const TileShape s = checked_shape<T>(rows, features, classes);
  auto& b = LogregWorkspaceAccess::buffers(workspace);
  const T* wt = prepare_weights(W, s, b);
  chunk_partials_prepared(ops_for<T>(workspace.kernel()), X, labels, row_weights, rows, s, wt, b, out);
}

template <class T>
void logreg_range_partials(const float* X, const std::int32_t* labels, std::int64_t rows, int features, int classes,
                           const T* W, std::int64_t chunk_rows, double* out, LogregWorkspace& workspace,
                           const double* row_weights) {
  const TileShape s = checked_shape<T>(rows, features, classes);
  if (chunk_rows < 1) throw Error("logreg: chunk_rows must be >= 1 (got " + std::to_string(chunk_rows) + ")");
  auto& b = LogregWorkspaceAccess::buffers(workspace);
  const T* wt = prepare_weights(W, s, b);
  const auto ops = ops_for<T>(workspace.kernel());
  const std::size_t record = logreg_partials_size(features, classes);
  for (std::int64_t first = 0, k = 0; first < rows; first += chunk_rows, ++k)
    chunk_partials_prepared(ops, X + first * features, labels + first,
                            row_weights == nullptr ? nullptr : row_weights + first, std::min(chunk_rows, rows - first),
                            s, wt, b, out + k * record);
}

void logreg_sum_partials(const double* partials, std::int64_t num_chunks, int features, int classes,
                         double* total) {
  const std::size_t record = logreg_partials_size(features, classes);
  if (num_chunks < 1) {
    std::fill(total, total + record, 0.0);
    return;
  }
  PartialSumTree tree(num_chunks, record);
  tree.reset(0);
  for (std::int64_t k = 0; k < num_chunks; ++k) tree.push_leaf(partials + k * record);
  std::copy(tree.root(), tree.root() + record, total);
}

template <class T>
double logreg_finalize(const double* total, std::int64_t global_rows, int features, int classes, const T* W,
                       double l2, int penalised_features, double* grad) {
  checked_shape(global_rows, features, classes);
  if (global_rows < 1) throw Error("logreg: the mean needs at least one row (global rows = 0)");
  if (!(l2 >= 0)) throw Error("logreg: 'l2' must be >= 0 (got " + std::to_string(l2) + ")");
  if (penalised_features < 0 || penalised_features > features)
    throw Error("logreg: the penalised rows of W must be 0.." + std::to_string(features) + " (got " +
                std::to_string(penalised_features) + ")");
  const double n = static_cast<double>(global_rows);
  const std::size_t size = static_cast<std::size_t>(features) * classes;
  double value = total[0] / n;
  for (std::size_t k = 0; k < size; ++k) grad[k] = total[1 + k] / n;
  if (l2 > 0) {
    // W is row-major, so the penalised rows are one prefix of it.
    const std::size_t penalised = static_cast<std::size_t>(penalised_features) * classes;
    double squares = 0.0;
    for (std::size_t k = 0; k < penalised; ++k) {
      const double w = W[k];
      squares += w * w;
      grad[k] += l2 * w;
    }
    value += 0.5 * l2 * squares;
  }
  return value;
}

template <class T>
double logreg_value_and_grad(const float* X, const std::int32_t* labels, std::int64_t rows, int features,
                             int classes, const T* W, double l2, double* grad, LogregWorkspace& workspace) {
  const TileShape s = checked_shape<T>(rows, features, classes);
  auto& b = LogregWorkspaceAccess::buffers(workspace);
  const T* wt = prepare_weights(W, s, b);
  const auto ops = ops_for<T>(workspace.kernel());
  const std::size_t record = logreg_partials_size(features, classes);
  const std::int64_t chunks = (rows + kLogregChunkRows - 1) / kLogregChunkRows;
  if (chunks == 0) {  // logreg_finalize refuses it, with the message
    b.partials.assign(record, 0.0);
    return logreg_finalize(b.partials.data(), rows, features, classes, W, l2, features, grad);
  }
  // Each chunk is written straight into the tree, which adds it in the fixed order.
  if (!b.tree || b.tree->record_size() != record || b.tree_chunks != chunks) {
    b.tree.emplace(chunks, record);
    b.tree_chunks = chunks;
  }
  PartialSumTree& tree = *b.tree;
  tree.reset(0);
  for (std::int64_t first = 0; first < rows; first += kLogregChunkRows) {
    chunk_partials_prepared(ops, X + first * features, labels + first, nullptr, std::min(kLogregChunkRows, rows - first),
                            s, wt, b, tree.leaf_slot());
    tree.commit_leaf();
  }
  const double* total = tree.root();
  return logreg_finalize(total, rows, features, classes, W, l2, features, grad);
}

namespace {

std::int64_t predict_prepared(const KernelOps& ops, const float* X, std::int64_t rows, const TileShape& s,
                              const float* wt, const float* bias, Buffers& b, std::int32_t* classes_out,
                              float* probs_out) {
  float* z = b.f32.logits.reserve(static_cast<std::size_t>(kTileRows) * s.padded_classes);
  std::int64_t non_finite = 0;
  for (std::int64_t tile = 0; tile < rows; tile += kTileRows) {
    const int n = static_cast<int>(std::min<std::int64_t>(kTileRows, rows - tile));
    ops.logits(X + tile * s.features, n, s, wt, z, nullptr, 0);
    non_finite += logreg_logits_to_outputs(z, n, s.padded_classes, s.classes, bias, classes_out + tile,
                                           probs_out ? probs_out + tile * s.classes : nullptr);
  }
  return non_finite;
}

}  // namespace

std::int64_t logreg_logits_to_outputs(const float* logits, std::int64_t rows, std::int64_t stride, int classes,
                                      const float* bias, std::int32_t* classes_out, float* probs_out) {
  constexpr int kChunk = 256;  // classes biased at a time (a stack buffer; C may be large)
  float biased[kChunk];
  std::int64_t non_finite = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* z = logits + r * stride;
    const auto logit = [&](int c) { return bias ? z[c] + bias[c] : z[c]; };
    bool finite = true;
    classes_out[r] = argmax_of(classes, logit, finite);
    non_finite += !finite;
    if (!probs_out) continue;
    // The softmax of logreg_kernel_spec.hpp: max as the x86 instructions take it, exp_spec,
    // the sum in class order, then one reciprocal.
    float m = logit(0);
    for (int c = 1; c < classes; ++c) m = logreg_detail::max_like_x86(m, logit(c));
    float* p = probs_out + r * classes;
    float sum = 0.0f;
    for (int c0 = 0; c0 < classes; c0 += kChunk) {
      const int n = std::min(kChunk, classes - c0);
      for (int c = 0; c < n; ++c) biased[c] = logit(c0 + c);
      for (int c = 0; c < n; ++c) {
        p[c0 + c] = logreg_detail::exp_spec(biased[c] - m);
        sum += p[c0 + c];
      }
    }
    const float inverse = 1.0f / sum;
    for (int c = 0; c < classes; ++c) p[c] *= inverse;
  }
  return non_finite;
}

void logreg_predict(const float* X, std::int64_t rows, int features, int classes, const float* W,
                    std::int32_t* classes_out, LogregWorkspace& workspace) {
  const TileShape s = checked_shape(rows, features, classes);
  auto& b = LogregWorkspaceAccess::buffers(workspace);
  const float* wt = prepare_weights(W, s, b);
  predict_prepared(ops_for<float>(workspace.kernel()), X, rows, s, wt, nullptr, b, classes_out, nullptr);
}

LogregFixedPredictor::LogregFixedPredictor(const float* W, const float* bias, int features, int classes,
                                           LogregKernel kernel)
    : features_(features),
      classes_(classes),
      workspace_(kernel),
      transposed_weights_(
          prepare_weights(W, checked_shape(0, features, classes), LogregWorkspaceAccess::buffers(workspace_))),
      bias_(bias ? std::vector<float>(bias, bias + classes) : std::vector<float>()) {}

std::int64_t LogregFixedPredictor::predict(const float* X, std::int64_t rows, std::int32_t* classes_out,
                                           float* probs_out) {
  const TileShape s = checked_shape(rows, features_, classes_);
  return predict_prepared(ops_for<float>(workspace_.kernel()), X, rows, s, transposed_weights_, bias_.empty() ? nullptr : bias_.data(),
                   LogregWorkspaceAccess::buffers(workspace_), classes_out, probs_out);
}

// The float32 and float64 entry points (logreg.hpp).
#define SPMD_INSTANTIATE(T)                                                                                        \
  template void logreg_chunk_partials<T>(const float*, const std::int32_t*, std::int64_t, int, int, const T*,      \
                                         double*, LogregWorkspace&, const double*);                                \
  template void logreg_range_partials<T>(const float*, const std::int32_t*, std::int64_t, int, int, const T*,      \
                                         std::int64_t, double*, LogregWorkspace&, const double*);                  \
  template double logreg_finalize<T>(const double*, std::int64_t, int, int, const T*, double, int, double*);      \
  template double logreg_value_and_grad<T>(const float*, const std::int32_t*, std::int64_t, int, int, const T*,    \
                                           double, double*, LogregWorkspace&);

SPMD_INSTANTIATE(float)
SPMD_INSTANTIATE(double)
#undef SPMD_INSTANTIATE

}  // namespace spmd::models
