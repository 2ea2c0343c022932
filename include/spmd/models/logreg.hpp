#pragma once
// Multiclass logistic regression (the objective of JAXopt's data-parallel LBFGS example):
//
//   f(W) = (1/n) sum_i w_i [ logsumexp(x_i W) - (x_i W)_{y_i} ]  +  (l2 / 2) ||W||_F^2
//   grad = (1/n) X^T diag(w) (softmax(X W) - onehot(y))          +  l2 W
//
// w_i = 1 unless the rows are weighted (sample and class weights: sklearn's sample_weight x
// class_weight[y_i]); n is the row count either way, so sklearn's C keeps its mapping.
//
// X [n, F] float32 row-major, W [F, C] float32 row-major, labels int32 in [0, C). At W = 0
// f = ln C. That example has no regularisation (l2 = 0); l2 > 0 is the usual "weight decay"
// convention (l2/2 times the squared Frobenius norm, so its gradient is l2 W).
//
// Data parallelism with bitwise identical results for any number of ranks and devices:
// the rows are cut into chunks of a fixed GLOBAL size (kLogregChunkRows, counted from
// global row 0). Whoever owns a chunk computes its partial sums (logreg_chunk_partials);
// they are added in the fixed binary-tree order of models/partial_sum_tree.hpp, which lets
// a rank send only a few tree nodes instead of every chunk; then logreg_finalize. A chunk's
// partials depend only on its rows and W (not on the kernel variant either), so the total
// is the same bits however chunks are spread.
//
// Precision of one chunk's partials (the exact order, which a device kernel must follow to
// give the same bits, is logreg_kernel_spec.hpp's): logits and softmax in float32; each
// row's loss in double, summed in row order; the gradient summed in float32 over blocks of
// kLogregGradFloatBlockRows rows, each block added in double. Each row's contribution is
// within ~1e-6 (relative to its size) of the exact value.
//
// float64 (spmd logreg --precision float64): the functions below that take W as const T*
// take it as double too; then the logits, softmax and gradient are double (the float64
// section of logreg_kernel_spec.hpp), with the same guarantees: every variant and every
// layout gives the same bits. Each row's contribution is then within ~1e-15 (relative to
// its size) of the exact value; it costs ~2x float32's time per evaluation.
//
// Speed: one pass over X per evaluation; rows in tiles of 32 go through logits, softmax and
// the gradient update while in cache, and the next tile is prefetched while they compute
// (tools/bench/bench_logreg_kernel against one read of X and against OpenBLAS).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace spmd::models {

// The global chunk size the workloads use (rows). Any value works; changing it changes
// the last bits of the sums, so every rank must use the same one.
inline constexpr std::int64_t kLogregChunkRows = 2048;
// Rows summed in float32 before a gradient partial is added in double (part of the
// arithmetic contract above; not tunable).
inline constexpr std::int64_t kLogregGradFloatBlockRows = 256;

// The arithmetic of the objective and gradient: float32 (the default, the fastest) or
// float64 (W in double; see the float64 paragraph above).
enum class LogregPrecision { float32, float64 };
const char* to_string(LogregPrecision precision);
// "float32" or "float64"; throws spmd::Error naming `option` and the choices otherwise.
LogregPrecision parse_logreg_precision(const std::string& text, const std::string& option);

// Implementations of the same arithmetic. automatic = the fastest this CPU supports.
enum class LogregKernel { automatic, portable, avx2, avx512 };

const char* to_string(LogregKernel kernel);
bool logreg_kernel_supported(LogregKernel kernel);  // automatic and portable: always
LogregKernel logreg_best_kernel();                  // what automatic resolves to here

// Number of doubles in one partials record: [0] = loss sum, [1 + f*C + c] = gradient sum
// for W[f][c].
inline std::size_t logreg_partials_size(int features, int classes) {
  return 1 + static_cast<std::size_t>(features) * static_cast<std::size_t>(classes);
}

// Scratch memory of the kernels, allocated on first use and reused (grows only). One per
// thread: not thread-safe.
class LogregWorkspace {
 public:
  // Throws spmd::Error if the requested kernel is not supported by this CPU.
  explicit LogregWorkspace(LogregKernel kernel = LogregKernel::automatic);
  ~LogregWorkspace();
  LogregWorkspace(LogregWorkspace&&) noexcept;
  LogregWorkspace& operator=(LogregWorkspace&&) noexcept;
  LogregWorkspace(const LogregWorkspace&) = delete;
  LogregWorkspace& operator=(const LogregWorkspace&) = delete;

  LogregKernel kernel() const { return kernel_; }  // never automatic

 private:
  struct Buffers;
  friend struct LogregWorkspaceAccess;  // the implementation's door to the buffers
  LogregKernel kernel_;
  std::unique_ptr<Buffers> buffers_;
};

// Partial sums of one chunk: out[0] = sum of the rows' losses, out[1 + f*C + c] = sum over
// the rows of x[f] * (p[c] - [c == y]); out has logreg_partials_size(F, C) entries and is
// overwritten. rows may be 0 (all zeros). X holds rows * F floats (any alignment), labels
// rows ints in [0, C) (else spmd::Error naming the row), W F * C floats. Throws
// spmd::Error for F < 1, C < 1, rows < 0. row_weights: nullptr, or [rows] weights w_i >= 0
// (sample x class weights): row i's loss and its gradient term are multiplied by w_i (the
// softmax residual in T, the loss in double; logreg_kernel_spec.hpp).
template <class T>
void logreg_chunk_partials(const float* X, const std::int32_t* labels, std::int64_t rows, int features,
                           int classes, const T* W, double* out, LogregWorkspace& workspace,
                           const double* row_weights = nullptr);

// The partials of consecutive chunks of chunk_rows rows (the last one shorter) of one
// contiguous range, chunk k at out[k * logreg_partials_size(F, C)]: the same bits as
// logreg_chunk_partials chunk by chunk, transposing W once. The range must start at a
// global chunk boundary for these to be the global chunks' partials.
template <class T>
void logreg_range_partials(const float* X, const std::int32_t* labels, std::int64_t rows, int features,
                           int classes, const T* W, std::int64_t chunk_rows, double* out,
                           LogregWorkspace& workspace, const double* row_weights = nullptr);

// total = the sum of the num_chunks records in the fixed tree order of PartialSumTree
// (total overwritten; all zeros when num_chunks is 0). This order is the contract that
// makes sums independent of the rank count.
void logreg_sum_partials(const double* partials, std::int64_t num_chunks, int features, int classes,
                         double* total);

// Turns summed partials into the objective: returns f(W) and writes grad [F * C]
// (row-major like W) = total_grad / global_rows + l2 * W, in double. Only the first
// penalised_features rows of W are penalised (l2/2 * sum W^2, in index order): with
// x' = [x, 1] and W' = [W; b] the last row is the intercept b, which sklearn
// (fit_intercept=True) and JAXopt leave out of the penalty. Throws spmd::Error when
// global_rows < 1, l2 < 0 or penalised_features is outside [0, features].
template <class T>
double logreg_finalize(const double* total, std::int64_t global_rows, int features, int classes, const T* W,
                       double l2, int penalised_features, double* grad);

// Whole objective on one thread with the standard chunking: chunk partials, sum, finalize
// (the same bits as the distributed computation with kLogregChunkRows chunks). grad [F*C].
// Every row of W is penalised.
template <class T>
double logreg_value_and_grad(const float* X, const std::int32_t* labels, std::int64_t rows, int features,
                             int classes, const T* W, double l2, double* grad, LogregWorkspace& workspace);

// Predicted class (argmax of the float32 logits x W, lowest index on ties) of each row into
// classes_out [rows].
void logreg_predict(const float* X, std::int64_t rows, int features, int classes, const float* W,
                    std::int32_t* classes_out, LogregWorkspace& workspace);

// What a predictor returns for rows of float32 logits z (row r at logits + r * stride):
// z' = z + bias (bias nullptr: none; a float32 add per logit), classes_out[r] = the first
// index of the largest z' (strict >: comparisons with NaN are false), and, unless probs_out is nullptr, probs_out
// [rows, classes] = softmax(z') in float32 with the training kernels' exp and summation
// order (so every backend that produces the same logits writes the same probabilities).
// Returns how many rows had a NaN or an infinity among their z'.
std::int64_t logreg_logits_to_outputs(const float* logits, std::int64_t rows, std::int64_t stride, int classes,
                              const float* bias, std::int32_t* classes_out, float* probs_out);

// logreg_predict for one model used on many batches (evaluation): W is transposed into the
// kernel's layout once, not per batch, and copied with bias (nullptr, or the intercept
// [classes]). Results as logreg_logits_to_outputs of the kernel's logits. One per thread.
class LogregFixedPredictor {
 public:
  // Throws spmd::Error for features < 1, classes < 1 or an unsupported kernel.
  LogregFixedPredictor(const float* W, const float* bias, int features, int classes,
                       LogregKernel kernel = LogregKernel::automatic);
  // classes_out [rows]; probs_out: nullptr or [rows, classes]. Returns the rows whose logits
  // held a NaN or an infinity (logreg_logits_to_outputs).
  std::int64_t predict(const float* X, std::int64_t rows, std::int32_t* classes_out, float* probs_out = nullptr);
  LogregKernel kernel() const { return workspace_.kernel(); }

 private:
  int features_, classes_;
  LogregWorkspace workspace_;        // holds the transposed W
  const float* transposed_weights_;  // in workspace_ (heap-held: stays put when moved)
  std::vector<float> bias_;          // empty: no intercept
};

}  // namespace spmd::models
