#include "spmd/models/cnn_params.hpp"

#include <algorithm>

#include "spmd/runtime/error.hpp"

namespace spmd::models {

namespace {
constexpr std::size_t kTensorAlignment = 16;  // floats: the flat buffer's 64-byte alignment
}  // namespace

CnnLayout::CnnLayout(CnnConfig config) : config_(std::move(config)) {
  config_.validate();
  const auto add = [&](std::string name, int rank, std::array<int, 4> shape, int fan_in) {
    std::size_t size = 1;
    for (int d = 0; d < rank; ++d) size *= static_cast<std::size_t>(shape[static_cast<std::size_t>(d)]);
    const std::size_t offset = (param_count_ + kTensorAlignment - 1) / kTensorAlignment * kTensorAlignment;
    tensors_.push_back({std::move(name), rank, shape, offset, size, fan_in});
    param_count_ = offset + size;
    return tensors_.size() - 1;
  };
  int h = config_.height, w = config_.width, c = config_.channels;
  for (std::size_t l = 0; l < config_.conv_features.size(); ++l) {
    const int f = config_.conv_features[l];
    const std::string prefix = "Conv_" + std::to_string(l);
    CnnConvLayer layer{h, w, c, f, h / 2, w / 2, 0, 0};
    layer.kernel = add(prefix + "/kernel", 4, {3, 3, c, f}, 9 * c);
    layer.bias = add(prefix + "/bias", 1, {f, 0, 0, 0}, 0);
    convs_.push_back(layer);
    h /= 2, w /= 2, c = f;
  }
  int in = h * w * c;
  const std::size_t hidden = config_.dense_features.size();
  for (std::size_t j = 0; j <= hidden; ++j) {
    const int out = j < hidden ? config_.dense_features[j] : config_.classes;
    const std::string prefix = "Dense_" + std::to_string(j);
    CnnDenseLayer layer{in, out, j < hidden, 0, 0};
    layer.kernel = add(prefix + "/kernel", 2, {in, out, 0, 0}, in);
    layer.bias = add(prefix + "/bias", 1, {out, 0, 0, 0}, 0);
    denses_.push_back(layer);
    in = out;
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
  for (const auto& c : convs_) macs += c.pixels() * c.patch() * c.out_channels;
  for (const auto& d : denses_) macs += std::int64_t{d.in_features} * d.out_features;
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
