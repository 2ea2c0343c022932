#pragma once
// The CUDA implementations of the op library's kinds (spmd/ops/op.hpp), registered in this
// module by the op files beside this header (one SPMD_REGISTER_CUDA_OP line each). Same
// semantics and fusions as the CPU ops (spmd/ops/cpu_op.hpp) and the same order of
// operations, but every op runs over a whole batch: [rows, ...] NHWC, rows back to back.
// Nothing depends on timing (reductions by fixed trees, gathers instead of atomics).
// Only included from .cu files of the CUDA module.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>

#include "spmd/backends/cuda/check.hpp"
#include "spmd/backends/cuda/device_buffer.hpp"
#include "spmd/backends/cuda/gemm.hpp"
#include "spmd/backends/cuda/launch.hpp"
#include "spmd/ops/op.hpp"

namespace spmd::backends::cuda {

__device__ inline std::int64_t grid_start() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline std::int64_t grid_stride() { return static_cast<std::int64_t>(gridDim.x) * blockDim.x; }

// Whether a kernel whose every buffer index lies below `largest` may do its index arithmetic
// in 32 bits (a grid stride past the end included): a 64-bit integer division is a long
// routine on a GPU, a 32-bit one a handful of instructions, and the element-wise kernels
// take several per element to find a row, pixel and channel.
inline bool fits_32bit_index(std::int64_t largest) {
  return largest + kMaxBlocks * kThreadsPerBlock < (std::int64_t{1} << 32);
}

// Runs launch(std::uint32_t{}) or launch(std::int64_t{}): the index type for `largest`.
template <class Launch>
void with_index_type(std::int64_t largest, Launch&& launch) {
  if (fits_32bit_index(largest))
    launch(std::uint32_t{});
  else
    launch(std::int64_t{});
}

// The (image, row, column, channel) of flat index i into an [n, h, w, c] tensor.
template <class Index>
struct NhwcIndex {
  Index b, y, x, ch;
};
template <class Index>
__device__ inline NhwcIndex<Index> nhwc_index(Index i, Index h, Index w, Index c) {
  const Index pixel = i / c, q = pixel / w, b = q / h;
  return {b, q - b * h, pixel - q * w, i - pixel * c};
}

struct CudaContext {
  cudaStream_t stream;
  cublasHandle_t cublas;
};

// What an implementation is made for: the rows of its largest pass, and of its largest
// training step (0: forward passes only; no gradient buffers are made).
struct CudaOpLimits {
  std::int64_t max_rows;
  bool model_input;  // its input is the model's input (no input gradient is ever wanted)
  std::int64_t max_train_rows = 0;
};

// One call: rows of the batch; in, out (post-ReLU when fused); dout, din their gradients
// (din == nullptr: not wanted). params, grads: the op's tensors in OpShape::params order.
struct CudaIo {
  std::int64_t rows = 0;
  const float* in = nullptr;
  float* out = nullptr;
  const float* dout = nullptr;
  float* din = nullptr;
  const float* const* params = nullptr;
  float* const* grads = nullptr;
  bool mask_input_relu = false;  // fold the input's ReLU backward into din
};

class CudaOp {
 public:
  virtual ~CudaOp() = default;
  virtual bool output_relu() const { return false; }
  virtual void forward(const CudaContext& ctx, const CudaIo& io) = 0;
  // Writes every float of its gradients and of din.
  virtual void backward(const CudaContext& ctx, const CudaIo& io) = 0;
};

// A model's loss: probs [rows, classes] for every row; with labels (checked on the host),
// row_loss [rows] (double) and dlogits = d(loss_sum * scale)/dlogits.
class CudaLossOp {
 public:
  virtual ~CudaLossOp() = default;
  virtual void loss(const CudaContext& ctx, const float* logits, const std::int32_t* labels, std::int64_t rows,
                    float scale, float* probs, double* row_loss, float* dlogits) = 0;
};

using CudaFactory = std::unique_ptr<CudaOp> (*)(const ops::OpSpec&, const ops::OpShape&, const CudaOpLimits&);
using CudaLossFactory = std::unique_ptr<CudaLossOp> (*)(const ops::OpSpec&, const ops::OpShape&);

// spmd::Error naming the kind when this module has no implementation of it.
std::unique_ptr<CudaOp> make_cuda_op(const ops::OpSpec& spec, const ops::OpShape& shape, const CudaOpLimits& limits);
std::unique_ptr<CudaLossOp> make_cuda_loss(const ops::OpSpec& spec, const ops::OpShape& shape);
bool register_cuda_op(const char* kind, CudaFactory fn);
bool register_cuda_loss(const char* kind, CudaLossFactory fn);

// Kernels more than one op uses (common.cu).
// x [rows, cols] += bias [cols], then ReLU when relu.
void add_bias(const CudaContext& ctx, float* x, std::int64_t rows, int cols, const float* bias, bool relu);
// sums[j] = sum over rows of x[r * cols + j], for rows <= max_rows: blocks of rows summed with
// coalesced reads and a fixed tree, then the blocks' sums in order, or by a warp per column and
// a fixed tree when there are many blocks (the same bits every run).
class ColumnSums {
 public:
  ColumnSums(std::int64_t max_rows, int cols);
  void run(const CudaContext& ctx, const float* x, std::int64_t rows, float* sums);

 private:
  int cols_;
  DeviceBuffer<float> partial_;  // [blocks, cols]
};
// d [n] <- 0 where the post-ReLU activation act [n] is not positive.
void relu_mask(const CudaContext& ctx, float* d, const float* act, std::int64_t n);

}  // namespace spmd::backends::cuda

#define SPMD_CUDA_OPS_CONCAT2(a, b) a##b
#define SPMD_CUDA_OPS_CONCAT(a, b) SPMD_CUDA_OPS_CONCAT2(a, b)
#define SPMD_REGISTER_CUDA_OP(kind, type)                                                                   \
  [[maybe_unused]] static const bool SPMD_CUDA_OPS_CONCAT(spmd_cuda_op_, __LINE__) =                        \
      ::spmd::backends::cuda::register_cuda_op(kind, [](const ::spmd::ops::OpSpec& s, const ::spmd::ops::OpShape& sh, \
                                                        const ::spmd::backends::cuda::CudaOpLimits& l)      \
                                                         -> std::unique_ptr<::spmd::backends::cuda::CudaOp> { \
        return std::make_unique<type>(s, sh, l);                                                           \
      })
#define SPMD_REGISTER_CUDA_LOSS(kind, type)                                                                 \
  [[maybe_unused]] static const bool SPMD_CUDA_OPS_CONCAT(spmd_cuda_loss_, __LINE__) =                      \
      ::spmd::backends::cuda::register_cuda_loss(kind, [](const ::spmd::ops::OpSpec& s, const ::spmd::ops::OpShape& sh) \
                                                           -> std::unique_ptr<::spmd::backends::cuda::CudaLossOp> { \
        return std::make_unique<type>(s, sh);                                                              \
      })
