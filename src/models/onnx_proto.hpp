#pragma once
// Reading an ONNX file into Debian's ONNX library's protobuf types (private to src/models:
// the public headers keep protobuf out of users' builds).
#include <onnx/onnx_pb.h>

#include <string>

namespace spmd::models {

// The file's bytes; spmd::Error "cannot read 'PATH'" when it cannot be opened.
std::string read_file_bytes(const std::string& path);

// The default domain's opsets whose rules the graph ops follow (where an op's attributes or
// inputs changed, each version's form): the loader refuses a model outside them.
inline constexpr int kOldestOpset = 1, kNewestOpset = 22;

// Whether Debian's ONNX library knows the model's IR version and opset (its checker runs then).
bool onnx_checker_knows(const onnx::ModelProto& model);

// The model in the file, checked by ONNX's checker where it knows the file's versions. Throws spmd::Error naming the file (as
// `what` says it) for one that is not an ONNX model or that the checker refuses.
onnx::ModelProto read_onnx_model(const std::string& path, const std::string& what);

// The default domain's opset (ai.onnx), 0 when the model imports none.
int default_opset(const onnx::ModelProto& model);

}  // namespace spmd::models
