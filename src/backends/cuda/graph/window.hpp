#pragma once
// The spatial geometry of a Conv or pooling node on the GPU, from its attributes and the
// planned shapes of its input [N, C, H, W] (or [N, C, L], run as H = 1) and output: ONNX's
// rules for strides, dilations, pads and auto_pad, as the CPU ops read them.
#include <cstdint>
#include <string>
#include <vector>

#include "graph_op.hpp"

namespace spmd::backends::cuda {

struct Window {
  std::int64_t n = 0, c = 0, h = 0, w = 0;  // input
  std::int64_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1;
  std::int64_t top = 0, left = 0;  // the padding before the image (after it: implied by the output)
  std::int64_t bottom = 0, right = 0;
  std::int64_t oh = 0, ow = 0;  // output
};

Window window_of(const CudaGraphCall& call, const DeviceTensor& x, const DeviceTensor& y, std::int64_t kh, std::int64_t kw);

// The plan's check (CudaGraphOpLimits) of a windowed node: "" when its input is [N, C, H, W]
// or [N, C, L] (3-D convolutions and pools run on the CPU), else why not.
std::string window_limits(const ops::GraphNode& node, const std::vector<std::vector<std::int64_t>>& in_shapes);

}  // namespace spmd::backends::cuda
