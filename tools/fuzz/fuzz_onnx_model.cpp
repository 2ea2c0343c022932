// libFuzzer target: the ONNX loader, as `spmd model info` and `spmd eval --model onnx` use it.
// Each input is a model file: describe_onnx_model (model info) reads it, OnnxGraph::load
// parses, checks, fuses and folds its constants (which runs ops on the file's own tensors),
// and a loaded graph is run once on a small input of its declared shape (symbolic dimensions
// 1), so that a damaged attribute or initializer reaches the ops' shape arithmetic.
//
// A finding is anything other than a clean spmd::Error: a crash, a sanitizer report (address
// and undefined behaviour: a shape product that overflows is one), an exception of another
// type, a run past libFuzzer's -timeout, or an allocation above -malloc_limit_mb. The harness
// narrows the limits a stranger's file meets in a real run (loops, ranges, memory counted as
// if 16 ranks shared the node) so that what they let through stays small here.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "fuzz_input_file.hpp"
#include "spmd/models/onnx_graph.hpp"
#include "spmd/models/onnx_info.hpp"
#include "spmd/ops/graph_op.hpp"
#include "spmd/runtime/error.hpp"
#include "spmd/runtime/memory_limits.hpp"

namespace {

const std::string& input_path() {
  static const std::string path = spmd::fuzz::input_file_path("onnx", ".onnx");
  return path;
}

void write_input(const std::uint8_t* data, std::size_t size) { spmd::fuzz::write_input_file(input_path(), data, size); }

// The graph's inputs at their declared shapes (symbolic dimensions 1), unless that is large:
// the run is what a trial run of spmd eval does, not a benchmark.
bool fill_inputs(const spmd::models::OnnxGraph& graph, spmd::models::OnnxRunner& runner) {
  constexpr std::int64_t kMaxInputValues = std::int64_t{1} << 16;
  for (std::size_t k = 0; k < graph.inputs().size(); ++k) {
    const auto& value = graph.inputs()[k];
    std::vector<std::int64_t> dims;
    std::int64_t count = 1;
    for (const std::int64_t d : value.dims) {
      const std::int64_t size = d < 0 ? 1 : d;
      if (size > 0 && count > kMaxInputValues / size) return false;
      count *= size;
      dims.push_back(size);
    }
    if (count > kMaxInputValues) return false;
    spmd::ops::Tensor& t = runner.input(k);
    t.reset(value.type, dims);
    for (std::int64_t i = 0; i < count; ++i) {
      if (value.type == spmd::ops::ElemType::Float32)
        t.f[static_cast<std::size_t>(i)] = static_cast<float>(i % 7) - 3.0f;
      else
        t.i[static_cast<std::size_t>(i)] = 0;  // an index valid for any non-empty axis
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spmd::models::set_max_loop_iterations(1000);
  spmd::ops::set_max_range_length(std::int64_t{1} << 20);
  spmd::runtime::set_memory_sharers({16, 1});
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  write_input(data, size);
  try {
    (void)spmd::models::describe_onnx_model(input_path());
  } catch (const spmd::Error&) {
  }
  try {
    const auto graph = spmd::models::OnnxGraph::load(input_path());
    spmd::models::OnnxRunner runner(graph);
    if (fill_inputs(*graph, runner)) runner.run();
  } catch (const spmd::Error&) {
  }
  return 0;
}
