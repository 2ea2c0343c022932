#pragma once
// The ensemble CNN's parameters (seed 001, Flax linen CNN) as ONE flat float32 buffer with
// named views, so that checkpoints, SGD updates and gathers handle a single array.
//
//   tensor          Flax name        shape (Flax layout)   fan_in
//   conv1 kernel    Conv_0/kernel    [3, 3, 1, 32]  HWIO   9
//   conv1 bias      Conv_0/bias      [32]
//   conv2 kernel    Conv_1/kernel    [3, 3, 32, 64] HWIO   288
//   conv2 bias      Conv_1/bias      [64]
//   dense1 kernel   Dense_0/kernel   [3136, 256]  [in,out] 3136
//   dense1 bias     Dense_0/bias     [256]
//   dense2 kernel   Dense_1/kernel   [256, 10]    [in,out] 256
//   dense2 bias     Dense_1/bias     [10]
//
// The tensors lie back to back in this order (824458 floats). Every offset happens to be a
// multiple of 16 floats, so with the 64-byte aligned buffer each tensor starts on a cache
// line.
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "spmd/models/cnn_aligned.hpp"

namespace spmd::models {

// Model geometry: NHWC images [B, 28, 28, 1] float32, 10 classes.
namespace cnn {
inline constexpr int kImageSide = 28;
inline constexpr int kImagePixels = kImageSide * kImageSide;  // 784 floats per image
inline constexpr int kConv1Channels = 32;
inline constexpr int kPool1Side = 14;
inline constexpr int kConv2Channels = 64;
inline constexpr int kPool2Side = 7;
inline constexpr int kFlatFeatures = kPool2Side * kPool2Side * kConv2Channels;  // 3136
inline constexpr int kHidden = 256;
inline constexpr int kClasses = 10;
}  // namespace cnn

enum class CnnTensor : int {
  Conv1Kernel, Conv1Bias, Conv2Kernel, Conv2Bias, Dense1Kernel, Dense1Bias, Dense2Kernel, Dense2Bias
};
inline constexpr int kCnnTensorCount = 8;

struct CnnTensorInfo {
  std::string_view name;        // Flax path, e.g. "Conv_1/kernel"
  int rank;                     // 1, 2 or 4
  std::array<int, 4> shape;     // first `rank` entries used
  std::size_t offset;           // in floats from the start of the flat buffer
  std::size_t size;             // floats
  int fan_in;                   // for kernels (lecun_normal); 0 for biases
};

// Layout table, in buffer order.
const std::array<CnnTensorInfo, kCnnTensorCount>& cnn_tensor_table();
const CnnTensorInfo& cnn_tensor_info(CnnTensor t);
inline constexpr std::size_t kCnnParamCount = 824458;

// Owns a 64-byte aligned, zero-initialised flat buffer of kCnnParamCount floats. Used for
// parameters, gradients and the momentum trace alike. Copies are deep.
class CnnParams {
 public:
  CnnParams() : buffer_(kCnnParamCount) {}

  static constexpr std::size_t size() { return kCnnParamCount; }
  std::span<float> flat() { return buffer_.span(); }
  std::span<const float> flat() const { return buffer_.span(); }
  float* data() { return buffer_.data(); }
  const float* data() const { return buffer_.data(); }

  std::span<float> tensor(CnnTensor t);
  std::span<const float> tensor(CnnTensor t) const;

  void set_zero();

 private:
  AlignedFloats buffer_;
};

}  // namespace spmd::models
