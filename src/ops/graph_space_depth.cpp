// DepthToSpace and SpaceToDepth: PyTorch's nn.PixelShuffle / PixelUnshuffle (CRD and DCR
// orders), TensorFlow's depth_to_space / space_to_depth. Each is a reshape to six dimensions, a
// transpose and a reshape back: one strided copy.
#include <string>
#include <vector>

#include "spmd/ops/graph_op.hpp"
#include "strided_copy.hpp"

namespace spmd::ops {
namespace {

struct Blocked {
  std::int64_t n, c, h, w, b;
};

Blocked blocked_input(const OpCall& c, const Tensor& x) {
  if (x.shape.size() != 4) c.fail("needs an input [N, C, H, W], not " + to_string(x.shape));
  const std::int64_t b = c.node.attrs.i("blocksize", 0);
  c.check_window_ints("blocksize", {b});  // at least 1, and b^2 far from overflowing
  return {x.shape[0], x.shape[1], x.shape[2], x.shape[3], b};
}

// y6 = x viewed as `view`, its axes in the order `perm`; y then takes the shape `out`.
void permuted_copy(const Tensor& x, Tensor& y, const std::vector<std::int64_t>& view, const std::vector<int>& perm,
                   std::vector<std::int64_t> out) {
  const auto view_strides = strides_of(view);
  std::vector<std::int64_t> shape, strides;
  for (const int p : perm) {
    shape.push_back(view[static_cast<std::size_t>(p)]);
    strides.push_back(view_strides[static_cast<std::size_t>(p)]);
  }
  y.reset(x.type, shape);
  if (x.type == ElemType::Float32) strided_copy(shape, strides, 0, x.f.data(), y.f.data());
  else strided_copy(shape, strides, 0, x.i.data(), y.i.data());
  y.shape = std::move(out);
}

// [N, C, H, W] -> [N, C / b^2, H b, W b]. DCR (the default) reads the channels as
// [b, b, C / b^2], CRD (PixelShuffle's order) as [C / b^2, b, b].
void depth_to_space(const OpCall& c) {
  const Tensor& x = c.input(0);
  const auto [n, ch, h, w, b] = blocked_input(c, x);
  if (ch % (b * b) != 0) c.fail(std::to_string(ch) + " channels are no multiple of blocksize^2 = " + std::to_string(b * b));
  const std::int64_t depth = ch / (b * b);
  const std::string mode = c.node.attrs.s("mode", "DCR");
  if (mode == "DCR") permuted_copy(x, *c.out[0], {n, b, b, depth, h, w}, {0, 3, 4, 1, 5, 2}, {n, depth, h * b, w * b});
  else if (mode == "CRD") permuted_copy(x, *c.out[0], {n, depth, b, b, h, w}, {0, 1, 4, 2, 5, 3}, {n, depth, h * b, w * b});
  else c.fail("mode '" + mode + "' is neither DCR nor CRD");
}

// [N, C, H, W] -> [N, C b^2, H / b, W / b], the block's offsets outermost in the channels.
void space_to_depth(const OpCall& c) {
  const Tensor& x = c.input(0);
  const auto [n, ch, h, w, b] = blocked_input(c, x);
  if (h % b != 0 || w % b != 0)
    c.fail("height " + std::to_string(h) + " and width " + std::to_string(w) + " must be multiples of blocksize " + std::to_string(b));
  permuted_copy(x, *c.out[0], {n, ch, h / b, b, w / b, b}, {0, 3, 5, 1, 2, 4}, {n, ch * b * b, h / b, w / b});
}

}  // namespace

SPMD_REGISTER_GRAPH_OP("DepthToSpace", depth_to_space);
SPMD_REGISTER_GRAPH_OP("SpaceToDepth", space_to_depth);

}  // namespace spmd::ops
