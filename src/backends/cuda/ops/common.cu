#include <algorithm>

#include "cuda_op.hpp"
#include "spmd/ops/registry.hpp"

namespace spmd::backends::cuda {
namespace {

template <class Fn>
ops::Registry<Fn>& table() {
  static ops::Registry<Fn> t;
  return t;
}

template <class Index>
__global__ void add_bias_kernel(float* x, Index total, int cols, const float* bias, bool relu) {
  for (Index i = static_cast<Index>(grid_start()); i < total; i += static_cast<Index>(grid_stride())) {
    const float v = x[i] + bias[i % static_cast<Index>(cols)];
    x[i] = relu ? (v > 0.0f ? v : 0.0f) : v;
  }
}

// Stage 1 of ColumnSums: block (b, y) sums rows [b * rows_per_block, ...) into partial[b][j].
// With cols <= blockDim.x (one block across the columns), thread t reads column t % cols of
// every (blockDim.x / cols)-th row from its lane t / cols on (a warp reads whole rows:
// coalesced), then a fixed tree adds the lanes; wider rows give each thread one column of
// block y's blockDim.x columns.
__global__ void column_partials_kernel(const float* x, std::int64_t rows, int cols, std::int64_t rows_per_block,
                                       float* partial) {
  __shared__ float lane_sums[kThreadsPerBlock];
  const std::int64_t first = blockIdx.x * rows_per_block;
  const std::int64_t last = first + rows_per_block < rows ? first + rows_per_block : rows;
  float* out = partial + static_cast<std::int64_t>(blockIdx.x) * cols;
  if (cols > static_cast<int>(blockDim.x)) {
    const std::int64_t j = static_cast<std::int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
    if (j >= cols) return;
    float s = 0.0f;
    for (std::int64_t r = first; r < last; ++r) s += x[r * cols + j];
    out[j] = s;
    return;
  }
  const int lanes = static_cast<int>(blockDim.x) / cols;
  const int j = static_cast<int>(threadIdx.x) % cols, lane = static_cast<int>(threadIdx.x) / cols;
  float s = 0.0f;
  if (lane < lanes)
    for (std::int64_t r = first + lane; r < last; r += lanes) s += x[r * cols + j];
  lane_sums[threadIdx.x] = s;
  __syncthreads();
  int width = 1;
  while (width < lanes) width *= 2;
  for (width /= 2; width > 0; width /= 2) {  // lane l += lane l + width, for the lanes that exist
    if (lane < width && lane + width < lanes) lane_sums[threadIdx.x] += lane_sums[threadIdx.x + width * cols];
    __syncthreads();
  }
  if (lane == 0) out[j] = lane_sums[threadIdx.x];
}

// Stage 2 with few blocks: sums[j] = partial[0][j] + partial[1][j] + ..., in block order, a
// thread per column (consecutive threads read consecutive columns).
__global__ void column_totals_kernel(const float* partial, int blocks, int cols, float* sums) {
  for (std::int64_t j = grid_start(); j < cols; j += grid_stride()) {
    float s = 0.0f;
    for (int b = 0; b < blocks; ++b) s += partial[static_cast<std::int64_t>(b) * cols + j];
    sums[j] = s;
  }
}

// Stage 2 with many blocks (bias gradients: a few dozen columns over up to 512 blocks): a warp
// per column, lane l adding blocks l, l + 32, ... in order, then a fixed shuffle tree. A thread
// per column waited on its 512 loads in turn, in one block of threads.
constexpr int kWarpTotalsMinBlocks = 64;
__global__ void column_totals_by_warp_kernel(const float* partial, int blocks, int cols, float* sums) {
  for (std::int64_t j = blockIdx.x; j < cols; j += gridDim.x) {
    float s = 0.0f;
    for (int b = static_cast<int>(threadIdx.x); b < blocks; b += 32) s += partial[static_cast<std::int64_t>(b) * cols + j];
    for (int offset = 16; offset > 0; offset /= 2) s += __shfl_down_sync(~0u, s, offset);
    if (threadIdx.x == 0) sums[j] = s;
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
  const std::int64_t total = rows * cols;
  with_index_type(total, [&](auto index) {
    add_bias_kernel<<<blocks_for(total), kThreadsPerBlock, 0, ctx.stream>>>(
        x, static_cast<decltype(index)>(total), cols, bias, relu);
  });
  SPMD_CHECK_CUDA_LAUNCH("CNN bias kernel");
}

namespace {
// Rows per stage-1 block: enough blocks to fill a large GPU a few times, each thread still
// adding a few dozen rows; never more blocks than the scratch holds.
constexpr std::int64_t kColumnSumRowsPerBlock = 64;
constexpr std::int64_t kColumnSumMaxBlocks = 512;

int column_sum_blocks(std::int64_t rows) {
  return static_cast<int>(std::clamp<std::int64_t>((rows + kColumnSumRowsPerBlock - 1) / kColumnSumRowsPerBlock, 1,
                                                   kColumnSumMaxBlocks));
}
}  // namespace

ColumnSums::ColumnSums(std::int64_t max_rows, int cols)
    : cols_(cols),
      partial_(static_cast<std::size_t>(column_sum_blocks(max_rows)) * static_cast<std::size_t>(cols),
               "CNN bias gradient partial sums") {}

void ColumnSums::run(const CudaContext& ctx, const float* x, std::int64_t rows, float* sums) {
  const int blocks = column_sum_blocks(rows);
  const std::int64_t rows_per_block = (rows + blocks - 1) / blocks;
  const dim3 grid(static_cast<unsigned>(blocks),
                  cols_ > kThreadsPerBlock ? static_cast<unsigned>((cols_ + kThreadsPerBlock - 1) / kThreadsPerBlock) : 1u);
  column_partials_kernel<<<grid, kThreadsPerBlock, 0, ctx.stream>>>(x, rows, cols_, rows_per_block, partial_.data());
  SPMD_CHECK_CUDA_LAUNCH("CNN bias gradient partial sums kernel");
  if (blocks >= kWarpTotalsMinBlocks)
    column_totals_by_warp_kernel<<<static_cast<unsigned>(std::min<std::int64_t>(cols_, kMaxBlocks)), 32, 0, ctx.stream>>>(
        partial_.data(), blocks, cols_, sums);
  else
    column_totals_kernel<<<blocks_for(cols_), kThreadsPerBlock, 0, ctx.stream>>>(partial_.data(), blocks, cols_, sums);
  SPMD_CHECK_CUDA_LAUNCH("CNN bias gradient totals kernel");
}

void relu_mask(const CudaContext& ctx, float* d, const float* act, std::int64_t n) {
  relu_mask_kernel<<<blocks_for(n), kThreadsPerBlock, 0, ctx.stream>>>(d, act, n);
  SPMD_CHECK_CUDA_LAUNCH("CNN ReLU mask kernel");
}

}  // namespace spmd::backends::cuda
