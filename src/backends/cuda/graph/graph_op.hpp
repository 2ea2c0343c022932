#pragma once
// The CUDA graph ops: the GPU side of the op library's graph ops (spmd/ops/graph_op.hpp),
// looked up by ONNX op name and run by the graph executor (graph_executor.hpp). Each op kind
// lives in a .cu file of this folder with its one SPMD_REGISTER_CUDA_GRAPH_OP line.
//
// The executor knows every tensor's shape before a node runs (graph_plan.hpp: shapes are
// planned from CPU trial runs), so an op only computes: it reads its attributes, its inputs'
// shapes and its outputs' shapes, and writes its outputs' floats. Shape arithmetic (int64
// tensors) stays on the host, where the CPU ops run it; an op that needs such a value (Pad's
// pads, Clip's bounds) finds it in `host`.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "spmd/backends/cuda/check.hpp"
#include "spmd/backends/cuda/launch.hpp"
#include "spmd/ops/graph_op.hpp"

namespace spmd::backends::cuda {

// A float tensor in GPU memory: row-major, `shape` for this run.
struct DeviceTensor {
  std::vector<std::int64_t> shape;
  float* data = nullptr;
  std::int64_t size() const {
    std::int64_t n = 1;
    for (const auto d : shape) n *= d;
    return n;
  }
};

// Scratch GPU memory of one executor, for ops that need more than their outputs (im2col).
class Scratch {
 public:
  virtual ~Scratch() = default;
  // At least `floats` floats, valid until the next call; the same buffer every call once
  // the largest request has been seen (the executor's first run at its largest batch).
  virtual float* floats(std::size_t floats) = 0;
};

struct CudaGraphCall {
  const ops::GraphNode& node;
  std::span<const DeviceTensor* const> in;    // nullptr where omitted or only on the host
  std::span<const ops::Tensor* const> host;   // the host value where there is one (int64, constants)
  std::span<DeviceTensor* const> out;         // shaped by the plan, data allocated
  cudaStream_t stream;
  cublasHandle_t cublas;
  Scratch& scratch;

  // Input k on the GPU, or fail() naming it.
  const DeviceTensor& input(std::size_t k) const;
  bool has_input(std::size_t k) const { return k < in.size() && in[k] != nullptr; }
  // Input k's host value, or nullptr.
  const ops::Tensor* host_value(std::size_t k) const { return k < host.size() ? host[k] : nullptr; }
  // The first value of float input k (a bound, a padding value): its host value, or read back
  // from the GPU (waits for the stream: only for values computed in the run); fallback when
  // the input is omitted.
  float scalar(std::size_t k, float fallback) const;
  // spmd::Error "ONNX node NAME (OP) on the GPU: what".
  [[noreturn]] void fail(const std::string& what) const;
};

using CudaGraphOpFn = void (*)(const CudaGraphCall& call);
// What the op cannot run, known from the node and its inputs' planned shapes before any run
// ("" when it can): the plan refuses such a graph at load, so that --backend auto runs it on
// the CPU and --backend cuda says why up front, never in the middle of a run.
using CudaGraphOpLimits = std::string (*)(const ops::GraphNode& node, const std::vector<std::vector<std::int64_t>>& in_shapes);

// The op of an ONNX op_type, or nullptr when this module has none.
CudaGraphOpFn find_cuda_graph_op(const std::string& op);
// Its limits, or nullptr when it has none beyond those of every op.
CudaGraphOpLimits find_cuda_graph_op_limits(const std::string& op);
std::vector<std::string> cuda_graph_op_names();
bool register_cuda_graph_op(const char* op, CudaGraphOpFn fn, CudaGraphOpLimits limits = nullptr);

// Shared by several op files: shapes as int64 strides, and a fixed-rank index set passed to
// kernels by value.
inline constexpr int kMaxRank = 8;
struct Dims8 {
  int rank = 0;
  std::int64_t d[kMaxRank] = {};
};
// Row-major strides of shape; fail()s past kMaxRank dimensions.
Dims8 strides_of(const CudaGraphCall& call, const std::vector<std::int64_t>& shape);
Dims8 dims_of(const CudaGraphCall& call, const std::vector<std::int64_t>& shape);
// Strides of `shape` read as broadcast to `out` (numpy rules: aligned at the right, 0 along
// broadcast dimensions).
Dims8 broadcast_strides(const CudaGraphCall& call, const std::vector<std::int64_t>& shape,
                        const std::vector<std::int64_t>& out);
#ifdef __CUDACC__
// Grid-stride loops: for (i = first_index(); i < n; i += index_stride()), launched with
// blocks_for(n) blocks of kThreadsPerBlock threads.
__device__ inline std::int64_t first_index() { return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ inline std::int64_t index_stride() { return static_cast<std::int64_t>(gridDim.x) * blockDim.x; }
#endif

// out [n] <- in [n] on the call's stream (Identity, Reshape and their kin).
void copy_floats(const CudaGraphCall& call, float* out, const float* in, std::int64_t n);

}  // namespace spmd::backends::cuda

// At namespace scope in the op's file: registered when the module loads. Arguments: the op
// type, its CudaGraphOpFn and, where it has any, its CudaGraphOpLimits.
#define SPMD_REGISTER_CUDA_GRAPH_OP(op, ...)                                              \
  [[maybe_unused]] static const bool SPMD_GRAPH_CONCAT(spmd_cuda_graph_op_, __LINE__) = \
      ::spmd::backends::cuda::register_cuda_graph_op(op, __VA_ARGS__)
