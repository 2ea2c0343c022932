// ONNX's own backend node tests (Debian's libonnx-testdata) against spmd's graph ops: every
// test folder (model.onnx, test_data_set_*/input_*.pb and output_*.pb) whose ops are all
// supported is run and compared with ONNX's tolerances (|got - expected| <= atol + rtol *
// |expected|, rtol 1e-3, atol 1e-7); a model with an op the library lacks, or a feature it
// refuses with an error, is "unsupported". Prints pass / fail / unsupported per op and exits
// non-zero on any failure among supported ops.
//   spmd_onnx_conformance DATA_DIR [FILTER]   (DATA_DIR: .../onnx/backend/test/data)
//   spmd_onnx_conformance --backend cuda DATA_DIR [FILTER]   the same on the GPU (graph/ of the
//   CUDA module); a test the GPU cannot run (an op it lacks) counts as unsupported.
// Exit 77 (ctest's skip) when DATA_DIR has no node tests, or (cuda) there is no GPU.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "spmd/models/onnx_graph.hpp"
#include "spmd/runtime/error.hpp"
#ifdef SPMD_CONFORMANCE_CUDA
#include "spmd/backends/cuda/cuda_device.hpp"
#include "spmd/backends/cuda/models.hpp"
#endif

namespace fs = std::filesystem;
using spmd::ops::ElemType;
using spmd::ops::Tensor;

namespace {

struct Count {
  int pass = 0, fail = 0, unsupported = 0;
};

// "" when `got` matches `want` within ONNX's tolerances, else what differs.
std::string compare(const Tensor& got, const Tensor& want) {
  if (got.shape != want.shape) return "shape " + spmd::ops::to_string(got.shape) + " != " + spmd::ops::to_string(want.shape);
  for (std::int64_t k = 0; k < want.size(); ++k) {
    const auto u = static_cast<std::size_t>(k);
    const double g = got.type == ElemType::Float32 ? got.f[u] : static_cast<double>(got.i[u]);
    const double w = want.type == ElemType::Float32 ? want.f[u] : static_cast<double>(want.i[u]);
    if (std::isnan(w) && std::isnan(g)) continue;
    if (std::isinf(w) && g == w) continue;
    if (!(std::fabs(g - w) <= 1e-7 + 1e-3 * std::fabs(w)))
      return "element " + std::to_string(k) + ": " + std::to_string(g) + " != " + std::to_string(w);
  }
  return "";
}

struct GpuRunFailure {
  std::string what;
};

// The outputs of one test set's inputs: the CPU graph ops, or (gpu) the CUDA backend's
// executor, where a graph it cannot run is an spmd::Error ("unsupported").
std::vector<Tensor> run_set(const std::shared_ptr<const spmd::models::OnnxGraph>& graph, const std::vector<Tensor>& inputs,
                            bool gpu) {
#ifdef SPMD_CONFORMANCE_CUDA
  if (gpu) {
    if (const std::string why = spmd::backends::cuda::onnx_unsupported_cuda_fixed(*graph, inputs); !why.empty())
      throw spmd::Error("on the GPU: " + why);
    spmd::runtime::DeviceInfo device;
    device.platform = &spmd::backends::cuda::cuda_platform();
    try {
      return spmd::backends::cuda::run_onnx_graph_cuda(device, graph, inputs);
    } catch (const std::exception& e) {  // a graph the GPU took and then failed on: a failure
      throw GpuRunFailure{e.what()};
    }
  }
#else
  (void)gpu;
#endif
  spmd::models::OnnxRunner runner(graph);
  for (std::size_t k = 0; k < inputs.size(); ++k) runner.input(k) = inputs[k];
  runner.run();
  std::vector<Tensor> outputs;
  for (std::size_t k = 0; k < graph->outputs().size(); ++k) outputs.push_back(runner.output(k));
  return outputs;
}

// The test's op: the folder's name without "test_" and its variant suffixes is not reliable,
// so the model's first node names it.
std::string run_test(const fs::path& dir, std::string& op, bool gpu) {
  const auto graph = spmd::models::OnnxGraph::load((dir / "model.onnx").string());
  op = graph->node_count() ? "" : "(folded)";
  for (const auto& set : fs::directory_iterator(dir)) {
    if (!set.is_directory() || set.path().filename().string().rfind("test_data_set_", 0) != 0) continue;
    std::vector<Tensor> inputs;
    for (std::size_t k = 0; k < graph->inputs().size(); ++k)
      inputs.push_back(spmd::models::read_onnx_tensor((set.path() / ("input_" + std::to_string(k) + ".pb")).string()));
    std::vector<Tensor> outputs;
    try {
      outputs = run_set(graph, inputs, gpu);
    } catch (const GpuRunFailure& e) {
      return set.path().filename().string() + " on the GPU: " + e.what;
    }
    for (std::size_t k = 0; k < graph->outputs().size(); ++k) {
      const fs::path want = set.path() / ("output_" + std::to_string(k) + ".pb");
      if (!fs::exists(want)) continue;
      const std::string diff = compare(outputs[k], spmd::models::read_onnx_tensor(want.string()));
      if (!diff.empty()) return set.path().filename().string() + " output " + std::to_string(k) + ": " + diff;
    }
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  // --backend cuda: the same tests on the CUDA backend's graph executor (a GPU needed).
  const bool gpu = argc > 2 && std::string(argv[1]) == "--backend" && std::string(argv[2]) == "cuda";
  if (gpu) {
    argc -= 2;
    argv += 2;
  }
  if (argc < 2) {
    std::fprintf(stderr, "usage: spmd_onnx_conformance [--backend cuda] DATA_DIR [FILTER]\n");
    return 2;
  }
  const std::string filter = argc > 2 ? argv[2] : "";
  if (!fs::is_directory(fs::path(argv[1]) / "node")) {
    std::printf("skip: no ONNX node tests in %s/node (apt-get install libonnx-testdata)\n", argv[1]);
    return 77;
  }
#ifdef SPMD_CONFORMANCE_CUDA
  std::string why_no_gpu;
  if (gpu && spmd::backends::cuda::visible_gpu_count(&why_no_gpu) == 0) {
    std::printf("skip: no GPU (%s)\n", why_no_gpu.c_str());
    return 77;
  }
#else
  if (gpu) {
    std::printf("skip: this build has no CUDA backend\n");
    return 77;
  }
#endif
  // The node tests, and the models PyTorch's exporter made of its modules and operators
  // (the "real" folder's networks are downloaded on demand: not here).
  std::map<std::string, Count> per_op;
  std::vector<fs::path> dirs;
  for (const char* suite : {"node", "pytorch-converted", "pytorch-operator", "simple"}) {
    if (!fs::is_directory(fs::path(argv[1]) / suite)) continue;
    for (const auto& d : fs::directory_iterator(fs::path(argv[1]) / suite))
      if (d.is_directory() && d.path().filename().string().find(filter) != std::string::npos) dirs.push_back(d.path());
  }
  std::sort(dirs.begin(), dirs.end());
  int failures = 0;
  for (const auto& dir : dirs) {
    // The op under test, as the folder names it (test_conv_with_strides_padding -> conv).
    const std::string name = dir.filename().string();
    const std::string suite = dir.parent_path().filename().string();
    auto& c = per_op[(suite == "node" ? "" : suite + ":") + name.substr(5, name.find('_', 5) - 5)];
    std::string op, verdict;
    try {
      verdict = run_test(dir, op, gpu);
    } catch (const spmd::Error& e) {
      ++c.unsupported;
      std::printf("unsupported %s: %.160s\n", name.c_str(), e.what());
      continue;
    }
    if (verdict.empty()) {
      ++c.pass;
    } else {
      ++c.fail;
      ++failures;
      std::printf("FAIL %s: %s\n", dir.filename().c_str(), verdict.c_str());
    }
  }
  int pass = 0, unsupported = 0;
  std::printf("\n%-24s %6s %6s %12s\n", "op (test folder)", "pass", "fail", "unsupported");
  for (const auto& [op, c] : per_op) {
    pass += c.pass;
    unsupported += c.unsupported;
    std::printf("%-24s %6d %6d %12d\n", op.c_str(), c.pass, c.fail, c.unsupported);
  }
  std::printf("\n%zu tests: %d pass, %d fail, %d unsupported (an op or a feature spmd does not run)\n", dirs.size(),
              pass, failures, unsupported);
  return failures ? 1 : 0;
}
