#pragma once
// Our models as ONNX graphs (opset 13, IR version 8), built with the ONNX library's protobuf
// types and checked by its checker and shape inference before they are returned, so that
// any framework or inference server can run what spmd trained.
//
//  CNN ensemble: input "images" float32 [batch, H, W, C] (NHWC, the scaled values the members
//    were trained on); per member Transpose to NCHW, then per conv layer Conv 3x3 (pads 1,
//    kernel HWIO -> OIHW) + Relu + AveragePool 2x2 stride 2 (VALID: floor), Transpose back to
//    NHWC and Flatten (our flatten order), Gemm + Relu per hidden dense layer, Gemm, Softmax;
//    output "probabilities" [batch, classes] = Mean of the members' softmax (one member: its
//    softmax).
//  Logistic regression: input "features" float32 [batch, F] -> Gemm (W [F, C], the intercept
//    as C when there is one) -> Softmax -> "probabilities" [batch, C].
// The batch dimension is symbolic ("batch"). No MPI, no files: bytes in memory.
#include <string>
#include <utility>
#include <vector>

#include "spmd/models/cnn_config.hpp"
#include "spmd/models/logreg_parameters.hpp"

namespace spmd::models {

// What the file says about itself: the graph's doc string and metadata_props (key, value).
struct OnnxDescription {
  std::string doc;
  std::vector<std::pair<std::string, std::string>> metadata;
};

// Serialized ModelProto of the members' mean probabilities (members: flat parameter buffers
// of `config`'s layout, models/cnn_params.hpp). Throws spmd::Error for no member, a buffer of
// another size, or a graph the ONNX checker refuses (naming its message).
std::string cnn_ensemble_onnx(const CnnConfig& config, const std::vector<std::vector<float>>& members,
                              const OnnxDescription& description);

// Serialized ModelProto of softmax(x W + b). Throws spmd::Error as above.
std::string logreg_onnx(const LogregParameters& weights, const OnnxDescription& description);

}  // namespace spmd::models
