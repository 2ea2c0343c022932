// ONNX graphs on the GPU against the CPU graph ops: one small graph per op family (built here
// with the ONNX library's types), the loader's fused Relu (spmd_relu), the shape arithmetic
// that stays on the host, and the PyTorch-exported models of tests/support/torch_models.py
// through the eval predictor (NHWC input mapping, bytes decoded on the GPU); all within 1e-5
// of the CPU. Also the support check that needs no GPU: a graph with an op the CUDA backend
// lacks is refused naming the node and the op. GPU tests skip visibly where no GPU is visible.
#include <gtest/gtest.h>

#include "gpu_test_support.hpp"
#include "onnx_test_graphs.hpp"
#include "test_folder.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "spmd/backends/cuda/models.hpp"
#include "spmd/models/onnx_classifier.hpp"
#include "spmd/models/onnx_graph.hpp"
#include "spmd/models/onnx_predictor.hpp"
#include "spmd/runtime/error.hpp"

namespace {

using spmd::test::OnnxTestGraph;
using Dims = std::vector<std::int64_t>;
const Dims kRow{3, 8, 8};

std::vector<float> random_rows(std::int64_t rows, std::int64_t size, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(rows * size));
  for (auto& v : x) v = u(rng);
  return x;
}

// Output 0 of the CPU runner on x [rows, row...].
std::vector<float> run_cpu(const std::shared_ptr<const spmd::models::OnnxGraph>& graph, const Dims& row,
                           const std::vector<float>& x, std::int64_t rows, int& classes) {
  spmd::models::OnnxRunner runner(graph);
  Dims shape{rows};
  shape.insert(shape.end(), row.begin(), row.end());
  runner.input(0).reset(spmd::ops::ElemType::Float32, shape);
  runner.input(0).f.assign(x.begin(), x.end());
  runner.run();
  classes = static_cast<int>(runner.output(0).size() / rows);
  return {runner.output(0).f.begin(), runner.output(0).f.end()};
}

// The same through the CUDA eval predictor, its output read as is (as "probabilities").
std::vector<float> run_gpu(const std::shared_ptr<const spmd::models::OnnxGraph>& graph, const Dims& row,
                           const std::vector<float>& x, std::int64_t rows, int classes) {
  spmd::models::OnnxPredictorSpec spec{graph, {}, spmd::models::OnnxOutput::Probabilities, classes, classes};
  spec.input.row = row;
  auto predictor = spmd::backends::cuda::make_onnx_predictor_cuda(spmd::test::cuda_device(), spec, rows);
  std::vector<std::int32_t> predicted(static_cast<std::size_t>(rows));
  std::vector<float> y(static_cast<std::size_t>(rows * classes));
  predictor->predict(x.data(), rows, predicted.data(), y.data());
  return y;
}

void expect_close(const std::vector<float>& cpu, const std::vector<float>& gpu, const std::string& what) {
  ASSERT_EQ(cpu.size(), gpu.size()) << what;
  int bad = 0;
  for (std::size_t k = 0; k < cpu.size() && bad < 5; ++k)
    if (!(std::fabs(cpu[k] - gpu[k]) <= 1e-5f * std::max(1.0f, std::fabs(cpu[k])))) {
      ADD_FAILURE() << what << ": element " << k << " CPU " << cpu[k] << " GPU " << gpu[k];
      ++bad;
    }
}

// Saves and loads the graph `build` makes; the graph's output must be "y".
std::shared_ptr<const spmd::models::OnnxGraph> load(const std::function<void(OnnxTestGraph&)>& build, int opset = 13,
                                                    const Dims& row = kRow) {
  static spmd::test::TestFolder folder("spmd-cuda-onnx");
  static int counter = 0;
  OnnxTestGraph g(row, opset);
  build(g);
  const std::string path = folder.file("g" + std::to_string(counter++) + ".onnx");
  g.save(path);
  return spmd::models::OnnxGraph::load(path);
}

void compare_on_gpu(const std::function<void(OnnxTestGraph&)>& build, const std::string& what, int opset = 13) {
  const auto graph = load(build, opset);
  for (const std::int64_t rows : {1, 5}) {
    const auto x = random_rows(rows, 3 * 8 * 8, static_cast<std::uint32_t>(rows));
    int classes = 0;
    const auto cpu = run_cpu(graph, kRow, x, rows, classes);
    expect_close(cpu, run_gpu(graph, kRow, x, rows, classes), what + " on " + std::to_string(rows) + " rows");
  }
}

// x -> op(x) -> Flatten -> y: every element of the op's output compared.
std::function<void(OnnxTestGraph&)> flattened(const std::function<void(OnnxTestGraph&)>& body) {
  return [body](OnnxTestGraph& g) {
    body(g);
    g.node("Flatten", {"h"}, {"y"});
  };
}

struct Case {
  std::function<void(OnnxTestGraph&)> build;
  std::string what;
  int opset = 13;
};

// One graph per op family, every float op the CUDA backend has.
std::vector<Case> op_cases() {
  std::vector<Case> cases;
  cases.push_back({flattened([](OnnxTestGraph& g) {
    g.weights("W", {4, 3, 3, 3});
    g.weights("B", {4});
    auto& n = g.node("Conv", {"x", "W", "B"}, {"h"});
    OnnxTestGraph::attr(n, "pads", Dims{1, 1, 1, 1});
    OnnxTestGraph::attr(n, "strides", Dims{2, 2});
  }), "Conv 3x3 stride 2 pads 1"});
  cases.push_back({flattened([](OnnxTestGraph& g) {
    g.weights("W", {6, 1, 3, 3});
    auto& n = g.node("Conv", {"x", "W"}, {"h"});
    OnnxTestGraph::attr(n, "group", std::int64_t{3});
    OnnxTestGraph::attr(n, "dilations", Dims{2, 2});
    OnnxTestGraph::attr(n, "pads", Dims{2, 1, 2, 0});
  }), "Conv grouped, dilated, asymmetric pads"});
  cases.push_back({flattened([](OnnxTestGraph& g) {
    g.weights("W", {5, 3, 1, 1});
    g.weights("B", {5});
    g.node("Conv", {"x", "W", "B"}, {"h"});
  }), "Conv 1x1"});
  cases.push_back({flattened([](OnnxTestGraph& g) {
    g.weights("W", {2, 3, 2, 2});
    auto& n = g.node("Conv", {"x", "W"}, {"h"});
    OnnxTestGraph::attr(n, "auto_pad", std::string("SAME_LOWER"));
    OnnxTestGraph::attr(n, "strides", Dims{3, 3});
  }), "Conv auto_pad SAME_LOWER"});
  cases.push_back({flattened([](OnnxTestGraph& g) {
    auto& n = g.node("MaxPool", {"x"}, {"h"});
    OnnxTestGraph::attr(n, "kernel_shape", Dims{3, 3});
    OnnxTestGraph::attr(n, "strides", Dims{2, 2});
    OnnxTestGraph::attr(n, "pads", Dims{1, 1, 1, 1});
  }), "MaxPool"});
  cases.push_back({flattened([](OnnxTestGraph& g) {
    auto& n = g.node("AveragePool", {"x"}, {"h"});
    OnnxTestGraph::attr(n, "kernel_shape", Dims{3, 3});
    OnnxTestGraph::attr(n, "strides", Dims{2, 2});
    OnnxTestGraph::attr(n, "pads", Dims{1, 1, 1, 1});
    OnnxTestGraph::attr(n, "count_include_pad", std::int64_t{1});
    OnnxTestGraph::attr(n, "ceil_mode", std::int64_t{1});
  }), "AveragePool count_include_pad ceil_mode"});
  cases.push_back({flattened([](OnnxTestGraph& g) { g.node("GlobalAveragePool", {"x"}, {"h"}); }), "GlobalAveragePool"});
  cases.push_back({flattened([](OnnxTestGraph& g) {
    g.weights("s", {3});
    g.weights("b", {3});
    g.weights("m", {3});
    g.weights("v", {3}, 0.5f, 2.0f);
    g.node("BatchNormalization", {"x", "s", "b", "m", "v"}, {"h"});
  }), "BatchNormalization"});
  cases.push_back({flattened([](OnnxTestGraph& g) {
    g.weights("c", {3, 1, 1});
    g.weights("r", {1, 8});
    g.weights("two", {1}, 0, 0, {2.0f});
    g.weights("lo", {}, 0, 0, {-0.5f});
    g.weights("hi", {}, 0, 0, {0.75f});
    g.node("Add", {"x", "c"}, {"a"});
    g.node("Mul", {"a", "r"}, {"b"});
    g.node("Pow", {"b", "two"}, {"p"});
    g.node("Sqrt", {"p"}, {"q"});
    g.node("Sub", {"q", "c"}, {"s"});
    g.node("Erf", {"s"}, {"e"});
    g.node("Sigmoid", {"e"}, {"g"});
    g.node("Tanh", {"s"}, {"t"});
    g.node("Div", {"g", "two"}, {"d"});
    g.node("Exp", {"d"}, {"ex"});
    g.node("Log", {"ex"}, {"l"});
    g.node("Add", {"l", "t"}, {"u"});
    auto& lr = g.node("LeakyRelu", {"u"}, {"k"});
    OnnxTestGraph::attr(lr, "alpha", 0.2f);
    g.node("Clip", {"k", "lo", "hi"}, {"cl"});
    g.node("Relu", {"s"}, {"re"});
    g.node("Add", {"cl", "re"}, {"h"});
  }), "Add Mul Pow Sqrt Sub Erf Sigmoid Tanh Div Exp Log LeakyRelu Clip Relu"});
  cases.push_back({flattened([](OnnxTestGraph& g) {
    auto& n = g.node("Softmax", {"x"}, {"h"});
    OnnxTestGraph::attr(n, "axis", std::int64_t{1});
  }), "Softmax axis 1 (opset 13)"});
  cases.push_back({flattened([](OnnxTestGraph& g) {
    auto& n = g.node("LogSoftmax", {"x"}, {"h"});
    OnnxTestGraph::attr(n, "axis", std::int64_t{2});
  }), "LogSoftmax axis 2 (opset 11: flattened from the axis)", 11});
  cases.push_back({flattened([](OnnxTestGraph& g) {
    auto& n = g.node("ReduceMean", {"x"}, {"h"});
    OnnxTestGraph::attr(n, "axes", Dims{1, 3});
  }), "ReduceMean axes 1, 3"});
  cases.push_back({flattened([](OnnxTestGraph& g) {
    auto& t = g.node("Transpose", {"x"}, {"t"});
    OnnxTestGraph::attr(t, "perm", Dims{0, 2, 3, 1});
    g.node("Relu", {"x"}, {"r"});
    auto& c = g.node("Concat", {"x", "r"}, {"c"});
    OnnxTestGraph::attr(c, "axis", std::int64_t{2});
    g.ints("pads", {0, 0, 1, 2, 0, 1, 0, 1});
    g.weights("v", {}, 0, 0, {0.5f});
    g.node("Pad", {"c", "pads", "v"}, {"p"});
    auto& reflect = g.node("Pad", {"t", "pads"}, {"q"});
    OnnxTestGraph::attr(reflect, "mode", std::string("reflect"));
    g.node("Flatten", {"q"}, {"fq"});
    g.node("Flatten", {"p"}, {"fp"});
    auto& all = g.node("Concat", {"fq", "fp"}, {"h"});
    OnnxTestGraph::attr(all, "axis", std::int64_t{1});
  }), "Transpose Concat Pad (constant, reflect)"});
  cases.push_back({[](OnnxTestGraph& g) {
    g.node("Flatten", {"x"}, {"f"});
    g.weights("W", {7, 192});
    g.weights("C", {7});
    auto& n = g.node("Gemm", {"f", "W", "C"}, {"y"});
    OnnxTestGraph::attr(n, "transB", std::int64_t{1});
    OnnxTestGraph::attr(n, "alpha", 0.5f);
    OnnxTestGraph::attr(n, "beta", 2.0f);
  }, "Gemm transB alpha beta"});
  // Reshape to [batch, 24, 8] by a shape computed from Shape(x) on the host, then MatMul with
  // a 2-D and a broadcast 3-D right operand.
  cases.push_back({[](OnnxTestGraph& g) {
    g.node("Shape", {"x"}, {"s"});
    g.ints("zero", {0});
    g.node("Gather", {"s", "zero"}, {"b"});
    g.ints("rest", {24, 8});
    auto& c = g.node("Concat", {"b", "rest"}, {"shape"});
    OnnxTestGraph::attr(c, "axis", std::int64_t{0});
    g.node("Reshape", {"x", "shape"}, {"r"});
    g.weights("W", {8, 5});
    g.node("MatMul", {"r", "W"}, {"m"});
    g.weights("V", {1, 5, 3});
    g.node("MatMul", {"m", "V"}, {"h"});
    g.node("Flatten", {"h"}, {"y"});
  }, "Shape Gather Concat Reshape MatMul"});
  cases.push_back({[](OnnxTestGraph& g) {
    g.ints("starts", {1, 7});
    g.ints("ends", {3, -100});
    g.ints("axes", {1, -1});
    g.ints("steps", {1, -2});
    g.node("Slice", {"x", "starts", "ends", "axes", "steps"}, {"s"});
    g.ints("idx", {2, 0, 2});
    auto& n = g.node("Gather", {"s", "idx"}, {"gt"});
    OnnxTestGraph::attr(n, "axis", std::int64_t{2});
    auto& c = g.node("Cast", {"gt"}, {"c"});
    OnnxTestGraph::attr(c, "to", std::int64_t{1});
    g.node("Flatten", {"c"}, {"y"});
  }, "Slice (negative step) Gather Cast of float data"});
  cases.push_back({flattened([](OnnxTestGraph& g) {
    auto& m = g.node("ReduceMean", {"x"}, {"m"});  // a scalar computed in the run, read back for Clip and Pad
    OnnxTestGraph::attr(m, "keepdims", std::int64_t{0});
    g.weights("lo", {}, 0, 0, {-0.25f});
    g.node("Clip", {"x", "lo", "m"}, {"c"});
    g.ints("pads", {0, 0, 1, 1, 0, 0, 1, 1});
    g.node("Pad", {"c", "pads", "m"}, {"h"});
  }), "Clip and Pad with bounds computed in the run"});
  cases.push_back({flattened([](OnnxTestGraph& g) {
    g.weights("U", {1, 3, 8, 4});  // leading [1, 3] against [batch, 3]: one GEMM per matrix
    g.node("MatMul", {"x", "U"}, {"h"});
  }), "MatMul with partly broadcast leading dimensions"});
  cases.push_back({flattened([](OnnxTestGraph& g) {
    g.weights("slope", {3, 1, 1});
    g.weights("row", {8});
    g.ints("ones", {1, 1, 8, 1});
    g.node("Elu", {"x"}, {"a"});
    g.node("HardSigmoid", {"x"}, {"b"});
    g.node("Softplus", {"x"}, {"c"});
    g.node("Softsign", {"x"}, {"d"});
    g.node("Selu", {"x"}, {"e"});
    g.node("PRelu", {"x", "slope"}, {"f"});
    g.node("Max", {"a", "b", "row"}, {"m"});
    g.node("Min", {"c", "d"}, {"n"});
    g.node("Sum", {"m", "n", "e"}, {"s"});
    g.node("Mean", {"s", "f"}, {"t"});
    g.node("Shape", {"x"}, {"sx"});
    g.node("Expand", {"row", "sx"}, {"r"});  // of host values: on the host, uploaded
    g.node("Expand", {"e", "ones"}, {"re"});  // of a GPU tensor: on the GPU
    g.node("Sum", {"t", "r", "re"}, {"h"});
  }), "Elu HardSigmoid Softplus Softsign Selu PRelu Max Min Sum Mean Expand"});
  cases.push_back({flattened([](OnnxTestGraph& g) {
    g.node("HardSwish", {"x"}, {"a"});
    g.node("Mish", {"x"}, {"b"});
    auto& celu = g.node("Celu", {"x"}, {"c"});
    OnnxTestGraph::attr(celu, "alpha", 0.7f);
    auto& thr = g.node("ThresholdedRelu", {"x"}, {"d"});
    OnnxTestGraph::attr(thr, "alpha", 0.3f);
    auto& shrink = g.node("Shrink", {"x"}, {"e"});
    OnnxTestGraph::attr(shrink, "lambd", 0.4f);
    OnnxTestGraph::attr(shrink, "bias", 0.1f);
    g.node("Sign", {"x"}, {"f"});
    g.weights("four", {}, 0, 0, {4.0f});
    g.node("Mul", {"x", "four"}, {"x4"});
    g.node("Round", {"x4"}, {"r"});
    g.node("Gelu", {"x"}, {"ge"});
    auto& gt = g.node("Gelu", {"x"}, {"gt"});
    OnnxTestGraph::attr(gt, "approximate", std::string("tanh"));
    auto& all = g.node("Concat", {"a", "b", "c", "d", "e", "f", "r", "ge", "gt"}, {"h"});
    OnnxTestGraph::attr(all, "axis", std::int64_t{1});
  }), "HardSwish Mish Celu ThresholdedRelu Shrink Sign Round Gelu (both)", 20});
  cases.push_back({flattened([](OnnxTestGraph& g) {
    g.weights("s", {8});
    g.weights("b", {8});
    auto& ln = g.node("LayerNormalization", {"x", "s", "b"}, {"l"});
    OnnxTestGraph::attr(ln, "epsilon", 1e-3f);
    g.weights("s1", {1});
    auto& ln2 = g.node("LayerNormalization", {"x", "s1"}, {"l2"});
    OnnxTestGraph::attr(ln2, "axis", std::int64_t{1});
    g.weights("c", {3});
    g.weights("d", {3});
    g.node("InstanceNormalization", {"x", "c", "d"}, {"i"});
    auto& all = g.node("Concat", {"l", "l2", "i"}, {"h"});
    OnnxTestGraph::attr(all, "axis", std::int64_t{1});
  }), "LayerNormalization (last axis; from axis 1, one Scale) InstanceNormalization", 17});
  for (const int opset : {18, 21}) {
    cases.push_back({flattened([opset](OnnxTestGraph& g) {
      g.weights("W", {6, 3, 1, 1});
      g.node("Conv", {"x", "W"}, {"c"});
      g.weights("s", {opset >= 21 ? 6 : 3});
      g.weights("b", {opset >= 21 ? 6 : 3});
      auto& n = g.node("GroupNormalization", {"c", "s", "b"}, {"h"});
      OnnxTestGraph::attr(n, "num_groups", std::int64_t{3});
    }), "GroupNormalization (opset " + std::to_string(opset) + ")", opset});
  }
  return cases;
}

// Needs no GPU: the plan takes every case (shapes linear in the batch, each node placed).
TEST(CudaOnnx, EveryOpCaseIsPlannedForTheGpu) {
  for (const auto& c : op_cases()) EXPECT_EQ(spmd::backends::cuda::onnx_unsupported_cuda(*load(c.build, c.opset)), "") << c.what;
}

TEST(CudaOnnx, EveryOpCaseMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  for (const auto& c : op_cases()) compare_on_gpu(c.build, c.what, c.opset);
}

// The loader's fusion (Conv / Gemm followed by Relu -> one node with spmd_relu = 1): the GPU
// op applies the ReLU after the bias, as the Relu node did on the CPU. (Add + Relu, the end of
// a residual block, is fused by the loader in the ResNet-style PyTorch model below.)
TEST(CudaOnnx, FusedReluAttributeIsHonoured) {
  SKIP_WITHOUT_GPU();
  const auto conv_gemm = [](bool relu_nodes) {
    return [relu_nodes](OnnxTestGraph& g) {
      g.weights("W", {4, 3, 3, 3});
      g.weights("B", {4});
      g.node("Conv", {"x", "W", "B"}, {relu_nodes ? "c" : "cr"});
      if (relu_nodes) g.node("Relu", {"c"}, {"cr"});
      g.node("Flatten", {"cr"}, {"f"});
      g.weights("G", {144, 6});
      g.weights("D", {6});
      g.node("Gemm", {"f", "G", "D"}, {relu_nodes ? "z" : "y"});
      if (relu_nodes) g.node("Relu", {"z"}, {"y"});
    };
  };
  const auto reference = load(conv_gemm(true));
  const auto fused = load(conv_gemm(false));
  for (const auto& node : fused->nodes())  // as the loader's rewrite leaves them
    const_cast<spmd::ops::GraphNode&>(node).attrs.ints["spmd_relu"] = 1;
  const auto x = random_rows(4, 3 * 8 * 8, 7);
  int classes = 0;
  const auto cpu = run_cpu(reference, kRow, x, 4, classes);
  expect_close(cpu, run_gpu(fused, kRow, x, 4, classes), "Conv and Gemm with spmd_relu");
}

// The folder of tests/support/torch_models.py's exports: $SPMD_ONNX_MODELS (tools/device
// carries them there), else made now with python3 and torch; "" when neither is possible.
std::string torch_models(const spmd::test::TestFolder& folder) {
  if (const char* dir = std::getenv("SPMD_ONNX_MODELS"); dir && *dir) return dir;
  const std::string command = "/usr/bin/python3 " SPMD_SOURCE_DIR "/tests/support/torch_models.py export " +
                              folder.path().string() + " > /dev/null 2>&1";
  return std::system(command.c_str()) == 0 ? folder.path().string() : "";
}

// The PyTorch-exported models through eval's predictors (Fashion-MNIST-shaped NHWC images,
// mapped to each model's input; bytes decoded on the GPU): probabilities within 1e-5 of the
// CPU's, the same class unless the CPU's top two are within 2e-5.
TEST(CudaOnnx, TorchModelsThroughTheEvalPredictorMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  spmd::test::TestFolder folder("spmd-cuda-torch");
  const std::string dir = torch_models(folder);
  if (dir.empty()) GTEST_SKIP() << "no PyTorch models: set SPMD_ONNX_MODELS or install python3-torch";
  const std::int64_t rows = 300, size = 28 * 28;
  std::mt19937 rng(3);
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(rows * size));
  for (auto& b : bytes) b = static_cast<std::uint8_t>(rng() % 256);
  spmd::models::ByteTable table{};
  for (int v = 0; v < 256; ++v) table[static_cast<std::size_t>(v)] = static_cast<float>(v / 255.0);
  std::vector<float> x(bytes.size());
  for (std::size_t k = 0; k < x.size(); ++k) x[k] = table[bytes[k]];
  for (const char* name : {"lenet", "resnet", "mlp", "channels_last", "mobile"}) {
    const auto model = spmd::models::make_onnx_classifier(dir + "/" + name + ".onnx");
    model->check_sample_shape({28, 28, 1}, "test images");
    const int classes = model->classes();
    spmd::runtime::DeviceInfo host;
    const auto n = static_cast<std::size_t>(rows * classes);
    std::vector<float> cpu(n), gpu(n), gpu_bytes(n);
    std::vector<std::int32_t> cpu_class(rows), gpu_class(rows), bytes_class(rows);
    model->make_predictor(host, rows)->predict(x.data(), rows, cpu_class.data(), cpu.data());
    const auto predictor = model->make_predictor(spmd::test::cuda_device(), rows);
    predictor->predict(x.data(), rows, gpu_class.data(), gpu.data());
    ASSERT_TRUE(predictor->decodes_bytes());
    predictor->predict_bytes(bytes.data(), rows, table, bytes_class.data(), gpu_bytes.data());
    expect_close(cpu, gpu, std::string(name) + " (float rows)");
    EXPECT_EQ(gpu, gpu_bytes) << name << ": bytes decoded on the GPU give the floats' results";
    for (std::int64_t r = 0; r < rows; ++r) {
      std::vector<float> p(cpu.begin() + r * classes, cpu.begin() + (r + 1) * classes);
      std::sort(p.begin(), p.end());
      if (p[p.size() - 1] - p[p.size() - 2] > 2e-5f) EXPECT_EQ(cpu_class[static_cast<std::size_t>(r)], gpu_class[static_cast<std::size_t>(r)]) << name << " row " << r;
    }
  }
}

// Needs no GPU: the plan takes every PyTorch-exported model but the recurrent ones, shapes
// linear in the batch and every node placed.
TEST(CudaOnnx, TorchModelsArePlannedForTheGpu) {
  spmd::test::TestFolder folder("spmd-cuda-torch");
  const std::string dir = torch_models(folder);
  if (dir.empty()) GTEST_SKIP() << "no PyTorch models: set SPMD_ONNX_MODELS or install python3-torch";
  for (const char* name : {"lenet", "resnet", "mlp", "channels_last", "mobile"})
    EXPECT_EQ(spmd::backends::cuda::onnx_unsupported_cuda(*spmd::models::OnnxGraph::load(dir + "/" + name + ".onnx")), "")
        << name;
  // The recurrent ones are refused naming the node: the CUDA backend lacks LSTM, GRU and RNN.
  for (const char* name : {"lstm", "gru", "rnn"}) {
    const std::string why = spmd::backends::cuda::onnx_unsupported_cuda(*spmd::models::OnnxGraph::load(dir + "/" + name + ".onnx"));
    EXPECT_NE(why.find("which the CUDA backend lacks"), std::string::npos) << name << ": " << why;
  }
  EXPECT_EQ(spmd::backends::cuda::onnx_unsupported_cuda(*spmd::models::OnnxGraph::load(dir + "/lstm.onnx")),
            "node '/lstm/LSTM' (LSTM, which the CUDA backend lacks)");
}

// Needs no GPU: a graph loaded for one named output keeps the nodes that output needs, no
// others (`spmd eval --onnx-output`): a model whose other output needs an op the GPU lacks runs
// there when its class scores do not.
TEST(CudaOnnx, ANamedOutputKeepsOnlyTheNodesItNeeds) {
  static spmd::test::TestFolder folder("spmd-cuda-onnx-output");
  OnnxTestGraph g(kRow);
  g.node("Flatten", {"x"}, {"f"});
  g.node("Relu", {"f"}, {"y"});
  g.node("Sin", {"f"}, {"aux"});  // an op the CPU runs and the CUDA backend lacks
  g.output("aux");
  const std::string path = folder.file("two.onnx");
  g.save(path);
  const auto both = spmd::models::OnnxGraph::load(path);
  EXPECT_EQ(both->outputs().size(), 2u);
  EXPECT_EQ(both->node_count(), 3u);
  EXPECT_EQ(spmd::backends::cuda::onnx_unsupported_cuda(*both), "node 'aux' (Sin, which the CUDA backend lacks)");
  const auto scores = spmd::models::OnnxGraph::load(path, "y");
  ASSERT_EQ(scores->outputs().size(), 1u);
  EXPECT_EQ(scores->outputs().front().name, "y");
  EXPECT_EQ(scores->node_count(), 2u);
  EXPECT_EQ(spmd::backends::cuda::onnx_unsupported_cuda(*scores), "");
  const auto aux = spmd::models::OnnxGraph::load(path, "aux");
  EXPECT_EQ(aux->node_count(), 2u);
  try {
    spmd::models::OnnxGraph::load(path, "logits");
    ADD_FAILURE() << "an output the file lacks was taken";
  } catch (const spmd::Error& e) {
    EXPECT_NE(std::string(e.what()).find("has no output 'logits'; its outputs: 'y', 'aux'"), std::string::npos) << e.what();
  }
}

// Needs no GPU: what the support check says before any device is used.
TEST(CudaOnnx, SupportCheckNamesTheNodeAndTheOpTheGpuLacks) {
  const auto supported = load(flattened([](OnnxTestGraph& g) { g.node("Relu", {"x"}, {"h"}); }));
  EXPECT_EQ(spmd::backends::cuda::onnx_unsupported_cuda(*supported), "");
  const auto lacking = load(flattened([](OnnxTestGraph& g) {
    g.node("Relu", {"x"}, {"r"});
    g.node("Sin", {"r"}, {"h"});  // an op the CPU runs and the CUDA backend lacks
  }));
  EXPECT_EQ(spmd::backends::cuda::onnx_unsupported_cuda(*lacking), "node 'h' (Sin, which the CUDA backend lacks)");
  const auto to_ints = load([](OnnxTestGraph& g) {
    g.node("Flatten", {"x"}, {"f"});
    auto& c = g.node("Cast", {"f"}, {"c"});
    OnnxTestGraph::attr(c, "to", std::int64_t{7});
    auto& back = g.node("Cast", {"c"}, {"y"});
    OnnxTestGraph::attr(back, "to", std::int64_t{1});
  });
  EXPECT_EQ(spmd::backends::cuda::onnx_unsupported_cuda(*to_ints),
            "node 'c' (Cast giving int64 from float data, which the CUDA backend does not run)");
  // What an op the GPU has cannot run is known from the node and the planned shapes: refused
  // at load, never in the middle of a run (ONNX's node tests found these failing there).
  const auto to_half = load(flattened([](OnnxTestGraph& g) {
    auto& c = g.node("Cast", {"x"}, {"h"});
    OnnxTestGraph::attr(c, "to", std::int64_t{10});
  }));
  EXPECT_EQ(spmd::backends::cuda::onnx_unsupported_cuda(*to_half),
            "node 'h' (Cast: a cast to float16 / bfloat16 (rounded to it on the CPU only))");
  const Dims volume{2, 4, 4, 4};  // [N, 2, 4, 4, 4]: 3-D convolutions and pools run on the CPU
  const auto conv3d = load(flattened([](OnnxTestGraph& g) {
    g.weights("W", {3, 2, 2, 2, 2});
    g.node("Conv", {"x", "W"}, {"h"});
  }), 13, volume);
  EXPECT_EQ(spmd::backends::cuda::onnx_unsupported_cuda(*conv3d),
            "node 'h' (Conv: input [1, 2, 4, 4, 4] is not [N, C, H, W] or [N, C, L])");
  const auto pool3d = load(flattened([](OnnxTestGraph& g) {
    auto& p = g.node("MaxPool", {"x"}, {"h"});
    OnnxTestGraph::attr(p, "kernel_shape", Dims{2, 2, 2});
  }), 13, volume);
  EXPECT_EQ(spmd::backends::cuda::onnx_unsupported_cuda(*pool3d), "node 'h' (MaxPool: kernel_shape must have 1 or 2 values)");
  const auto pool2d = load(flattened([](OnnxTestGraph& g) {
    auto& p = g.node("AveragePool", {"x"}, {"h"});
    OnnxTestGraph::attr(p, "kernel_shape", Dims{2, 2});
  }));
  EXPECT_EQ(spmd::backends::cuda::onnx_unsupported_cuda(*pool2d), "");
  // Shape arithmetic alone runs on the host: Shape -> Cast is not a GPU node.
  const auto host_only = load([](OnnxTestGraph& g) {
    g.node("Flatten", {"x"}, {"y"});
    g.node("Shape", {"x"}, {"s"});
    auto& cast = g.node("Cast", {"s"}, {"sizes"});
    OnnxTestGraph::attr(cast, "to", std::int64_t{1});
    g.output("sizes");  // read, or the load would drop both nodes
  });
  EXPECT_EQ(spmd::backends::cuda::onnx_unsupported_cuda(*host_only), "");
  // An If over host data only (a condition from the batch size): no CPU op runs it on the host
  // there, so the plan refuses it (auto runs such a model on the CPU).
  const auto host_if = load([](OnnxTestGraph& g) {
    g.node("Flatten", {"x"}, {"y"});
    g.node("Shape", {"x"}, {"s"});
    g.node("ReduceProd", {"s"}, {"p"});
    g.node("Equal", {"p", "p"}, {"cond"});
    auto& branch_if = g.node("If", {"cond"}, {"z"});
    for (const char* name : {"then_branch", "else_branch"}) {
      auto* a = branch_if.add_attribute();
      a->set_name(name);
      a->set_type(onnx::AttributeProto::GRAPH);
      onnx::GraphProto& b = *a->mutable_g();
      b.set_name(name);
      auto* c = b.add_node();
      c->set_op_type("Constant");
      c->add_output(std::string(name) + "_z");
      auto* v = c->add_attribute();
      v->set_name("value_int");
      v->set_type(onnx::AttributeProto::INT);
      v->set_i(1);
      b.add_output()->set_name(std::string(name) + "_z");
    }
    g.output("z", onnx::TensorProto::INT64);
  });
  EXPECT_EQ(spmd::backends::cuda::onnx_unsupported_cuda(*host_if),
            "node 'z' (If, whose sub-graphs the CUDA backend does not run)");
}

}  // namespace
