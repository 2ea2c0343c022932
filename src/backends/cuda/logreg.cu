// Logistic regression on a GPU: the per-chunk partials of a device's rows (LogregShard) and
// the eval predictor. Both perform EXACTLY the arithmetic of logreg_kernel_spec.hpp, so a
// GPU gives the same bits as the CPU kernels: iterates do not depend on how chunks are
// spread over ranks, devices or backends (cuBLAS could not promise that: its algorithm, and
// so its summation order, depends on the matrix shapes).
//
// One evaluation, X resident on the GPU (read twice: logits, then gradient):
//   logits_kernel          thread per (row, class): 16 fma lanes over the features, the
//                          spec's tree; W enters transposed and zero padded (WT [C][Fpad])
//   softmax_kernel         thread per row: max, exp_spec, sum, D = P - Y in place of Z; the
//                          row's (max, sum, z_label) go to the host
//   block_gradient_kernel  thread per (256-row block, feature, group of classes): fma over
//                          the block's rows in order, in float
//   chunk_gradient_kernel  each chunk's blocks summed in double, in block order
//   host                   row loss = (m + log s) - z_y in double with the host's std::log
//                          (the GPU's log may differ in the last bit), summed in row order
// Every float operation is an explicit fmaf or a _rn intrinsic, which nvcc never fuses or
// reorders, so the default --fmad=true cannot change a bit.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "spmd/models/logreg_kernel_spec.hpp"
#include "spmd/models/device_models.hpp"
#include "spmd/models/logreg.hpp"
#include "spmd/backends/cuda/models.hpp"
#include "spmd/backends/cuda/byte_stager.hpp"
#include "spmd/backends/cuda/check.hpp"
#include "spmd/runtime/error.hpp"
#include "spmd/backends/cuda/cuda_device.hpp"
#include "spmd/backends/cuda/device_buffer.hpp"
#include "spmd/backends/cuda/launch.hpp"
#include "spmd/backends/cuda/stream.hpp"

namespace spmd::backends::cuda {

// The device side of the models' interfaces (models/device_models.hpp), on a GPU.
using namespace spmd::models;

namespace {

namespace spec = logreg_detail;
using cuda::blocks_for;
using cuda::kThreadsPerBlock;

constexpr int kLanes = spec::kLanes;
constexpr std::int64_t kBlockRows = kLogregGradFloatBlockRows;
// Classes one gradient thread accumulates (registers); more classes take more threads.
constexpr int kGradClassGroup = 16;
// Per row, for the host's loss: the row max m, the exponential sum s and the label's logit.
constexpr int kRowStats = 3;
// Rows per predictor tile: bounds the GPU memory of a predictor (tile * features floats).
constexpr std::int64_t kPredictTileRows = 16384;

__device__ inline std::int64_t grid_start() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline std::int64_t grid_stride() { return static_cast<std::int64_t>(gridDim.x) * blockDim.x; }

// spec::max_like_x86.
__device__ inline float max_like_x86(float a, float b) { return a > b ? a : b; }

// spec::exp_spec, operation by operation.
__device__ inline float exp_spec(float t) {
  const float tc = max_like_x86(spec::kExpCutoff, t);
  const float scaled = __fmul_rn(tc, spec::kLog2e);
  const float n = __fsub_rn(__fadd_rn(scaled, spec::kRoundMagic), spec::kRoundMagic);
  float r = fmaf(-n, spec::kLn2Hi, tc);
  r = fmaf(-n, spec::kLn2Lo, r);
  float p = spec::kExpP0;
  p = fmaf(p, r, spec::kExpP1);
  p = fmaf(p, r, spec::kExpP2);
  p = fmaf(p, r, spec::kExpP3);
  p = fmaf(p, r, spec::kExpP4);
  p = fmaf(p, r, spec::kExpP5);
  const float r2 = __fmul_rn(r, r);
  p = fmaf(p, r2, r);
  p = __fadd_rn(p, 1.0f);
  const int exponent = ((isnan(n) ? 0 : static_cast<int>(n)) + 127) << 23;
  const float e = __fmul_rn(p, __int_as_float(exponent));
  return t < spec::kExpCutoff ? 0.0f : e;
}

// z[r * C + c] = the spec's logit of row r, class c: lane j accumulates
// fma(x[16k + j], WT[c][16k + j]) over k (x = 0 past F), then the 8-4-2-1 tree.
// WT [C][Fpad], zero for f >= F.
__global__ void logits_kernel(const float* X, std::int64_t rows, int features, int padded_features, const float* WT,
                              int classes, float* z) {
  const std::int64_t total = rows * classes;
  for (std::int64_t i = grid_start(); i < total; i += grid_stride()) {
    const std::int64_t r = i / classes;
    const int c = static_cast<int>(i - r * classes);
    const float* x = X + r * features;
    const float* w = WT + static_cast<std::int64_t>(c) * padded_features;
    float acc[kLanes];
#pragma unroll
    for (int j = 0; j < kLanes; ++j) acc[j] = 0.0f;
    for (int k = 0; k < padded_features; k += kLanes) {
#pragma unroll
      for (int j = 0; j < kLanes; ++j) {
        const int f = k + j;
        acc[j] = fmaf(f < features ? x[f] : 0.0f, w[f], acc[j]);
      }
    }
    float l1[8], l2[4];
#pragma unroll
    for (int j = 0; j < 8; ++j) l1[j] = __fadd_rn(acc[j], acc[j + 8]);
#pragma unroll
    for (int j = 0; j < 4; ++j) l2[j] = __fadd_rn(l1[j], l1[j + 4]);
    z[i] = __fadd_rn(__fadd_rn(l2[0], l2[2]), __fadd_rn(l2[1], l2[3]));
  }
}

// Per row: z <- softmax(z) - onehot(label) (the spec's softmax, in place) and
// stats[r] = (m, s, z[label]) for the host's loss.
__global__ void softmax_kernel(float* z, const std::int32_t* labels, std::int64_t rows, int classes, float* stats) {
  for (std::int64_t r = grid_start(); r < rows; r += grid_stride()) {
    float* zr = z + r * classes;
    const std::int32_t y = labels[r];
    const float z_label = zr[y];
    float m = zr[0];
    for (int c = 1; c < classes; ++c) m = max_like_x86(m, zr[c]);
    float s = 0.0f;
    for (int c = 0; c < classes; ++c) {
      const float e = exp_spec(__fsub_rn(zr[c], m));
      zr[c] = e;
      s = c == 0 ? e : __fadd_rn(s, e);
    }
    const float inverse = __fdiv_rn(1.0f, s);
    for (int c = 0; c < classes; ++c) zr[c] = __fsub_rn(__fmul_rn(zr[c], inverse), c == y ? 1.0f : 0.0f);
    stats[r * kRowStats + 0] = m;
    stats[r * kRowStats + 1] = s;
    stats[r * kRowStats + 2] = z_label;
  }
}

// Geometry of the float gradient blocks: chunk k of chunk_rows rows (the last shorter)
// has blocks_per_chunk blocks of up to kBlockRows rows counted from the chunk's first row;
// blocks past the chunk's end are empty.
struct BlockGeometry {
  std::int64_t rows, chunk_rows, blocks_per_chunk, blocks;
};

// block_grads[(b * C + c) * F + f] = sum over block b's rows in order of fma(d[r][c],
// x[r][f], .) in float, from 0.
__global__ void block_gradient_kernel(const float* X, const float* D, BlockGeometry geo, int features, int classes,
                                      float* block_grads) {
  const int groups = (classes + kGradClassGroup - 1) / kGradClassGroup;
  const std::int64_t total = geo.blocks * groups * features;
  for (std::int64_t i = grid_start(); i < total; i += grid_stride()) {
    const int f = static_cast<int>(i % features);
    const std::int64_t t = i / features;
    const int group = static_cast<int>(t % groups);
    const std::int64_t b = t / groups;
    const std::int64_t k = b / geo.blocks_per_chunk, j = b - k * geo.blocks_per_chunk;
    const std::int64_t chunk_first = k * geo.chunk_rows;
    const std::int64_t chunk_len = min(geo.chunk_rows, geo.rows - chunk_first);
    const std::int64_t first = chunk_first + j * kBlockRows;
    const std::int64_t end = chunk_first + min(chunk_len, (j + 1) * kBlockRows);
    const int c0 = group * kGradClassGroup;
    const int nc = min(kGradClassGroup, classes - c0);
    float acc[kGradClassGroup];
#pragma unroll
    for (int cc = 0; cc < kGradClassGroup; ++cc) acc[cc] = 0.0f;
    for (std::int64_t r = first; r < end; ++r) {
      const float x = X[r * features + f];
      const float* d = D + r * classes + c0;
#pragma unroll
      for (int cc = 0; cc < kGradClassGroup; ++cc)
        if (cc < nc) acc[cc] = fmaf(d[cc], x, acc[cc]);
    }
#pragma unroll
    for (int cc = 0; cc < kGradClassGroup; ++cc)
      if (cc < nc) block_grads[(b * classes + c0 + cc) * features + f] = acc[cc];
  }
}

// out[k * record + 1 + f * C + c] = sum over chunk k's blocks, in block order, of
// (double) block_grads[block][c][f], from 0.
__global__ void chunk_gradient_kernel(const float* block_grads, std::int64_t chunks, std::int64_t blocks_per_chunk,
                                      int features, int classes, std::int64_t record, double* out) {
  const std::int64_t fc = static_cast<std::int64_t>(features) * classes;
  const std::int64_t total = chunks * fc;
  for (std::int64_t i = grid_start(); i < total; i += grid_stride()) {
    const std::int64_t k = i / fc;
    const std::int64_t e = i - k * fc;  // c * F + f: consecutive threads read consecutive floats
    const int c = static_cast<int>(e / features), f = static_cast<int>(e % features);
    const float* g = block_grads + k * blocks_per_chunk * fc + e;
    double s = 0.0;
    for (std::int64_t b = 0; b < blocks_per_chunk; ++b) s += static_cast<double>(g[b * fc]);
    out[k * record + 1 + static_cast<std::int64_t>(f) * classes + c] = s;
  }
}

void check_shape(int features, int classes, const char* what) {
  if (features < 1 || classes < 1)
    throw Error(std::string(what) + ": needs features >= 1 and classes >= 1, got features = " +
                std::to_string(features) + ", classes = " + std::to_string(classes));
}

// W [F, C] (host) -> WT [C][Fpad] on the GPU, via the pinned staging buffer (free on
// entry; the caller synchronises before reusing it).
void upload_transposed(const float* W, int features, int classes, cuda::PinnedBuffer<float>& staging,
                       cuda::DeviceBuffer<float>& WT, cudaStream_t stream) {
  const int padded = spec::round_up(features, kLanes);
  float* wt = staging.data();
  for (int c = 0; c < classes; ++c) {
    float* row = wt + static_cast<std::size_t>(c) * padded;
    for (int f = 0; f < features; ++f) row[f] = W[static_cast<std::size_t>(f) * classes + c];
    std::fill(row + features, row + padded, 0.0f);
  }
  WT.upload(wt, static_cast<std::size_t>(classes) * padded, stream);
}

void launch_logits(const float* X, std::int64_t rows, int features, const float* WT, int classes, float* z,
                   cudaStream_t stream) {
  logits_kernel<<<blocks_for(rows * classes), kThreadsPerBlock, 0, stream>>>(
      X, rows, features, spec::round_up(features, kLanes), WT, classes, z);
  SPMD_CHECK_CUDA_LAUNCH("logreg logits kernel");
}

std::size_t transposed_size(int features, int classes) {
  return static_cast<std::size_t>(classes) * spec::round_up(features, kLanes);
}

class CudaLogregShard final : public LogregShard {
 public:
  CudaLogregShard(const runtime::DeviceInfo& device, const float* X, const std::int32_t* labels, std::int64_t rows,
                  int features, int classes, std::int64_t chunk_rows)
      : ordinal_((cuda::use_cuda_device(device, "CUDA logreg shard"), device.ordinal)),
        features_(features),
        classes_(classes),
        record_(static_cast<std::int64_t>(logreg_partials_size(features, classes))),
        chunks_((rows + chunk_rows - 1) / chunk_rows),
        geometry_{rows, chunk_rows, (std::min(chunk_rows, rows) + kBlockRows - 1) / kBlockRows, 0},
        X_(static_cast<std::size_t>(rows) * features, "logreg rows X"),
        labels_(static_cast<std::size_t>(rows), "logreg labels"),
        WT_(transposed_size(features, classes), "logreg weights (transposed)"),
        Z_(static_cast<std::size_t>(rows) * classes, "logreg logits / softmax residuals"),
        stats_(static_cast<std::size_t>(rows) * kRowStats, "logreg per-row softmax statistics"),
        block_grads_(static_cast<std::size_t>(chunks_ * geometry_.blocks_per_chunk) * features * classes,
                     "logreg per-block gradients"),
        out_(static_cast<std::size_t>(chunks_ * record_), "logreg chunk partials"),
        WT_host_(transposed_size(features, classes), "logreg weight staging"),
        stats_host_(static_cast<std::size_t>(rows) * kRowStats, "logreg statistics staging") {
    geometry_.blocks = chunks_ * geometry_.blocks_per_chunk;
    // Labels are checked here, once, rather than on every evaluation on the GPU.
    for (std::int64_t i = 0; i < rows; ++i)
      if (labels[i] < 0 || labels[i] >= classes)
        throw Error("logreg: label " + std::to_string(labels[i]) + " of row " + std::to_string(i) +
                    " (of this device's rows) is outside [0, " + std::to_string(classes) + ")");
    const cudaStream_t s = stream_.get();
    X_.upload(X, X_.size(), s);
    labels_.upload(labels, labels_.size(), s);
    out_.zero(s);  // the loss entries are never written on the GPU (the host fills them)
    // The caller's X may go once the copies are done.
    stream_.synchronize_copies("copying the logreg rows to the GPU");
  }

  ~CudaLogregShard() override { cuda::set_current_gpu_noexcept(ordinal_); }

  void chunk_partials(const float* W, double* out) override {
    if (chunks_ == 0) return;
    cuda::set_current_gpu(ordinal_);
    const cudaStream_t s = stream_.get();
    const std::int64_t rows = geometry_.rows;
    upload_transposed(W, features_, classes_, WT_host_, WT_, s);
    launch_logits(X_.data(), rows, features_, WT_.data(), classes_, Z_.data(), s);
    softmax_kernel<<<blocks_for(rows), kThreadsPerBlock, 0, s>>>(Z_.data(), labels_.data(), rows, classes_,
                                                                 stats_.data());
    SPMD_CHECK_CUDA_LAUNCH("logreg softmax kernel");
    const std::int64_t groups = (classes_ + kGradClassGroup - 1) / kGradClassGroup;
    block_gradient_kernel<<<blocks_for(geometry_.blocks * groups * features_), kThreadsPerBlock, 0, s>>>(
        X_.data(), Z_.data(), geometry_, features_, classes_, block_grads_.data());
    SPMD_CHECK_CUDA_LAUNCH("logreg block gradient kernel");
    chunk_gradient_kernel<<<blocks_for(chunks_ * features_ * classes_), kThreadsPerBlock, 0, s>>>(
        block_grads_.data(), chunks_, geometry_.blocks_per_chunk, features_, classes_, record_, out_.data());
    SPMD_CHECK_CUDA_LAUNCH("logreg chunk gradient kernel");
    stats_.download(stats_host_.data(), stats_.size(), s);
    out_.download(out, out_.size(), s);  // out[k * record] (the losses) is overwritten below
    stream_.synchronize("computing the logreg chunk partials on the GPU");
    // The losses, as the CPU kernels: each row's in double with this host's std::log,
    // added in row order from 0.
    const float* st = stats_host_.data();
    for (std::int64_t k = 0; k < chunks_; ++k) {
      const std::int64_t first = k * geometry_.chunk_rows, end = std::min(rows, first + geometry_.chunk_rows);
      double loss = 0.0;
      for (std::int64_t r = first; r < end; ++r) {
        const float* row = st + r * kRowStats;
        loss += (static_cast<double>(row[0]) + std::log(static_cast<double>(row[1]))) - static_cast<double>(row[2]);
      }
      out[k * record_] = loss;
    }
  }

  int ordinal_;
  int features_, classes_;
  std::int64_t record_;  // doubles per chunk: 1 + F * C
  std::int64_t chunks_;
  BlockGeometry geometry_;
  cuda::Stream stream_;
  cuda::DeviceBuffer<float> X_;              // [rows, F]
  cuda::DeviceBuffer<std::int32_t> labels_;  // [rows]
  cuda::DeviceBuffer<float> WT_;             // [C, Fpad]
  cuda::DeviceBuffer<float> Z_;              // [rows, C]: logits, then P - Y
  cuda::DeviceBuffer<float> stats_;          // [rows, 3]: m, s, z_label
  cuda::DeviceBuffer<float> block_grads_;    // [chunks * blocks_per_chunk, C, F]
  cuda::DeviceBuffer<double> out_;           // [chunks, 1 + F * C] (loss entries stay 0)
  cuda::PinnedBuffer<float> WT_host_;
  cuda::PinnedBuffer<float> stats_host_;
};

class CudaLogregPredictor final : public DevicePredictor {
 public:
  CudaLogregPredictor(const runtime::DeviceInfo& device, const LogregParameters& p, std::int64_t max_rows)
      : ordinal_((cuda::use_cuda_device(device, "CUDA logreg predictor"), device.ordinal)),
        features_(p.features),
        classes_(p.classes),
        max_rows_(max_rows),
        tile_rows_(std::clamp<std::int64_t>(max_rows, 1, kPredictTileRows)),
        bias_(p.bias),
        WT_(transposed_size(p.features, p.classes), "logreg weights (transposed)"),
        X_(static_cast<std::size_t>(tile_rows_) * p.features, "logreg predictor rows"),
        Z_(static_cast<std::size_t>(tile_rows_) * p.classes, "logreg predictor logits"),
        Z_host_(static_cast<std::size_t>(tile_rows_) * p.classes, "logreg predictor logits (host)") {
    cuda::PinnedBuffer<float> staging(transposed_size(p.features, p.classes), "logreg weight staging");
    upload_transposed(p.W.data(), p.features, p.classes, staging, WT_, stream_.get());
    stream_.synchronize_copies("copying the logreg weights to the GPU");
  }

  ~CudaLogregPredictor() override { cuda::set_current_gpu_noexcept(ordinal_); }

  void predict(const float* samples, std::int64_t rows, std::int32_t* classes_out, float* probs_out) override {
    check_rows(rows);
    if (rows == 0) return;
    cuda::set_current_gpu(ordinal_);
    for (std::int64_t first = 0; first < rows; first += tile_rows_) {
      const std::int64_t n = std::min(tile_rows_, rows - first);
      X_.upload(samples + first * features_, static_cast<std::size_t>(n * features_), stream_.get());
      finish_tile(first, n, classes_out, probs_out);
    }
  }

  bool decodes_bytes() const override { return true; }

  void predict_bytes(const std::uint8_t* samples, std::int64_t rows, const ByteTable& table,
                     std::int32_t* classes_out, float* probs_out) override {
    check_rows(rows);
    if (rows == 0) return;
    cuda::set_current_gpu(ordinal_);
    if (!stager_)  // made at the first byte batch (float data never needs it), then reused
      stager_.emplace(static_cast<std::size_t>(tile_rows_ * features_), "CUDA logreg predictor");
    stager_->run(samples, rows, features_, tile_rows_, table, X_.data(), stream_.get(),
                 [&](std::int64_t first, std::int64_t n) { finish_tile(first, n, classes_out, probs_out); });
  }

 private:
  void check_rows(std::int64_t rows) const {
    if (rows < 0 || rows > max_rows_)
      throw Error("CUDA logreg predictor: batch of " + std::to_string(rows) + " rows; it was made for max_rows = " +
                  std::to_string(max_rows_));
  }

  // Rows [first, first + n) of the batch are in X_ (or queued there on the stream): their
  // logits come back to the host, which picks the class and the probabilities with the CPU
  // predictor's own code (the same bits on every backend).
  void finish_tile(std::int64_t first, std::int64_t n, std::int32_t* classes_out, float* probs_out) {
    const cudaStream_t s = stream_.get();
    launch_logits(X_.data(), n, features_, WT_.data(), classes_, Z_.data(), s);
    Z_.download(Z_host_.data(), static_cast<std::size_t>(n * classes_), s);
    stream_.synchronize("predicting logreg classes on the GPU");
    logreg_logits_to_outputs(Z_host_.data(), n, classes_, classes_, bias_.empty() ? nullptr : bias_.data(),
                             classes_out + first, probs_out ? probs_out + first * classes_ : nullptr);
  }

  int ordinal_;
  int features_, classes_;
  std::int64_t max_rows_, tile_rows_;
  cuda::Stream stream_;
  std::vector<float> bias_;                          // [C] or empty
  cuda::DeviceBuffer<float> WT_;                   // [C, Fpad]
  cuda::DeviceBuffer<float> X_;                    // [tile, F]
  cuda::DeviceBuffer<float> Z_;                    // [tile, C]
  cuda::PinnedBuffer<float> Z_host_;               // [tile, C]
  std::optional<cuda::ByteStager> stager_;         // byte samples: tiles of [tile, F] bytes
};

}  // namespace

std::unique_ptr<LogregShard> make_logreg_shard_cuda(const runtime::DeviceInfo& device, const float* X,
                                                    const std::int32_t* labels, std::int64_t rows, int features,
                                                    int classes, std::int64_t chunk_rows) {
  check_shape(features, classes, "CUDA logreg shard");
  if (rows < 0 || chunk_rows < 1)
    throw Error("CUDA logreg shard: needs rows >= 0 and chunk_rows >= 1, got rows = " + std::to_string(rows) +
                ", chunk_rows = " + std::to_string(chunk_rows));
  return std::make_unique<CudaLogregShard>(device, X, labels, rows, features, classes, chunk_rows);
}

std::unique_ptr<DevicePredictor> make_logreg_predictor_cuda(const runtime::DeviceInfo& device,
                                                            const LogregParameters& parameters,
                                                            std::int64_t max_rows) {
  const auto& p = parameters;
  check_shape(p.features, p.classes, "CUDA logreg predictor");
  if (p.W.size() != static_cast<std::size_t>(p.features) * static_cast<std::size_t>(p.classes))
    throw Error("CUDA logreg predictor: W has " + std::to_string(p.W.size()) +
                " values, expected features * classes = " + std::to_string(static_cast<std::int64_t>(p.features) * p.classes));
  if (p.has_intercept() && p.bias.size() != static_cast<std::size_t>(p.classes))
    throw Error("CUDA logreg predictor: the intercept has " + std::to_string(p.bias.size()) + " values, expected " +
                std::to_string(p.classes));
  if (max_rows < 0) throw Error("CUDA logreg predictor: max_rows must be >= 0, got " + std::to_string(max_rows));
  return std::make_unique<CudaLogregPredictor>(device, parameters, max_rows);
}

}  // namespace spmd::backends::cuda
