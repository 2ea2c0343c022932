// Logistic regression on a GPU: the per-chunk partials of a device's rows (LogregShard) and
// the eval predictor. Both follow models/logreg.hpp's definitions; results agree with the
// CPU kernels to float rounding, not bitwise (cuBLAS sums in its own order).
//
// Partials of one evaluation, everything resident on the GPU:
//   Z = X W                       one GEMM over all rows (X read once)
//   Z <- softmax(Z) - onehot(y)   one thread per row; the row's loss in double
//   G_b = X_b^T Z_b               one strided-batched GEMM, b over blocks of
//                                 kLogregGradFloatBlockRows rows (float sums, as on the CPU)
//   out[k] = (sum of chunk k's row losses, sum of its blocks' G_b in double)
// Chunks are laid out padded to whole blocks (zero rows, label -1), so every block has the
// same shape and no block straddles two chunks. Every sum has a fixed order: the results
// are the same bits run after run.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "spmd/models/device_models.hpp"
#include "spmd/models/logreg.hpp"
#include "spmd/models/logreg_cuda.hpp"
#include "spmd/runtime/cuda_check.hpp"
#include "spmd/runtime/error.hpp"
#include "spmd/tensor/cuda_device.hpp"
#include "spmd/tensor/device_buffer.hpp"
#include "spmd/tensor/gemm.hpp"
#include "spmd/tensor/launch.hpp"
#include "spmd/tensor/stream.hpp"

namespace spmd::models {

namespace {

using tensor::blocks_for;
using tensor::kThreadsPerBlock;

// The largest number of rows one logits GEMM takes (cuBLAS dimensions are int).
constexpr std::int64_t kMaxGemmRows = std::int64_t{1} << 30;
// Rows per predictor tile: bounds the GPU memory of a predictor (tile * features floats).
constexpr std::int64_t kPredictTileRows = 16384;
// Marks padding rows in the device label array.
constexpr std::int32_t kPaddingLabel = -1;

__device__ inline std::int64_t grid_start() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline std::int64_t grid_stride() { return static_cast<std::int64_t>(gridDim.x) * blockDim.x; }

// Per row r of z [rows, classes]: z_r <- softmax(z_r) - onehot(labels[r]) and row_loss[r] =
// logsumexp(z_r) - z_r[label], in double from the float max and sum (stable: the exponents
// are <= 0). Padding rows (label < 0) get zeros.
__global__ void softmax_residual_kernel(float* z, const std::int32_t* labels, std::int64_t rows, int classes,
                                        double* row_loss) {
  for (std::int64_t r = grid_start(); r < rows; r += grid_stride()) {
    float* zr = z + r * classes;
    const std::int32_t y = labels[r];
    if (y < 0) {
      for (int c = 0; c < classes; ++c) zr[c] = 0.0f;
      row_loss[r] = 0.0;
      continue;
    }
    float m = zr[0];
    for (int c = 1; c < classes; ++c) m = zr[c] > m ? zr[c] : m;
    float s = 0.0f;
    for (int c = 0; c < classes; ++c) s += expf(zr[c] - m);
    row_loss[r] = (static_cast<double>(m) + log(static_cast<double>(s))) - static_cast<double>(zr[y]);
    const float inv_s = 1.0f / s;
    for (int c = 0; c < classes; ++c) zr[c] = expf(zr[c] - m) * inv_s - (c == y ? 1.0f : 0.0f);
  }
}

// out[k * record] = sum of row_loss over chunk k's chunk_pad rows; one block per chunk, a
// fixed tree over the block's threads (blockDim.x == kThreadsPerBlock, a power of two).
__global__ void chunk_loss_kernel(const double* row_loss, std::int64_t chunks, std::int64_t chunk_pad,
                                  std::int64_t record, double* out) {
  __shared__ double partial[kThreadsPerBlock];
  for (std::int64_t k = blockIdx.x; k < chunks; k += gridDim.x) {
    const double* rl = row_loss + k * chunk_pad;
    double s = 0.0;
    for (std::int64_t i = threadIdx.x; i < chunk_pad; i += blockDim.x) s += rl[i];
    partial[threadIdx.x] = s;
    __syncthreads();
    for (unsigned width = blockDim.x / 2; width > 0; width /= 2) {
      if (threadIdx.x < width) partial[threadIdx.x] += partial[threadIdx.x + width];
      __syncthreads();
    }
    if (threadIdx.x == 0) out[k * record] = partial[0];
    __syncthreads();  // partial[0] is read before the next chunk overwrites the array
  }
}

// out[k * record + 1 + e] = sum over chunk k's blocks, in block order, of the float block
// gradients block_grads[block][e] (e < fc = F * C), in double.
__global__ void chunk_gradient_kernel(const float* block_grads, std::int64_t chunks, std::int64_t blocks_per_chunk,
                                      std::int64_t fc, std::int64_t record, double* out) {
  const std::int64_t total = chunks * fc;
  for (std::int64_t i = grid_start(); i < total; i += grid_stride()) {
    const std::int64_t k = i / fc;
    const std::int64_t e = i - k * fc;
    const float* g = block_grads + k * blocks_per_chunk * fc + e;
    double s = 0.0;
    for (std::int64_t b = 0; b < blocks_per_chunk; ++b) s += static_cast<double>(g[b * fc]);
    out[k * record + 1 + e] = s;
  }
}

// classes_out[r] = the first index of the largest logit of row r (strict >, as
// logreg_predict).
__global__ void argmax_kernel(const float* z, std::int64_t rows, int classes, std::int32_t* classes_out) {
  for (std::int64_t r = grid_start(); r < rows; r += grid_stride()) {
    const float* zr = z + r * classes;
    int best = 0;
    for (int c = 1; c < classes; ++c)
      if (zr[c] > zr[best]) best = c;
    classes_out[r] = best;
  }
}

void check_shape(int features, int classes, const char* what) {
  if (features < 1 || classes < 1)
    throw Error(std::string(what) + ": needs features >= 1 and classes >= 1, got features = " +
                std::to_string(features) + ", classes = " + std::to_string(classes));
}

// Z[rows, C] = X[rows, F] W[F, C], in slabs that fit cuBLAS's int dimensions.
void logits_gemm(cublasHandle_t handle, const float* X, std::int64_t rows, int features, const float* W, int classes,
                 float* Z) {
  for (std::int64_t first = 0; first < rows; first += kMaxGemmRows) {
    const std::int64_t n = std::min(kMaxGemmRows, rows - first);
    tensor::sgemm_row_major(handle, {false, false, n, classes, features, features, classes, classes}, 1.0f,
                            X + first * features, W, 0.0f, Z + first * classes, "logreg logits X W");
  }
}

class CudaLogregShard final : public LogregShard {
 public:
  CudaLogregShard(const runtime::DeviceInfo& device, const float* X, const std::int32_t* labels, std::int64_t rows,
                  int features, int classes, std::int64_t chunk_rows)
      : ordinal_((tensor::use_cuda_device(device, "CUDA logreg shard"), device.cuda_ordinal)),
        features_(features),
        classes_(classes),
        record_(static_cast<std::int64_t>(logreg_partials_size(features, classes))),
        chunk_rows_(chunk_rows),
        chunks_((rows + chunk_rows - 1) / chunk_rows),
        // Chunks of more than one block are padded to whole blocks; a chunk of at most one
        // block is one (short) block, as on the CPU, where the float sums restart per chunk.
        block_rows_(std::min(chunk_rows, kLogregGradFloatBlockRows)),
        chunk_pad_((chunk_rows + block_rows_ - 1) / block_rows_ * block_rows_),
        padded_rows_(chunks_ * chunk_pad_),
        cublas_(stream_.get()),
        X_(static_cast<std::size_t>(padded_rows_) * features, "logreg rows X"),
        labels_(static_cast<std::size_t>(padded_rows_), "logreg labels"),
        W_(static_cast<std::size_t>(features) * classes, "logreg weights W"),
        Z_(static_cast<std::size_t>(padded_rows_) * classes, "logreg logits / softmax residuals"),
        row_loss_(static_cast<std::size_t>(padded_rows_), "logreg per-row losses"),
        block_grads_(static_cast<std::size_t>(padded_rows_ / block_rows_) * features * classes, "logreg per-block gradients"),
        out_(static_cast<std::size_t>(chunks_ * record_), "logreg chunk partials") {
    const cudaStream_t s = stream_.get();
    const std::int64_t F = features;
    // Labels are checked here, once, rather than on every evaluation on the GPU.
    std::vector<std::int32_t> padded_labels(static_cast<std::size_t>(padded_rows_), kPaddingLabel);
    for (std::int64_t k = 0; k < chunks_; ++k) {
      const std::int64_t first = k * chunk_rows_, n = std::min(chunk_rows_, rows - first);
      for (std::int64_t i = 0; i < n; ++i) {
        const std::int32_t y = labels[first + i];
        if (y < 0 || y >= classes)
          throw Error("logreg: label " + std::to_string(y) + " of row " + std::to_string(first + i) +
                      " (of this device's rows) is outside [0, " + std::to_string(classes) + ")");
        padded_labels[static_cast<std::size_t>(k * chunk_pad_ + i)] = y;
      }
    }
    labels_.upload(padded_labels.data(), padded_labels.size(), s);
    if (chunk_pad_ == chunk_rows_) {
      // Only the end of the last chunk is padding: one copy.
      X_.upload(X, static_cast<std::size_t>(rows * F), s);
      zero_padding_after(rows * F);
    } else {
      X_.zero(s);
      for (std::int64_t k = 0; k < chunks_; ++k) {
        const std::int64_t first = k * chunk_rows_, n = std::min(chunk_rows_, rows - first);
        X_.upload(X + first * F, static_cast<std::size_t>(n * F), s, static_cast<std::size_t>(k * chunk_pad_ * F));
      }
    }
    // The caller's X and the label vector may go once the copies are done.
    stream_.synchronize("copying the logreg rows to the GPU");
  }

  ~CudaLogregShard() override { tensor::set_current_gpu_noexcept(ordinal_); }

  void chunk_partials(const float* W, double* out) override {
    if (chunks_ == 0) return;
    tensor::set_current_gpu(ordinal_);
    const cudaStream_t s = stream_.get();
    const std::int64_t F = features_, C = classes_, FC = F * C;
    W_.upload(W, static_cast<std::size_t>(FC), s);
    logits_gemm(cublas_.get(), X_.data(), padded_rows_, features_, W_.data(), classes_, Z_.data());
    softmax_residual_kernel<<<blocks_for(padded_rows_), kThreadsPerBlock, 0, s>>>(Z_.data(), labels_.data(),
                                                                                   padded_rows_, classes_,
                                                                                   row_loss_.data());
    SPMD_CHECK_CUDA_LAUNCH("logreg softmax kernel");
    // G_b[F, C] = X_b^T Z_b for every block b of block_rows_ rows.
    tensor::sgemm_row_major_strided_batched(cublas_.get(), {true, false, F, C, block_rows_, F, C, C}, 1.0f, X_.data(),
                                            block_rows_ * F, Z_.data(), block_rows_ * C, 0.0f, block_grads_.data(), FC,
                                            padded_rows_ / block_rows_, "logreg block gradients X_b^T (P - Y)_b");
    chunk_loss_kernel<<<static_cast<unsigned>(std::min<std::int64_t>(chunks_, tensor::kMaxBlocks)), kThreadsPerBlock,
                        0, s>>>(row_loss_.data(), chunks_, chunk_pad_, record_, out_.data());
    SPMD_CHECK_CUDA_LAUNCH("logreg chunk loss kernel");
    chunk_gradient_kernel<<<blocks_for(chunks_ * FC), kThreadsPerBlock, 0, s>>>(
        block_grads_.data(), chunks_, chunk_pad_ / block_rows_, FC, record_, out_.data());
    SPMD_CHECK_CUDA_LAUNCH("logreg chunk gradient kernel");
    out_.download(out, out_.size(), s);
    stream_.synchronize("computing the logreg chunk partials on the GPU");
  }

 private:
  // Zeroes X_ from float first_float to the end (the last chunk's padding rows).
  void zero_padding_after(std::int64_t first_float) {
    const std::int64_t tail = padded_rows_ * features_ - first_float;
    if (tail > 0)
      SPMD_CHECK_CUDA(cudaMemsetAsync(X_.data() + first_float, 0, static_cast<std::size_t>(tail) * sizeof(float),
                                      stream_.get()),
                      "zeroing the padding rows of the last logreg chunk");
  }

  int ordinal_;
  int features_, classes_;
  std::int64_t record_;       // doubles per chunk: 1 + F * C
  std::int64_t chunk_rows_;   // rows per chunk (the last one shorter)
  std::int64_t chunks_;
  std::int64_t block_rows_;   // rows per float gradient block
  std::int64_t chunk_pad_;    // rows per chunk in the device layout, a multiple of block_rows_
  std::int64_t padded_rows_;  // chunks_ * chunk_pad_
  tensor::Stream stream_;
  tensor::CublasHandle cublas_;
  tensor::DeviceBuffer<float> X_;               // [padded_rows, F], padding rows zero
  tensor::DeviceBuffer<std::int32_t> labels_;   // [padded_rows], padding rows -1
  tensor::DeviceBuffer<float> W_;               // [F, C]
  tensor::DeviceBuffer<float> Z_;               // [padded_rows, C]: logits, then P - Y
  tensor::DeviceBuffer<double> row_loss_;       // [padded_rows]
  tensor::DeviceBuffer<float> block_grads_;     // [padded_rows / block_rows, F, C]
  tensor::DeviceBuffer<double> out_;            // [chunks, 1 + F * C]
};

class CudaLogregPredictor final : public DevicePredictor {
 public:
  CudaLogregPredictor(const runtime::DeviceInfo& device, const std::vector<float>& W, int features, int classes,
                      std::int64_t max_rows)
      : ordinal_((tensor::use_cuda_device(device, "CUDA logreg predictor"), device.cuda_ordinal)),
        features_(features),
        classes_(classes),
        max_rows_(max_rows),
        tile_rows_(std::clamp<std::int64_t>(max_rows, 1, kPredictTileRows)),
        cublas_(stream_.get()),
        W_(W.size(), "logreg weights W"),
        X_(static_cast<std::size_t>(tile_rows_) * features, "logreg predictor rows"),
        Z_(static_cast<std::size_t>(tile_rows_) * classes, "logreg predictor logits"),
        classes_out_(static_cast<std::size_t>(tile_rows_), "logreg predicted classes") {
    W_.upload(W.data(), W.size(), stream_.get());
    stream_.synchronize("copying the logreg weights to the GPU");
  }

  ~CudaLogregPredictor() override { tensor::set_current_gpu_noexcept(ordinal_); }

  void predict(const float* samples, std::int64_t rows, std::int32_t* classes_out) override {
    if (rows < 0 || rows > max_rows_)
      throw Error("CUDA logreg predictor: batch of " + std::to_string(rows) + " rows; it was made for max_rows = " +
                  std::to_string(max_rows_));
    if (rows == 0) return;
    tensor::set_current_gpu(ordinal_);
    const cudaStream_t s = stream_.get();
    // Tiles queue back to back: the stream orders each tile's upload after the previous
    // tile's kernels, so the buffers can be reused without waiting.
    for (std::int64_t first = 0; first < rows; first += tile_rows_) {
      const std::int64_t n = std::min(tile_rows_, rows - first);
      X_.upload(samples + first * features_, static_cast<std::size_t>(n * features_), s);
      logits_gemm(cublas_.get(), X_.data(), n, features_, W_.data(), classes_, Z_.data());
      argmax_kernel<<<blocks_for(n), kThreadsPerBlock, 0, s>>>(Z_.data(), n, classes_, classes_out_.data());
      SPMD_CHECK_CUDA_LAUNCH("logreg argmax kernel");
      classes_out_.download(classes_out + first, static_cast<std::size_t>(n), s);
    }
    stream_.synchronize("predicting logreg classes on the GPU");
  }

 private:
  int ordinal_;
  int features_, classes_;
  std::int64_t max_rows_, tile_rows_;
  tensor::Stream stream_;
  tensor::CublasHandle cublas_;
  tensor::DeviceBuffer<float> W_;                    // [F, C]
  tensor::DeviceBuffer<float> X_;                    // [tile, F]
  tensor::DeviceBuffer<float> Z_;                    // [tile, C]
  tensor::DeviceBuffer<std::int32_t> classes_out_;   // [tile]
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
                                                            const std::vector<float>& W, int features, int classes,
                                                            std::int64_t max_rows) {
  check_shape(features, classes, "CUDA logreg predictor");
  if (W.size() != static_cast<std::size_t>(features) * static_cast<std::size_t>(classes))
    throw Error("CUDA logreg predictor: W has " + std::to_string(W.size()) + " values, expected features * classes = " +
                std::to_string(static_cast<std::int64_t>(features) * classes));
  if (max_rows < 0) throw Error("CUDA logreg predictor: max_rows must be >= 0, got " + std::to_string(max_rows));
  return std::make_unique<CudaLogregPredictor>(device, W, features, classes, max_rows);
}

}  // namespace spmd::models
