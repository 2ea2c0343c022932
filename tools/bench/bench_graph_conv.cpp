// The ONNX graph's Conv op on a ResNet-18's layer shapes (224 x 224 input, one image a call, as
// eval's row chunks run it): ms, GFLOP/s and each layer's GFLOP/s relative to the 3x3 64->64
// layer at 56 x 56 of the same run. This VM's speed moves by up to 2x between placements; a
// ratio inside one run does not. Which path a layer takes (phase planes, im2col, the image
// itself, pixel rows) is graph_conv.cpp's choice by shape.
//   build/bench_graph_conv [ROUNDS]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#include "spmd/ops/graph_op.hpp"

extern "C" void openblas_set_num_threads(int);  // linked with libspmd; its threads would spin beside ours

namespace {

using spmd::ops::ElemType;
using spmd::ops::Tensor;

struct Layer {
  const char* name;
  int channels, size, out_channels, kernel, stride, pad;
};

constexpr Layer kLayers[] = {
    {"7x7/2 3->64 @224", 3, 224, 64, 7, 2, 3},     {"3x3 64->64 @56", 64, 56, 64, 3, 1, 1},
    {"3x3/2 64->128 @56", 64, 56, 128, 3, 2, 1},   {"1x1/2 64->128 @56", 64, 56, 128, 1, 2, 0},
    {"3x3 128->128 @28", 128, 28, 128, 3, 1, 1},   {"3x3/2 128->256 @28", 128, 28, 256, 3, 2, 1},
    {"3x3 256->256 @14", 256, 14, 256, 3, 1, 1},   {"3x3/2 256->512 @14", 256, 14, 512, 3, 2, 1},
    {"1x1/2 256->512 @14", 256, 14, 512, 1, 2, 0}, {"3x3 512->512 @7", 512, 7, 512, 3, 1, 1},
};

// Seconds per call of the Conv op (its prepared state kept, as the graph runner keeps it), and
// its FLOPs (2 per multiply-add).
std::pair<double, double> time_layer(const Layer& l, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1, 1);
  Tensor x, w, b, y;
  x.reset(ElemType::Float32, {1, l.channels, l.size, l.size});
  w.reset(ElemType::Float32, {l.out_channels, l.channels, l.kernel, l.kernel});
  b.reset(ElemType::Float32, {l.out_channels});
  for (auto* t : {&x, &w, &b})
    for (auto& v : t->f) v = u(rng);
  spmd::ops::GraphNode node{"Conv", l.name, 13, {}, {0, 1, 2}, {3}};
  node.attrs.int_lists["kernel_shape"] = {l.kernel, l.kernel};
  node.attrs.int_lists["strides"] = {l.stride, l.stride};
  node.attrs.int_lists["pads"] = {l.pad, l.pad, l.pad, l.pad};
  node.attrs.ints["spmd_relu"] = 1;
  const Tensor* in[] = {&x, &w, &b};
  Tensor* out[] = {&y};
  std::unique_ptr<spmd::ops::Prepared> prepared;
  spmd::ops::OpCall call{node, in, out};
  call.prepared = &prepared;
  call.constant_inputs = 2 | 4;
  const auto conv = spmd::ops::find_graph_op("Conv");
  conv(call);  // the prepared state and the scratch buffers
  int reps = 0;
  const auto start = std::chrono::steady_clock::now();
  double seconds = 0;
  while (seconds < 0.1 || reps < 5) {
    conv(call);
    ++reps;
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  const double pixels = static_cast<double>(y.shape[2] * y.shape[3]);
  return {seconds / reps, 2.0 * l.out_channels * pixels * l.channels * l.kernel * l.kernel};
}

}  // namespace

int main(int argc, char** argv) {
  openblas_set_num_threads(1);
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 3;
  std::mt19937 rng(1);
  std::printf("%-22s %5s %10s %10s %14s\n", "layer", "round", "ms", "GFLOP/s", "vs 3x3 @56");
  for (int r = 1; r <= rounds; ++r) {
    double reference = 0;
    std::vector<std::pair<double, double>> timed;
    for (const Layer& l : kLayers) timed.push_back(time_layer(l, rng));
    reference = timed[1].second / timed[1].first;
    for (std::size_t k = 0; k < timed.size(); ++k) {
      const double rate = timed[k].second / timed[k].first;
      std::printf("%-22s %5d %10.3f %10.1f %14.2f\n", kLayers[k].name, r, timed[k].first * 1e3, rate / 1e9, rate / reference);
    }
  }
}
