#pragma once
// The GPU logreg shard's steps after the logits and the softmax (logreg.cu), in float32 and
// float64 alike: the gradient's block and chunk sums, the transposed upload and the shard
// object, which runs one evaluation as
//   logits (Kernels::logits)  softmax (Kernels::softmax: D = P - Y in place of Z, and each
//   row's loss (m + log_spec(s)) - z_y in double)  chunk loss (each chunk's rows' losses in
//   row order from 0)  block gradient (fma over a 256-row block's rows in order, in T)  chunk
//   gradient (each chunk's blocks summed in double, in block order)  for node_partials, the
//   chunk tree (models/partial_sum_tree.hpp's in-place plan): only the canonical nodes' records
//   come back to the host.
// T is the kernels' arithmetic (float or double); the arithmetic is logreg_kernel_spec.hpp's
// in that precision. Every operation is an explicit fma or _rn intrinsic, which nvcc never
// fuses or reorders. Included by logreg.cu: everything has internal linkage.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "spmd/backends/cuda/check.hpp"
#include "spmd/backends/cuda/cuda_device.hpp"
#include "spmd/backends/cuda/device_buffer.hpp"
#include "spmd/backends/cuda/launch.hpp"
#include "spmd/backends/cuda/stream.hpp"
#include "spmd/models/logreg.hpp"
#include "spmd/models/logreg_kernel_spec.hpp"
#include "spmd/models/partial_sum_tree.hpp"
#include "spmd/runtime/devices.hpp"
#include "spmd/runtime/error.hpp"

namespace spmd::backends::cuda {
namespace {

namespace spec = models::logreg_detail;

constexpr std::int64_t kBlockRows = models::kLogregGradFloatBlockRows;
// Classes one gradient thread accumulates for each of its features (registers); more classes
// take more threads.
constexpr int kGradClassGroup = spec::kMaxClassGroup;

__device__ inline std::int64_t grid_start() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline std::int64_t grid_stride() { return static_cast<std::int64_t>(gridDim.x) * blockDim.x; }

__device__ inline float fma_rn(float a, float b, float c) { return fmaf(a, b, c); }
__device__ inline double fma_rn(double a, double b, double c) { return fma(a, b, c); }

// Geometry of the gradient blocks: chunk k of chunk_rows rows (the last shorter) has
// blocks_per_chunk blocks of up to kBlockRows rows counted from the chunk's first row;
// blocks past the chunk's end are empty.
struct BlockGeometry {
  std::int64_t rows, chunk_rows, blocks_per_chunk, blocks;
};

// block_grads[(b * C + c) * F + f] = sum over block b's rows in order of fma(d[r][c],
// (T) x[r][f], .) in T, from 0. A thread block per (gradient block, class group) and tile of
// features: its rows' D (at most kBlockRows x kGradClassGroup) is staged in shared memory once,
// then each thread walks the rows for V consecutive features, loading them together (float4 /
// float2: F a multiple of V keeps every row aligned) kGradRowsAhead rows ahead: one feature a
// thread in 128-thread tiles made each thread a chain of 256 loads one at a time, in 1.33
// waves of blocks (tools/bench/README.md, fourth run).
template <class T>
constexpr int kGradVector = sizeof(T) == sizeof(float) ? 4 : 2;
constexpr int kGradRowsAhead = 8;
constexpr int kGradMaxThreads = 256;  // per block: a tile is the features of up to this many threads

template <int V>
__device__ inline void load_features(const float* p, float (&v)[V]) {
  if constexpr (V == 4) {
    const float4 a = *reinterpret_cast<const float4*>(p);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
  } else if constexpr (V == 2) {
    const float2 a = *reinterpret_cast<const float2*>(p);
    v[0] = a.x, v[1] = a.y;
  } else {
    v[0] = *p;
  }
}

template <class T, int V>
__global__ void block_gradient_kernel(const float* X, const T* D, BlockGeometry geo, int features, int classes,
                                      T* block_grads) {
  __shared__ T d_stage[kBlockRows * kGradClassGroup];
  const int groups = (classes + kGradClassGroup - 1) / kGradClassGroup;
  const int f0 = (static_cast<int>(blockIdx.y) * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x)) * V;
  for (std::int64_t t = blockIdx.x; t < geo.blocks * groups; t += gridDim.x) {
    const int group = static_cast<int>(t % groups);
    const std::int64_t b = t / groups;
    const std::int64_t k = b / geo.blocks_per_chunk, j = b - k * geo.blocks_per_chunk;
    const std::int64_t chunk_first = k * geo.chunk_rows;
    const std::int64_t chunk_len = min(geo.chunk_rows, geo.rows - chunk_first);
    const std::int64_t first = chunk_first + j * kBlockRows;
    const std::int64_t end = chunk_first + min(chunk_len, (j + 1) * kBlockRows);
    const int n = first < end ? static_cast<int>(end - first) : 0;  // blocks past the chunk's end are empty
    const int c0 = group * kGradClassGroup;
    const int nc = min(kGradClassGroup, classes - c0);
    __syncthreads();  // the previous block's rows are read before these are staged
    for (int e = static_cast<int>(threadIdx.x); e < n * nc; e += static_cast<int>(blockDim.x)) {
      const int r = e / nc, cc = e - r * nc;
      d_stage[r * kGradClassGroup + cc] = D[(first + r) * classes + c0 + cc];
    }
    __syncthreads();
    if (f0 >= features) continue;  // after the barriers: every thread stages and waits
    T acc[V][kGradClassGroup];
#pragma unroll
    for (int v = 0; v < V; ++v)
#pragma unroll
      for (int cc = 0; cc < kGradClassGroup; ++cc) acc[v][cc] = T(0);
    const float* x = X + first * features + f0;
    // The rows in order, a batch of loads at a time; the tail one row at a time.
    const auto add_rows = [&](int r, auto count) {
      float xs[count.value][V];
#pragma unroll
      for (int a = 0; a < count.value; ++a) load_features<V>(x + static_cast<std::int64_t>(r + a) * features, xs[a]);
#pragma unroll
      for (int a = 0; a < count.value; ++a) {
        const T* d = d_stage + (r + a) * kGradClassGroup;
#pragma unroll
        for (int cc = 0; cc < kGradClassGroup; ++cc)
          if (cc < nc) {
            const T dv = d[cc];
#pragma unroll
            for (int v = 0; v < V; ++v) acc[v][cc] = fma_rn(dv, static_cast<T>(xs[a][v]), acc[v][cc]);
          }
      }
    };
    int r = 0;
    for (; r + kGradRowsAhead <= n; r += kGradRowsAhead) add_rows(r, std::integral_constant<int, kGradRowsAhead>{});
    for (; r < n; ++r) add_rows(r, std::integral_constant<int, 1>{});
#pragma unroll
    for (int cc = 0; cc < kGradClassGroup; ++cc)
      if (cc < nc)
#pragma unroll
        for (int v = 0; v < V; ++v) block_grads[(b * classes + c0 + cc) * features + f0 + v] = acc[v][cc];
  }
}

// out[k * record] = chunk k's rows' losses added in row order from 0 (the CPU's order). A block
// per chunk: its threads bring the losses into shared memory, coalesced, a stage at a time, and
// one thread adds them up. A thread per chunk reading its rows from global memory in turn
// waited on each load.
constexpr int kLossStage = 2048;  // doubles: 16 KiB of shared memory
__global__ void chunk_loss_kernel(const double* row_loss, std::int64_t rows, std::int64_t chunk_rows, std::int64_t chunks,
                                  std::int64_t record, double* out) {
  __shared__ double stage[kLossStage];
  for (std::int64_t k = blockIdx.x; k < chunks; k += gridDim.x) {
    const std::int64_t first = k * chunk_rows, end = min(rows, first + chunk_rows);
    double loss = 0.0;
    for (std::int64_t a = first; a < end; a += kLossStage) {
      const int n = static_cast<int>(min(static_cast<std::int64_t>(kLossStage), end - a));
      for (int i = threadIdx.x; i < n; i += blockDim.x) stage[i] = row_loss[a + i];
      __syncthreads();
      if (threadIdx.x == 0)
        for (int i = 0; i < n; ++i) loss = __dadd_rn(loss, stage[i]);
      __syncthreads();  // the stage is read before the next is written
    }
    if (threadIdx.x == 0) out[k * record] = loss;
  }
}

// out[k * record + 1 + f * C + c] = sum over chunk k's blocks, in block order, of
// (double) block_grads[block][c][f], from 0.
template <class T>
__global__ void chunk_gradient_kernel(const T* block_grads, std::int64_t chunks, std::int64_t blocks_per_chunk,
                                      int features, int classes, std::int64_t record, double* out) {
  const std::int64_t fc = static_cast<std::int64_t>(features) * classes;
  const std::int64_t total = chunks * fc;
  for (std::int64_t i = grid_start(); i < total; i += grid_stride()) {
    const std::int64_t k = i / fc;
    const std::int64_t e = i - k * fc;  // c * F + f: consecutive threads read consecutive values
    const int c = static_cast<int>(e / features), f = static_cast<int>(e % features);
    const T* g = block_grads + k * blocks_per_chunk * fc + e;
    double s = 0.0;
    for (std::int64_t b = 0; b < blocks_per_chunk; ++b) s += static_cast<double>(g[b * fc]);
    out[k * record + 1 + static_cast<std::int64_t>(f) * classes + c] = s;
  }
}

// The in-place tree plan (models/partial_sum_tree.hpp) over the chunk records: element e of
// each record by one thread, the adds in the plan's order (record[dst] += record[src]), then
// canonical node k's record copied to nodes[k].
__global__ void tree_nodes_kernel(double* records, std::int64_t record, const std::int64_t* adds, std::int64_t add_count,
                                  const std::int64_t* node_slots, std::int64_t node_count, double* nodes) {
  for (std::int64_t e = grid_start(); e < record; e += grid_stride()) {
    for (std::int64_t a = 0; a < add_count; ++a) {
      double& dst = records[adds[2 * a] * record + e];
      dst = __dadd_rn(dst, records[adds[2 * a + 1] * record + e]);
    }
    for (std::int64_t k = 0; k < node_count; ++k) nodes[k * record + e] = records[node_slots[k] * record + e];
  }
}

void check_shape(int features, int classes, const char* what) {
  if (features < 1 || classes < 1)
    throw Error(std::string(what) + ": needs features >= 1 and classes >= 1, got features = " +
                std::to_string(features) + ", classes = " + std::to_string(classes));
}

void check_shard_shape(int features, int classes, std::int64_t rows, std::int64_t chunk_rows, const char* what) {
  check_shape(features, classes, what);
  if (rows < 0 || chunk_rows < 1)
    throw Error(std::string(what) + ": needs rows >= 0 and chunk_rows >= 1, got rows = " + std::to_string(rows) +
                ", chunk_rows = " + std::to_string(chunk_rows));
}

// W [F, C] (host) -> WT [C][Fpad] on the GPU (Fpad: F rounded up to `lanes`), via the pinned
// staging buffer (free on entry; the caller synchronises before reusing it).
template <class T>
void upload_transposed(const T* W, int features, int classes, int lanes, cuda::PinnedBuffer<T>& staging,
                       cuda::DeviceBuffer<T>& WT, cudaStream_t stream) {
  const int padded = spec::round_up(features, lanes);
  T* wt = staging.data();
  for (int c = 0; c < classes; ++c) {
    T* row = wt + static_cast<std::size_t>(c) * padded;
    for (int f = 0; f < features; ++f) row[f] = W[static_cast<std::size_t>(f) * classes + c];
    std::fill(row + features, row + padded, T(0));
  }
  WT.upload(wt, static_cast<std::size_t>(classes) * padded, stream);
}

// Kernels: Scalar (T, the arithmetic), kLanes (of the logits), and
//   static void logits(const float* X, std::int64_t rows, int F, const T* WT, int C, T* Z, cudaStream_t);
//   static void softmax(T* Z, const std::int32_t* labels, const double* row_weights (nullptr: none), std::int64_t rows,
//                       int C, double* row_loss, cudaStream_t);
template <class Kernels, class Base>
class CudaLogregShardOf final : public Base {
 public:
  using T = typename Kernels::Scalar;

  CudaLogregShardOf(const runtime::DeviceInfo& device, const float* X, const std::int32_t* labels, std::int64_t rows,
                    int features, int classes, std::int64_t chunk_rows, const double* row_weights)
      : ordinal_((cuda::use_cuda_device(device, "CUDA logreg shard"), device.ordinal)),
        features_(features),
        classes_(classes),
        record_(static_cast<std::int64_t>(models::logreg_partials_size(features, classes))),
        chunks_((rows + chunk_rows - 1) / chunk_rows),
        geometry_{rows, chunk_rows, (std::min(chunk_rows, rows) + kBlockRows - 1) / kBlockRows, 0},
        X_(static_cast<std::size_t>(rows) * features, "logreg rows X"),
        labels_(static_cast<std::size_t>(rows), "logreg labels"),
        row_weights_(row_weights == nullptr ? 0 : static_cast<std::size_t>(rows), "logreg row weights"),
        WT_(transposed_size(), "logreg weights (transposed)"),
        Z_(static_cast<std::size_t>(rows) * classes, "logreg logits / softmax residuals"),
        row_loss_(static_cast<std::size_t>(rows), "logreg per-row losses"),
        block_grads_(static_cast<std::size_t>(chunks_ * geometry_.blocks_per_chunk) * features * classes,
                     "logreg per-block gradients"),
        out_(static_cast<std::size_t>(chunks_ * record_), "logreg chunk partials"),
        WT_host_(transposed_size(), "logreg weight staging") {
    geometry_.blocks = chunks_ * geometry_.blocks_per_chunk;
    // Labels are checked here, once, rather than on every evaluation on the GPU.
    for (std::int64_t i = 0; i < rows; ++i)
      if (labels[i] < 0 || labels[i] >= classes)
        throw Error("logreg: label " + std::to_string(labels[i]) + " of row " + std::to_string(i) +
                    " (of this device's rows) is outside [0, " + std::to_string(classes) + ")");
    const cudaStream_t s = stream_.get();
    X_.upload(X, X_.size(), s);
    labels_.upload(labels, labels_.size(), s);
    if (row_weights != nullptr) row_weights_.upload(row_weights, row_weights_.size(), s);
    // The caller's X may go once the copies are done.
    stream_.synchronize_copies("copying the logreg rows to the GPU");
  }

  ~CudaLogregShardOf() override { cuda::set_current_gpu_noexcept(ordinal_); }

  void chunk_partials(const T* W, double* out) override {
    if (chunks_ == 0) return;
    compute_records(W);
    out_.download(out, out_.size(), stream_.get());
    stream_.synchronize("computing the logreg chunk partials on the GPU");
  }

  // The chunk records added up on the GPU by the in-place tree plan: only the canonical nodes'
  // records (about 2 log2(chunks)) cross PCIe, into pinned memory.
  const double* node_partials(const T* W, std::int64_t first_chunk, std::int64_t global_chunks) override {
    if (chunks_ == 0) return nullptr;
    cuda::set_current_gpu(ordinal_);  // the plan's buffers go on this shard's GPU, whichever thread asks
    if (plan_first_ != first_chunk || plan_global_ != global_chunks) make_plan(first_chunk, global_chunks);
    compute_records(W);
    const cudaStream_t s = stream_.get();
    const auto add_count = static_cast<std::int64_t>(plan_adds_.size() / 2);
    tree_nodes_kernel<<<blocks_for(record_), kThreadsPerBlock, 0, s>>>(out_.data(), record_, plan_adds_.data(), add_count,
                                                                     plan_slots_.data(), node_count_, nodes_.data());
    SPMD_CHECK_CUDA_LAUNCH("logreg chunk tree kernel");
    nodes_.download(nodes_host_.data(), nodes_.size(), s);
    stream_.synchronize("adding the logreg chunk partials on the GPU");
    return nodes_host_.data();
  }

 private:
  void make_plan(std::int64_t first_chunk, std::int64_t global_chunks) {
    const models::InPlaceTreePlan plan = models::in_place_tree_plan(first_chunk, first_chunk + chunks_, global_chunks);
    node_count_ = static_cast<std::int64_t>(plan.nodes.size());
    plan_adds_ = cuda::DeviceBuffer<std::int64_t>(std::max<std::size_t>(plan.adds.size(), 1), "logreg chunk tree plan");
    plan_slots_ = cuda::DeviceBuffer<std::int64_t>(plan.node_slots.size(), "logreg chunk tree nodes");
    nodes_ = cuda::DeviceBuffer<double>(static_cast<std::size_t>(node_count_ * record_), "logreg tree node partials");
    nodes_host_ = cuda::PinnedBuffer<double>(nodes_.size(), "logreg tree node partials (host)");
    const cudaStream_t s = stream_.get();
    if (!plan.adds.empty()) plan_adds_.upload(plan.adds.data(), plan.adds.size(), s);
    plan_slots_.upload(plan.node_slots.data(), plan.node_slots.size(), s);
    stream_.synchronize_copies("copying the logreg chunk tree plan to the GPU");  // plan's vectors go out of scope
    plan_first_ = first_chunk;
    plan_global_ = global_chunks;
  }

  // Every chunk's record into out_ (queued on the stream).
  void compute_records(const T* W) {
    cuda::set_current_gpu(ordinal_);
    const cudaStream_t s = stream_.get();
    const std::int64_t rows = geometry_.rows;
    upload_transposed(W, features_, classes_, Kernels::kLanes, WT_host_, WT_, s);
    Kernels::logits(X_.data(), rows, features_, WT_.data(), classes_, Z_.data(), s);
    Kernels::softmax(Z_.data(), labels_.data(), row_weights_.size() == 0 ? nullptr : row_weights_.data(), rows, classes_,
                     row_loss_.data(), s);
    chunk_loss_kernel<<<static_cast<unsigned>(std::min<std::int64_t>(chunks_, cuda::kMaxBlocks)), kThreadsPerBlock, 0, s>>>(
        row_loss_.data(), rows, geometry_.chunk_rows, chunks_, record_, out_.data());
    SPMD_CHECK_CUDA_LAUNCH("logreg chunk loss kernel");
    // V features a thread where F is a multiple of V; tiles of at most kGradMaxThreads threads,
    // as few as cover F, split evenly (784 features: one tile of 224 threads).
    constexpr int kVector = kGradVector<T>;
    const int V = features_ % kVector == 0 ? kVector : 1;
    const int threads_needed = (features_ + V - 1) / V;
    const int tiles = (threads_needed + kGradMaxThreads - 1) / kGradMaxThreads;
    const int threads = spec::round_up((threads_needed + tiles - 1) / tiles, 32);
    const std::int64_t groups = (classes_ + kGradClassGroup - 1) / kGradClassGroup;
    const dim3 grid(static_cast<unsigned>(std::min<std::int64_t>(geometry_.blocks * groups, cuda::kMaxBlocks)),
                    static_cast<unsigned>(tiles));
    if (V == kVector)
      block_gradient_kernel<T, kVector><<<grid, threads, 0, s>>>(X_.data(), Z_.data(), geometry_, features_, classes_,
                                                                 block_grads_.data());
    else
      block_gradient_kernel<T, 1><<<grid, threads, 0, s>>>(X_.data(), Z_.data(), geometry_, features_, classes_,
                                                           block_grads_.data());
    SPMD_CHECK_CUDA_LAUNCH("logreg block gradient kernel");
    chunk_gradient_kernel<T><<<blocks_for(chunks_ * features_ * classes_), kThreadsPerBlock, 0, s>>>(
        block_grads_.data(), chunks_, geometry_.blocks_per_chunk, features_, classes_, record_, out_.data());
    SPMD_CHECK_CUDA_LAUNCH("logreg chunk gradient kernel");
  }

  std::size_t transposed_size() const {
    return static_cast<std::size_t>(classes_) * spec::round_up(features_, Kernels::kLanes);
  }

  int ordinal_;
  int features_, classes_;
  std::int64_t record_;  // doubles per chunk: 1 + F * C
  std::int64_t chunks_;
  BlockGeometry geometry_;
  cuda::Stream stream_;
  cuda::DeviceBuffer<float> X_;              // [rows, F]
  cuda::DeviceBuffer<std::int32_t> labels_;  // [rows]
  cuda::DeviceBuffer<double> row_weights_;   // [rows], or empty: unweighted
  cuda::DeviceBuffer<T> WT_;                 // [C, Fpad]
  cuda::DeviceBuffer<T> Z_;                  // [rows, C]: logits, then P - Y
  cuda::DeviceBuffer<double> row_loss_;      // [rows]
  cuda::DeviceBuffer<T> block_grads_;        // [chunks * blocks_per_chunk, C, F]
  cuda::DeviceBuffer<double> out_;           // [chunks, 1 + F * C] (loss entries stay 0)
  cuda::PinnedBuffer<T> WT_host_;
  // The in-place tree plan of this shard's chunks (node_partials), made at the first call.
  std::int64_t plan_first_ = -1, plan_global_ = -1, node_count_ = 0;
  cuda::DeviceBuffer<std::int64_t> plan_adds_;   // dst, src slot pairs
  cuda::DeviceBuffer<std::int64_t> plan_slots_;  // each canonical node's slot
  cuda::DeviceBuffer<double> nodes_;             // [nodes, 1 + F * C]
  cuda::PinnedBuffer<double> nodes_host_;
};

}  // namespace
}  // namespace spmd::backends::cuda
