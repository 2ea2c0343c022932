#include "spmd/models/cnn_params.hpp"

#include <algorithm>

namespace spmd::models {
namespace {

constexpr std::array<CnnTensorInfo, kCnnTensorCount> make_table() {
  using namespace cnn;
  std::array<CnnTensorInfo, kCnnTensorCount> t{{
      {"Conv_0/kernel", 4, {3, 3, 1, kConv1Channels}, 0, 0, 3 * 3 * 1},
      {"Conv_0/bias", 1, {kConv1Channels, 0, 0, 0}, 0, 0, 0},
      {"Conv_1/kernel", 4, {3, 3, kConv1Channels, kConv2Channels}, 0, 0, 3 * 3 * kConv1Channels},
      {"Conv_1/bias", 1, {kConv2Channels, 0, 0, 0}, 0, 0, 0},
      {"Dense_0/kernel", 2, {kFlatFeatures, kHidden, 0, 0}, 0, 0, kFlatFeatures},
      {"Dense_0/bias", 1, {kHidden, 0, 0, 0}, 0, 0, 0},
      {"Dense_1/kernel", 2, {kHidden, kClasses, 0, 0}, 0, 0, kHidden},
      {"Dense_1/bias", 1, {kClasses, 0, 0, 0}, 0, 0, 0},
  }};
  std::size_t offset = 0;
  for (auto& info : t) {
    std::size_t size = 1;
    for (int d = 0; d < info.rank; ++d) size *= static_cast<std::size_t>(info.shape[d]);
    info.offset = offset;
    info.size = size;
    offset += size;
  }
  return t;
}

constexpr auto kTable = make_table();
static_assert(kTable.back().offset + kTable.back().size == kCnnParamCount,
              "kCnnParamCount must match the layout table");

}  // namespace

const std::array<CnnTensorInfo, kCnnTensorCount>& cnn_tensor_table() { return kTable; }

const CnnTensorInfo& cnn_tensor_info(CnnTensor t) { return kTable[static_cast<std::size_t>(t)]; }

std::span<float> CnnParams::tensor(CnnTensor t) {
  const auto& info = cnn_tensor_info(t);
  return flat().subspan(info.offset, info.size);
}

std::span<const float> CnnParams::tensor(CnnTensor t) const {
  const auto& info = cnn_tensor_info(t);
  return flat().subspan(info.offset, info.size);
}

void CnnParams::set_zero() { std::fill(flat().begin(), flat().end(), 0.0f); }

}  // namespace spmd::models
