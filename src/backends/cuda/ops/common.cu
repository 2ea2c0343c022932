#include "cuda_op.hpp"
#include "spmd/ops/registry.hpp"

namespace spmd::backends::cuda {
namespace {

template <class Fn>
ops::Registry<Fn>& table() {
  static ops::Registry<Fn> t;
  return t;
}

__global__ void add_bias_kernel(float* x, std::int64_t rows, int cols, const float* bias, bool relu) {
  const std::int64_t total = rows * cols;
  for (std::int64_t i = grid_start(); i < total; i += grid_stride()) {
    const float v = x[i] + bias[i % cols];
    x[i] = relu ? (v > 0.0f ? v : 0.0f) : v;
  }
}

// One block per column (grid stride over columns), a fixed tree over the block's threads
// (blockDim.x == kThreadsPerBlock).
__global__ void column_sums_kernel(const float* x, std::int64_t rows, int cols, float* sums) {
  __shared__ float partial[kThreadsPerBlock];
  for (int j = blockIdx.x; j < cols; j += gridDim.x) {
    float s = 0.0f;
    for (std::int64_t r = threadIdx.x; r < rows; r += blockDim.x) s += x[r * cols + j];
    partial[threadIdx.x] = s;
    __syncthreads();
    for (unsigned width = blockDim.x / 2; width > 0; width /= 2) {
      if (threadIdx.x < width) partial[threadIdx.x] += partial[threadIdx.x + width];
      __syncthreads();
    }
    if (threadIdx.x == 0) sums[j] = partial[0];
    __syncthreads();  // partial[0] is read before the next column overwrites the array
  }
}

__global__ void relu_mask_kernel(float* d, const float* act, std::int64_t n) {
  for (std::int64_t i = grid_start(); i < n; i += grid_stride())
    if (!(act[i] > 0.0f)) d[i] = 0.0f;
}

}  // namespace

std::unique_ptr<CudaOp> make_cuda_op(const ops::OpSpec& spec, const ops::OpShape& shape, const CudaOpLimits& limits) {
  return table<CudaFactory>().find(spec.kind, "CUDA implementation")(spec, shape, limits);
}
std::unique_ptr<CudaLossOp> make_cuda_loss(const ops::OpSpec& spec, const ops::OpShape& shape) {
  return table<CudaLossFactory>().find(spec.kind, "CUDA loss implementation")(spec, shape);
}
bool register_cuda_op(const char* kind, CudaFactory fn) { return table<CudaFactory>().add(kind, fn); }
bool register_cuda_loss(const char* kind, CudaLossFactory fn) {
  return table<CudaLossFactory>().add(kind, fn);
}

void add_bias(const CudaContext& ctx, float* x, std::int64_t rows, int cols, const float* bias, bool relu) {
  add_bias_kernel<<<blocks_for(rows * cols), kThreadsPerBlock, 0, ctx.stream>>>(x, rows, cols, bias, relu);
  SPMD_CHECK_CUDA_LAUNCH("CNN bias kernel");
}

void column_sums(const CudaContext& ctx, const float* x, std::int64_t rows, int cols, float* sums) {
  column_sums_kernel<<<static_cast<unsigned>(cols), kThreadsPerBlock, 0, ctx.stream>>>(x, rows, cols, sums);
  SPMD_CHECK_CUDA_LAUNCH("CNN bias gradient kernel");
}

void relu_mask(const CudaContext& ctx, float* d, const float* act, std::int64_t n) {
  relu_mask_kernel<<<blocks_for(n), kThreadsPerBlock, 0, ctx.stream>>>(d, act, n);
  SPMD_CHECK_CUDA_LAUNCH("CNN ReLU mask kernel");
}

}  // namespace spmd::backends::cuda
