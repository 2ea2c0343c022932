#pragma once
// Reading an ONNX file into Debian's ONNX library's protobuf types (private to src/models:
// the public headers keep protobuf out of users' builds).
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <vector>

#include "spmd/ops/graph_op.hpp"

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

// A TensorProto as a float32 or int64 tensor (the two types the graph ops compute in: double
// read as float32; int32, int8, uint8 and bool as int64). spmd::Error naming `what` and the
// tensor for another type or fewer values than its shape.
ops::Tensor tensor_from(const onnx::TensorProto& t, const std::string& what);
// A node's attributes as the graph ops read them (graphs left out: the loader reads If's).
ops::Attrs attrs_from(const onnx::NodeProto& n, const std::string& what);
// A Constant node's value, from whichever of its value attributes it has.
ops::Tensor constant_value(const ops::Attrs& a, const std::string& what);
// A value's dimensions, -1 where symbolic or unknown.
std::vector<std::int64_t> dims_of(const onnx::ValueInfoProto& v);

}  // namespace spmd::models
