#pragma once
// The CNN's parameters as ONE flat float32 buffer with named views, so that checkpoints,
// SGD updates and gathers handle a single array. The table of tensors is derived from a
// CnnConfig (cnn_config.hpp); for the default config (Flax's ensembling guide's model) it is
//
//   tensor          Flax name        shape (Flax layout)   offset    fan_in
//   conv 0 kernel   Conv_0/kernel    [3, 3, 1, 32]  HWIO   0         9
//   conv 0 bias     Conv_0/bias      [32]                  288
//   conv 1 kernel   Conv_1/kernel    [3, 3, 32, 64] HWIO   320       288
//   conv 1 bias     Conv_1/bias      [64]                  18752
//   dense 0 kernel  Dense_0/kernel   [3136, 256]  [in,out] 18816     3136
//   dense 0 bias    Dense_0/bias     [256]                 821632
//   dense 1 kernel  Dense_1/kernel   [256, 10]    [in,out] 821888    256
//   dense 1 bias    Dense_1/bias     [10]                  824448
//
// 824458 floats. In general: Conv_l/{kernel,bias} for each conv layer, then Dense_j for
// each hidden dense layer and the classifier, in network order (the order cnn_init folds
// into the member's key). Each tensor starts at a multiple of 16 floats (a cache line);
// the gap before a tensor is zero and belongs to no tensor. The default config needs no
// gaps, so its layout is that of the checkpoints written before configs existed. No tail
// padding.
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "spmd/models/cnn_aligned.hpp"
#include "spmd/models/cnn_config.hpp"
#include "spmd/ops/op.hpp"

namespace spmd::models {

struct CnnTensorInfo {
  std::string name;          // Flax path, e.g. "Conv_1/kernel"
  int rank;                  // 1, 2 or 4
  std::array<int, 4> shape;  // first `rank` entries used
  std::size_t offset;        // in floats from the start of the flat buffer (a multiple of 16)
  std::size_t size;          // floats
  int fan_in;                // for kernels (lecun_normal); 0 for biases
};

// One conv layer: 3x3 SAME convolution [height, width, in] -> [height, width, out], ReLU,
// then 2x2 average pooling with stride 2 (VALID: floor) -> [pooled_height, pooled_width, out].
struct CnnConvLayer {
  int height, width;
  int in_channels, out_channels;
  int pooled_height, pooled_width;
  std::size_t kernel, bias;  // indices into CnnLayout::tensors()

  long pixels() const { return static_cast<long>(height) * width; }
  int patch() const { return 9 * in_channels; }  // im2col columns: the GEMM's k
  long padded_input_size() const { return static_cast<long>(height + 2) * (width + 2) * in_channels; }
  long output_size() const { return pixels() * out_channels; }
  long pooled_size() const { return static_cast<long>(pooled_height) * pooled_width * out_channels; }
};

// One dense layer: [in] -> [out], + bias, then ReLU for the hidden layers (not the last).
struct CnnDenseLayer {
  int in_features, out_features;
  bool relu;
  std::size_t kernel, bias;  // indices into CnnLayout::tensors()
};

// One op of the model (ops/op.hpp): its node, its shapes, and its parameters as indices into
// CnnLayout::tensors() (in OpShape::params order).
struct CnnNode {
  ops::OpSpec spec;
  ops::OpShape shape;
  std::vector<std::size_t> params;
};

// Everything the config implies, computed once. Immutable; shared by the parameter
// buffers, workspaces and devices that use the same geometry.
class CnnLayout {
 public:
  // Validates the config (spmd::Error naming the field).
  explicit CnnLayout(CnnConfig config);
  static std::shared_ptr<const CnnLayout> make(const CnnConfig& config);

  const CnnConfig& config() const { return config_; }
  // The model as a sequence of ops, ReLUs fused into the op before them, the loss last:
  // [conv2d(relu), avg_pool] per conv layer, dense(relu) per hidden layer, dense (the
  // logits), softmax_cross_entropy.
  const std::vector<CnnNode>& nodes() const { return nodes_; }
  // The same layers by kind (reports, tests).
  const std::vector<CnnConvLayer>& convs() const { return convs_; }
  const std::vector<CnnDenseLayer>& denses() const { return denses_; }  // hidden layers, then the classifier
  const std::vector<CnnTensorInfo>& tensors() const { return tensors_; }
  std::size_t param_count() const { return param_count_; }  // floats of the flat buffer, gaps included

  int input_size() const { return convs_.front().height * convs_.front().width * convs_.front().in_channels; }
  int flat_features() const { return denses_.front().in_features; }
  int classes() const { return denses_.back().out_features; }

  // Floats of one row's forward activations, each layer's zero-bordered input and output
  // included: what an eval batch needs per row (the --dry-run estimate).
  std::int64_t forward_floats_per_row() const;
  // Multiply-adds of one image's forward pass.
  std::int64_t forward_multiply_adds() const;

 private:
  CnnConfig config_;
  std::vector<CnnNode> nodes_;
  std::vector<CnnConvLayer> convs_;
  std::vector<CnnDenseLayer> denses_;
  std::vector<CnnTensorInfo> tensors_;
  std::size_t param_count_ = 0;
};

// Owns a 64-byte aligned, zero-initialised flat buffer of layout().param_count() floats.
// Used for parameters, gradients and the momentum trace alike. Copies are deep (the layout
// is shared).
class CnnParams {
 public:
  explicit CnnParams(std::shared_ptr<const CnnLayout> layout);
  explicit CnnParams(const CnnConfig& config) : CnnParams(CnnLayout::make(config)) {}

  const CnnLayout& layout() const { return *layout_; }
  const std::shared_ptr<const CnnLayout>& shared_layout() const { return layout_; }
  const CnnConfig& config() const { return layout_->config(); }

  std::size_t size() const { return buffer_.size(); }
  std::span<float> flat() { return buffer_.span(); }
  std::span<const float> flat() const { return buffer_.span(); }
  float* data() { return buffer_.data(); }
  const float* data() const { return buffer_.data(); }

  // Tensor `index` of layout().tensors().
  std::span<float> tensor(std::size_t index);
  std::span<const float> tensor(std::size_t index) const;

  void set_zero();

 private:
  std::shared_ptr<const CnnLayout> layout_;
  AlignedFloats buffer_;
};

// Throws spmd::Error, naming `what` and both configs, unless params has this layout's
// geometry (the same layout object, or an equal config).
void require_geometry(const CnnParams& params, const CnnLayout& layout, const char* what);

}  // namespace spmd::models
