#pragma once
// A recurring step of stream work replayed as one CUDA graph launch. A small training step
// (batch 32 of the default CNN: ~40 kernels and GEMMs of a few microseconds each) is bound
// by the host's launches, and members sharing a GPU contend for them; a graph is one launch.
//
// The step's work is enqueued by a callable; everything that changes what it enqueues
// (row counts, scalars passed by value to kernels) goes into the key. A key's first step runs
// eagerly (it also warms cuBLAS up, so the capture allocates nothing), the second is captured
// and launched, later ones replay; so a key seen once (a schedule that changes a scalar every
// step) never pays for a capture. A graph runs the same kernels with the same arguments in
// the same order as the eager step: the same bits.
//
// A capture that fails (a call the driver does not allow in a graph) is discarded, the step
// runs eagerly, this object stops capturing, and one warning per process names the error.
// SPMD_CUDA_GRAPHS=0 in the environment turns capture off (an escape hatch, and the tests'
// eager reference).
#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "spmd/backends/cuda/unique_handle.hpp"

namespace spmd::backends::cuda {

namespace detail {
void destroy_graph_exec(cudaGraphExec_t exec) noexcept;
}  // namespace detail

// Steps of every StepGraphs in this process (for tests and the device scripts' record).
struct StepGraphCounts {
  std::int64_t eager = 0;     // run without a graph (first of a key, capture off, fallbacks)
  std::int64_t captured = 0;  // graphs captured and instantiated
  std::int64_t replayed = 0;  // graph launches, the capturing one included
  std::int64_t failed = 0;    // captures discarded
};
StepGraphCounts step_graph_counts();

class StepGraphs {
 public:
  using Key = std::array<std::uint64_t, 4>;

  // what: the owner, for the warning ("CNN member training step").
  explicit StepGraphs(const char* what);

  // Enqueues the step on `stream` (the GPU current): eagerly, or as a launch of its graph.
  // Errors of `enqueue` on an eager run propagate; nothing waits for the stream.
  void run(cudaStream_t stream, const Key& key, const std::function<void()>& enqueue);

  bool capturing() const { return enabled_; }

 private:
  struct Graph {
    Key key;
    UniqueHandle<cudaGraphExec_t, detail::destroy_graph_exec> exec;
  };
  bool capture(cudaStream_t stream, const Key& key, const std::function<void()>& enqueue);

  const char* what_;
  bool enabled_;
  std::vector<Key> seen_;      // keys run once, newest last (a few)
  std::vector<Graph> graphs_;  // newest last (a few)
};

}  // namespace spmd::backends::cuda
