#pragma once
// The spatial geometry of a Conv or pooling node over NCHW tensors with two spatial
// dimensions (1-D ones run as height 1), shared by graph_conv.cpp and graph_pool.cpp.
#include <cstdint>
#include <vector>

#include "spmd/ops/graph_op.hpp"

namespace spmd::ops {

// The spatial geometry of a Conv or pooling node on input [N, C, H, W].
struct Window {
  std::int64_t n = 0, c = 0, h = 0, w = 0;  // input
  std::int64_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1;
  std::int64_t top = 0, left = 0, bottom = 0, right = 0;
  std::int64_t oh = 0, ow = 0;
};

// Reads shape, kernel_shape, strides, dilations, pads and auto_pad (ONNX's rules); 1-D
// inputs [N, C, L] are [N, C, 1, L].
Window window_of(const OpCall& call, const Tensor& x, std::int64_t kh, std::int64_t kw, bool ceil_mode);
// fail() where a pool's pad is not smaller than its kernel along that axis: a window wholly in
// the padding has no value to take (ONNX Runtime refuses such pools too; PyTorch cannot export
// one). pads as [begin..., end...], kernel one value per pads entry's axis.
void check_pool_pads(const OpCall& call, const std::vector<std::int64_t>& pads, const std::vector<std::int64_t>& kernel);

std::vector<std::int64_t> output_shape(const Tensor& x, std::int64_t channels, const Window& g);

}  // namespace spmd::ops
