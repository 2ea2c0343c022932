#include "spmd/backends/cuda/step_graph.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "spmd/backends/cuda/check.hpp"

namespace spmd::backends::cuda {

namespace {

// A training run has one key per batch size in use (the full batch and an epoch's last,
// shorter one); more would be a changing scalar, which the seen-once rule keeps eager.
constexpr std::size_t kMaxGraphs = 4;
constexpr std::size_t kRememberedKeys = 8;

std::atomic<std::int64_t> eager_steps{0}, captured_graphs{0}, replayed_steps{0}, failed_captures{0};
std::atomic<bool> warned{false};

bool capture_allowed() {
  const char* v = std::getenv("SPMD_CUDA_GRAPHS");
  return v == nullptr || std::strcmp(v, "0") != 0;
}

}  // namespace

void detail::destroy_graph_exec(cudaGraphExec_t exec) noexcept {
  if (cudaGraphExecDestroy(exec) != cudaSuccess) cudaGetLastError();
}

StepGraphCounts step_graph_counts() {
  return {eager_steps.load(), captured_graphs.load(), replayed_steps.load(), failed_captures.load()};
}

StepGraphs::StepGraphs(const char* what) : what_(what), enabled_(capture_allowed()) {}

void StepGraphs::run(cudaStream_t stream, const Key& key, const std::function<void()>& enqueue) {
  if (enabled_) {
    for (const Graph& g : graphs_)
      if (g.key == key) {
        SPMD_CHECK_CUDA(cudaGraphLaunch(g.exec.get(), stream), "replaying a captured step on the GPU");
        ++replayed_steps;
        return;
      }
    const auto seen = std::find(seen_.begin(), seen_.end(), key);
    if (seen == seen_.end()) {
      if (seen_.size() == kRememberedKeys) seen_.erase(seen_.begin());
      seen_.push_back(key);
    } else {
      seen_.erase(seen);
      if (capture(stream, key, enqueue)) return;
    }
  }
  ++eager_steps;
  enqueue();
}

// Captures enqueue's work (nothing runs while capturing), instantiates it and launches it.
// false: nothing was enqueued, capture is off from now on, and the caller runs the step.
bool StepGraphs::capture(cudaStream_t stream, const Key& key, const std::function<void()>& enqueue) {
  std::string failure;
  cudaError_t rc = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
  if (rc == cudaSuccess) {
    try {
      enqueue();
    } catch (const std::exception& e) {
      failure = e.what();
    }
    cudaGraph_t graph = nullptr;
    rc = cudaStreamEndCapture(stream, &graph);  // ends the capture whatever happened inside
    if (rc != cudaSuccess && failure.empty()) failure = std::string("cudaStreamEndCapture: ") + cudaGetErrorString(rc);
    cudaGraphExec_t exec = nullptr;
    if (failure.empty()) {
      rc = cudaGraphInstantiate(&exec, graph, 0);
      if (rc != cudaSuccess) failure = std::string("cudaGraphInstantiate: ") + cudaGetErrorString(rc);
    }
    if (graph != nullptr) cudaGraphDestroy(graph);
    if (failure.empty()) {
      if (graphs_.size() == kMaxGraphs) graphs_.erase(graphs_.begin());
      graphs_.push_back(Graph{key, decltype(Graph::exec)(exec)});
      ++captured_graphs;
      SPMD_CHECK_CUDA(cudaGraphLaunch(exec, stream), "launching a captured step on the GPU");
      ++replayed_steps;
      return true;
    }
  } else {
    failure = std::string("cudaStreamBeginCapture: ") + cudaGetErrorString(rc);
  }
  cudaGetLastError();  // a failed capture leaves a non-sticky error behind
  enabled_ = false;
  graphs_.clear();
  ++failed_captures;
  if (!warned.exchange(true))
    std::fprintf(stderr, "%s: warning: capturing the %s in a CUDA graph failed (%s); its steps run without graphs\n",
                 runtime::rank_tag().c_str(), what_, failure.c_str());
  return false;
}

}  // namespace spmd::backends::cuda
