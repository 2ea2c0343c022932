#include "spmd/models/cnn_params.hpp"

#include <algorithm>

#include "spmd/runtime/error.hpp"

namespace spmd::models {

namespace {
constexpr std::size_t kTensorAlignment = 16;  // floats: the flat buffer's 64-byte alignment
}  // namespace

namespace {

// The network CnnConfig describes (cnn_config.hpp), as ops: each conv layer conv2d, relu,
// avg_pool; each dense layer dense, relu for the hidden ones; then the loss.
std::vector<ops::OpSpec> cnn_graph(const CnnConfig& config) {
  std::vector<ops::OpSpec> g;
  for (std::size_t l = 0; l < config.conv_features.size(); ++l) {
    g.push_back({"conv2d", "Conv_" + std::to_string(l),
                 {{"features", config.conv_features[l]}, {"kernel", config.kernel_size}}});
    g.push_back({"relu", "", {}});
    g.push_back({"avg_pool", "", {{"size", config.pool_size}}});
  }
  const std::size_t hidden = config.dense_features.size();
  for (std::size_t j = 0; j <= hidden; ++j) {
    g.push_back({"dense", "Dense_" + std::to_string(j),
                 {{"features", j < hidden ? config.dense_features[j] : config.classes}}});
    if (j < hidden) g.push_back({"relu", "", {}});
  }
  g.push_back({"softmax_cross_entropy", "", {}});
  return g;
}

// A graph transform before execution (as ONNX Runtime's Conv+Relu fusion): a relu after an
// op that can apply it in its store becomes that op's "relu" attribute.
std::vector<ops::OpSpec> fuse_relu(std::vector<ops::OpSpec> g) {
  std::vector<ops::OpSpec> out;
  for (auto& op : g) {
    if (op.kind == "relu" && !out.empty() && (out.back().kind == "conv2d" || out.back().kind == "dense") &&
        out.back().attr("relu") == 0) {
      out.back().attrs["relu"] = 1;
      continue;
    }
    out.push_back(std::move(op));
  }
  return out;
}

}  // namespace

CnnLayout::CnnLayout(CnnConfig config) : config_(std::move(config)) {
  config_.validate();
  ops::Shape shape{config_.height, config_.width, config_.channels};
  for (auto& spec : fuse_relu(cnn_graph(config_))) {
    ops::OpShape op_shape = ops::infer_shape(spec, shape);
    CnnNode node{std::move(spec), std::move(op_shape), {}};
    for (const auto& p : node.shape.params) {
      const std::size_t offset = (param_count_ + kTensorAlignment - 1) / kTensorAlignment * kTensorAlignment;
      tensors_.push_back({p.name, p.rank, p.shape, offset, p.size(), p.fan_in});
      param_count_ = offset + p.size();
      node.params.push_back(tensors_.size() - 1);
    }
    shape = node.shape.out;
    nodes_.push_back(std::move(node));
  }
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    const auto& n = nodes_[i];
    const auto& in = n.shape.in;
    if (n.spec.kind == "conv2d") {
      const auto& pooled = nodes_.at(i + 1).shape.out;
      convs_.push_back({in.h, in.w, in.c, n.shape.out.c, pooled.h, pooled.w, n.params[0], n.params[1]});
    } else if (n.spec.kind == "dense") {
      denses_.push_back({static_cast<int>(in.size()), n.shape.out.c, n.spec.attr("relu") != 0, n.params[0], n.params[1]});
    }
  }
}

std::shared_ptr<const CnnLayout> CnnLayout::make(const CnnConfig& config) {
  return std::make_shared<const CnnLayout>(config);
}

std::int64_t CnnLayout::forward_floats_per_row() const {
  std::int64_t floats = 0;
  for (const auto& c : convs_) floats += c.padded_input_size() + c.output_size();
  floats += flat_features();
  for (const auto& d : denses_) floats += d.out_features;
  return floats;
}

std::int64_t CnnLayout::forward_multiply_adds() const {
  std::int64_t macs = 0;
  for (const auto& n : nodes_) macs += n.shape.multiply_adds;  // each op's shape rule states its own
  return macs;
}

CnnParams::CnnParams(std::shared_ptr<const CnnLayout> layout)
    : layout_(std::move(layout)), buffer_(layout_->param_count()) {}

std::span<float> CnnParams::tensor(std::size_t index) {
  const auto& info = layout_->tensors().at(index);
  return flat().subspan(info.offset, info.size);
}

std::span<const float> CnnParams::tensor(std::size_t index) const {
  const auto& info = layout_->tensors().at(index);
  return flat().subspan(info.offset, info.size);
}

void CnnParams::set_zero() { std::fill(flat().begin(), flat().end(), 0.0f); }

void require_geometry(const CnnParams& params, const CnnLayout& layout, const char* what) {
  if (&params.layout() != &layout && params.config() != layout.config())
    throw Error(std::string(what) + ": parameters of a " + params.config().describe() + " CNN where one of " +
                layout.config().describe() + " is expected");
}

}  // namespace spmd::models
