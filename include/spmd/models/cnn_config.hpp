#pragma once
// The CNN's geometry as data: input size, layer widths and classes. Everything else (the
// parameter table and its offsets, activation and workspace sizes, memory estimates, the
// flop count of a step) is derived from it at run time by CnnLayout (cnn_params.hpp), in
// the way llm.c's GPT2Config drives fill_in_parameter_sizes and the activation sizes.
//
// The network it describes, in Flax linen terms:
//   images [B, H, W, C] NHWC float32
//   for f in conv_features:  Conv(f, (3, 3), padding SAME) -> ReLU -> avg_pool((2, 2), strides (2, 2))
//   flatten (NHWC order)
//   for f in dense_features: Dense(f) -> ReLU
//   Dense(classes) = logits
// avg_pool's default padding is VALID, so each pool floors: 28 -> 14 -> 7, 30 -> 15 -> 7.
// seed_default() is the Fashion-MNIST model of Flax's ensembling guide (28x28x1, conv 32, 64, dense 256,
// 10 classes), whose flat parameter layout and checkpoints predate this struct.
#include <cstdint>
#include <string>
#include <vector>

namespace spmd::models {

struct CnnConfig {
  int height = 0;    // input rows
  int width = 0;     // input columns
  int channels = 0;  // input channels (NHWC: innermost)
  std::vector<int> conv_features;   // output channels of each conv layer, input side first
  std::vector<int> dense_features;  // widths of the hidden dense layers (may be empty)
  int classes = 0;
  // The only values the kernels implement, kept in the config (and in checkpoints) so that
  // a file states the whole geometry: 3x3 SAME stride-1 convolutions, 2x2 average pooling
  // with stride 2 after each of them.
  int kernel_size = 3;
  int pool_size = 2;

  static CnnConfig seed_default();

  // Throws spmd::Error naming the first field that breaks its constraint (classes >= 2,
  // every other size >= 1, kernel_size 3, pool_size 2, height and width >= 2^(conv layers)
  // so that every pooled size is >= 1, sizes within the kernels' int dimensions).
  void validate() const;

  // Floats per input image (H * W * C).
  std::int64_t input_size() const;
  // The samples a dataset must hold: [H, W, C], or also [H, W] when C == 1.
  bool accepts_sample_shape(const std::vector<std::int64_t>& shape) const;
  // "28x28x1" (for messages about images).
  std::string image_text() const;
  // "28x28x1 conv 32,64 dense 256 classes 10" (for reports and messages).
  std::string describe() const;

  // A JSON object with every field, e.g. {"height":28,...,"conv_features":[32,64],...}:
  // what checkpoints store. from_json throws spmd::Error naming `source` and the field
  // when the text is not such an object or the config it holds is invalid.
  std::string to_json() const;
  static CnnConfig from_json(const std::string& text, const std::string& source);

  friend bool operator==(const CnnConfig&, const CnnConfig&) = default;
};

}  // namespace spmd::models
