#include <onnx/checker.h>
#include <onnx/defs/schema.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "onnx_proto.hpp"
#include "spmd/models/onnx_graph.hpp"
#include "spmd/ops/half_float.hpp"
#include "spmd/runtime/error.hpp"

namespace spmd::models {

using ops::ElemType;
using ops::Tensor;

namespace {

template <class T>
std::vector<T> raw_values(const std::string& raw) {
  std::vector<T> v(raw.size() / sizeof(T));
  std::memcpy(v.data(), raw.data(), v.size() * sizeof(T));
  return v;
}

// The number of elements a TensorProto's shape needs, refused past what any model could hold
// (before anything is allocated for it: a corrupt dimension must not become a huge allocation).
std::int64_t element_count(const onnx::TensorProto& t, const std::string& what) {
  constexpr std::int64_t kMax = std::int64_t{1} << 40;
  std::int64_t count = 1;
  for (const std::int64_t d : t.dims()) {
    if (d < 0 || (d > 0 && count > kMax / d))
      throw Error(what + ": tensor '" + t.name() + "' has the shape " +
                  ops::to_string(std::vector<std::int64_t>(t.dims().begin(), t.dims().end())) +
                  (d < 0 ? ", with a negative dimension" : ", more elements than any model holds"));
    count *= d;
  }
  return count;
}

// How many values a TensorProto holds: its raw bytes over the element's width, else the length
// of the typed field the type keeps its values in.
std::int64_t values_held(const onnx::TensorProto& t, int width, std::int64_t field_size, const std::string& what) {
  if (!t.has_raw_data()) return field_size;
  if (t.raw_data().size() % static_cast<std::size_t>(width) != 0)
    throw Error(what + ": tensor '" + t.name() + "' has " + std::to_string(t.raw_data().size()) +
                " bytes of raw data, not a whole number of its " + std::to_string(width) + "-byte elements");
  return static_cast<std::int64_t>(t.raw_data().size()) / width;
}

}  // namespace

// A TensorProto as a float32 or int64 tensor (the two types the graph ops compute in). It must
// hold exactly the values its shape needs, as ONNX defines (ONNX Runtime refuses others too):
// a truncated or mislabelled tensor is refused, never padded with zeros.
Tensor tensor_from(const onnx::TensorProto& t, const std::string& what) {
  if (t.data_location() == onnx::TensorProto::EXTERNAL)
    throw Error(what + ": tensor '" + t.name() + "' keeps its data in an external file, which is not supported");
  const std::int64_t needed = element_count(t, what);
  const std::vector<std::int64_t> dims(t.dims().begin(), t.dims().end());
  const bool raw = t.has_raw_data();
  const auto held = [&](int width, std::int64_t field_size) {
    const std::int64_t n = values_held(t, width, field_size, what);
    if (n != needed)
      throw Error(what + ": tensor '" + t.name() + "' holds " + std::to_string(n) + " values, but its shape " +
                  ops::to_string(dims) + " needs " + std::to_string(needed) + " (a truncated or damaged file?)");
  };
  Tensor out;
  const auto ints = [&](auto values) {
    out.reset(ElemType::Int64, dims);
    for (std::size_t k = 0; k < out.i.size(); ++k) out.i[k] = static_cast<std::int64_t>(values[k]);
  };
  // The narrow integer types: raw bytes of their own width, or int32_data (ONNX widens them there).
  const auto narrow = [&](auto zero) {
    held(sizeof zero, t.int32_data_size());
    if (raw) ints(raw_values<decltype(zero)>(t.raw_data()));
    else ints(std::vector<std::int32_t>(t.int32_data().begin(), t.int32_data().end()));
  };
  switch (t.data_type()) {
    case onnx::TensorProto::FLOAT: {
      held(4, t.float_data_size());
      out.reset(ElemType::Float32, dims);
      if (raw) std::memcpy(out.f.data(), t.raw_data().data(), out.f.size() * sizeof(float));
      else std::copy(t.float_data().begin(), t.float_data().end(), out.f.begin());
      break;
    }
    case onnx::TensorProto::DOUBLE: {
      held(8, t.double_data_size());
      out.reset(ElemType::Float32, dims);
      const auto v = raw ? raw_values<double>(t.raw_data()) : std::vector<double>(t.double_data().begin(), t.double_data().end());
      std::transform(v.begin(), v.end(), out.f.begin(), [](double x) { return static_cast<float>(x); });
      break;
    }
    case onnx::TensorProto::FLOAT16: case onnx::TensorProto::BFLOAT16: {  // computed in float32
      held(2, t.int32_data_size());
      out.reset(ElemType::Float32, dims);
      const auto v = raw ? raw_values<std::uint16_t>(t.raw_data()) : std::vector<std::uint16_t>(t.int32_data().begin(), t.int32_data().end());
      const bool half = t.data_type() == onnx::TensorProto::FLOAT16;
      std::transform(v.begin(), v.end(), out.f.begin(),
                     [half](std::uint16_t x) { return half ? ops::half_to_float(x) : ops::bfloat16_to_float(x); });
      break;
    }
    case onnx::TensorProto::INT64:
      held(8, t.int64_data_size());
      ints(raw ? raw_values<std::int64_t>(t.raw_data()) : std::vector<std::int64_t>(t.int64_data().begin(), t.int64_data().end()));
      break;
    case onnx::TensorProto::INT32: narrow(std::int32_t{}); break;
    case onnx::TensorProto::INT8: narrow(std::int8_t{}); break;
    case onnx::TensorProto::UINT8: case onnx::TensorProto::BOOL: narrow(std::uint8_t{}); break;
    case onnx::TensorProto::INT16: narrow(std::int16_t{}); break;
    default:
      throw Error(what + ": tensor '" + t.name() + "' has element type " + std::to_string(t.data_type()) +
                  " (float, float16, bfloat16, double and integer tensors are supported)");
  }
  return out;
}

ops::Attrs attrs_from(const onnx::NodeProto& n, const std::string& what) {
  ops::Attrs a;
  for (const auto& at : n.attribute()) {
    switch (at.type()) {
      case onnx::AttributeProto::INT: a.ints[at.name()] = at.i(); break;
      case onnx::AttributeProto::FLOAT: a.floats[at.name()] = at.f(); break;
      case onnx::AttributeProto::STRING: a.strings[at.name()] = at.s(); break;
      case onnx::AttributeProto::INTS: a.int_lists[at.name()] = {at.ints().begin(), at.ints().end()}; break;
      case onnx::AttributeProto::STRINGS: a.string_lists[at.name()] = {at.strings().begin(), at.strings().end()}; break;
      case onnx::AttributeProto::FLOATS:  // Constant's value_floats, an RNN's activation_alpha: kept as a tensor
        a.tensors[at.name()].reset(ElemType::Float32, {at.floats_size()});
        std::copy(at.floats().begin(), at.floats().end(), a.tensors[at.name()].f.begin());
        break;
      case onnx::AttributeProto::TENSOR: a.tensors[at.name()] = tensor_from(at.t(), what); break;
      default: break;  // graphs and the rest: no op of the library reads them
    }
  }
  return a;
}

// A Constant node's value.
Tensor constant_value(const ops::Attrs& a, const std::string& what) {
  if (const auto it = a.tensors.find("value"); it != a.tensors.end()) return it->second;
  if (const auto it = a.tensors.find("value_floats"); it != a.tensors.end()) return it->second;
  Tensor t;
  if (const auto it = a.floats.find("value_float"); it != a.floats.end()) {
    t.reset(ElemType::Float32, {});
    t.f[0] = it->second;
  } else if (const auto it2 = a.ints.find("value_int"); it2 != a.ints.end()) {
    t.reset(ElemType::Int64, {});
    t.i[0] = it2->second;
  } else if (const auto it3 = a.int_lists.find("value_ints"); it3 != a.int_lists.end()) {
    t.reset(ElemType::Int64, {static_cast<std::int64_t>(it3->second.size())});
    t.i = it3->second;
  } else {
    throw Error(what + ": a Constant node without a value the library reads");
  }
  return t;
}

std::vector<std::int64_t> dims_of(const onnx::ValueInfoProto& v) {
  std::vector<std::int64_t> dims;
  for (const auto& d : v.type().tensor_type().shape().dim()) dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
  return dims;
}

std::string read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read '" + path + "'");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

namespace {

// Bytes of one element of an ONNX tensor type; 0 where the size is not fixed (strings) or the
// type is unknown (the loader refuses those later, naming the tensor).
std::int64_t element_bytes(int data_type) {
  switch (data_type) {
    case onnx::TensorProto::BOOL:
    case onnx::TensorProto::INT8:
    case onnx::TensorProto::UINT8: return 1;
    case onnx::TensorProto::INT16:
    case onnx::TensorProto::UINT16:
    case onnx::TensorProto::FLOAT16:
    case onnx::TensorProto::BFLOAT16: return 2;
    case onnx::TensorProto::INT32:
    case onnx::TensorProto::UINT32:
    case onnx::TensorProto::FLOAT: return 4;
    case onnx::TensorProto::INT64:
    case onnx::TensorProto::UINT64:
    case onnx::TensorProto::DOUBLE:
    case onnx::TensorProto::COMPLEX64: return 8;
    case onnx::TensorProto::COMPLEX128: return 16;
    default: return 0;
  }
}

// What a path that is not a regular file is, for the refusal.
std::string file_kind(std::filesystem::file_type type) {
  switch (type) {
    case std::filesystem::file_type::directory: return "a directory";
    case std::filesystem::file_type::fifo: return "a FIFO";
    case std::filesystem::file_type::socket: return "a socket";
    case std::filesystem::file_type::character:
    case std::filesystem::file_type::block: return "a device";
    default: return "not a regular file";
  }
}

// A tensor whose data lives in a file beside the model (ONNX's external data: PyTorch writes
// models over 2 GB so, onnx.save(..., save_as_external_data=True) any): the bytes read into
// raw_data, as if the model held them. The file is untrusted input's pointer to more input,
// so only what the model's folder holds is read: the location resolved through every symlink
// must stay inside the folder (resolved too), be a regular file (a FIFO would block the open,
// a device never end), and hold the bytes asked for, which must be those the tensor's type and
// dims need: all of it checked from sizes before a byte is allocated or read.
void read_external_data(onnx::TensorProto& t, const std::filesystem::path& dir, const std::string& what) {
  namespace fs = std::filesystem;
  std::string location;
  std::int64_t offset = 0, length = -1;
  for (const auto& kv : t.external_data()) {
    try {
      std::size_t used = 0;
      if (kv.key() == "location") location = kv.value();
      else if (kv.key() == "offset") offset = std::stoll(kv.value(), &used);
      else if (kv.key() == "length") length = std::stoll(kv.value(), &used);
      if (used != 0 && used != kv.value().size()) throw Error("trailing characters");
    } catch (const std::exception&) {
      throw Error(what + ": tensor '" + t.name() + "' has external data " + kv.key() + " '" + kv.value() + "', not a number");
    }
  }
  const fs::path rel(location);
  if (location.empty() || rel.is_absolute() || std::find(rel.begin(), rel.end(), "..") != rel.end())
    throw Error(what + ": tensor '" + t.name() + "' names its external data file as '" + location +
                "'; ONNX takes a path relative to the model's folder, inside it");
  const fs::path folder = dir.empty() ? fs::path(".") : dir;
  const fs::path file = folder / rel;
  std::error_code error;
  const fs::path real_folder = fs::canonical(folder, error);
  const fs::path real_file = error ? fs::path() : fs::canonical(file, error);
  if (error) throw Error(what + ": cannot read '" + file.string() + "', the external data of tensor '" + t.name() + "'");
  const fs::path inside = real_file.lexically_relative(real_folder);
  if (inside.empty() || *inside.begin() == "..")
    throw Error(what + ": the external data of tensor '" + t.name() + "', '" + file.string() + "', resolves to '" +
                real_file.string() + "', outside the model's folder '" + real_folder.string() +
                "' (through a symlink): only files inside it are read");
  const fs::file_status status = fs::status(real_file, error);
  if (error || status.type() != fs::file_type::regular)
    throw Error(what + ": the external data of tensor '" + t.name() + "', '" + file.string() + "', is " +
                (error ? std::string("unreadable") : file_kind(status.type())) + ", not a regular file");
  const auto size = static_cast<std::int64_t>(fs::file_size(real_file, error));
  if (error) throw Error(what + ": cannot read '" + file.string() + "', the external data of tensor '" + t.name() + "'");
  if (offset < 0 || offset > size || length > size - offset) {
    const std::string end = length < 0                                                ? std::string("its end")
                            : offset >= 0 && length <= std::numeric_limits<std::int64_t>::max() - offset
                                ? std::to_string(offset + length)
                                : std::string("past 2^63");
    throw Error(what + ": '" + file.string() + "' holds " + std::to_string(size) + " bytes; tensor '" + t.name() +
                "' needs bytes " + std::to_string(offset) + " to " + end + " of it");
  }
  if (length < 0) length = size - offset;
  // The bytes the tensor's type and dims need (0: not fixed, strings), overflow-safe.
  if (const std::int64_t element = element_bytes(t.data_type()); element > 0) {
    std::int64_t expected = element;
    for (const auto d : t.dims()) {
      if (d < 0 || (d > 0 && expected > std::numeric_limits<std::int64_t>::max() / d)) {
        expected = -1;
        break;
      }
      expected *= d;
    }
    if (expected != length)
      throw Error(what + ": tensor '" + t.name() + "' takes " + std::to_string(length) + " bytes of '" + file.string() +
                  "', but its type and dims need " +
                  (expected < 0 ? std::string("more than any file holds") : std::to_string(expected)));
  }
  std::ifstream in(real_file, std::ios::binary);
  if (!in) throw Error(what + ": cannot read '" + file.string() + "', the external data of tensor '" + t.name() + "'");
  std::string bytes(static_cast<std::size_t>(length), '\0');
  in.seekg(offset);
  in.read(bytes.data(), length);
  if (!in) throw Error(what + ": reading tensor '" + t.name() + "' from '" + file.string() + "' failed");
  t.set_raw_data(std::move(bytes));
  t.clear_external_data();
  t.set_data_location(onnx::TensorProto::DEFAULT);
}

void read_graph_external_data(onnx::GraphProto& graph, const std::filesystem::path& dir, const std::string& what) {
  for (auto& t : *graph.mutable_initializer())
    if (t.data_location() == onnx::TensorProto::EXTERNAL) read_external_data(t, dir, what);
  for (auto& n : *graph.mutable_node())
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_t() && a.t().data_location() == onnx::TensorProto::EXTERNAL) read_external_data(*a.mutable_t(), dir, what);
      if (a.has_g()) read_graph_external_data(*a.mutable_g(), dir, what);  // an If's branches
    }
}

void read_all_external_data(onnx::ModelProto& model, const std::string& path, const std::string& what) {
  read_graph_external_data(*model.mutable_graph(), std::filesystem::path(path).parent_path(), what);
}

}  // namespace

bool onnx_checker_knows(const onnx::ModelProto& model) {
  const int newest_opset = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map().at(onnx::ONNX_DOMAIN).second;
  return model.ir_version() <= onnx::IR_VERSION && default_opset(model) <= newest_opset;
}

onnx::ModelProto read_onnx_model(const std::string& path, const std::string& what) {
  onnx::ModelProto model;
  // protobuf parses no message of 2 GiB or more: refused from the size, before the file is
  // read (a whole copy of it, then a failed parse at several times its size).
  std::error_code error;
  if (const auto size = std::filesystem::file_size(path, error); !error && size >= (std::uintmax_t{1} << 31))
    throw Error(what + " holds " + std::to_string(size) + " bytes, past protobuf's 2 GiB limit on one message: " +
                "ONNX keeps such models' weights as external data (PyTorch's exporter does so by itself; "
                "onnx.save_model(model, path, save_as_external_data=True))");
  if (!model.ParseFromString(read_file_bytes(path))) throw Error(what + " is not an ONNX model (its protobuf cannot be parsed)");
  read_all_external_data(model, path, what);
  // A file newer than the library (PyTorch 2's exports: IR 9-10, opset 18 and later) would be
  // refused for its version alone, or for ops the library has no schema of (Gelu, opset 20):
  // such files are read without it, and the loader's own checks (every input produced, every
  // op known and its inputs valid) stand in.
  if (!onnx_checker_knows(model)) return model;
  try {
    onnx::checker::check_model(model);
  } catch (const std::exception& e) {
    throw Error(what + " is refused by the ONNX checker: " + e.what());
  }
  return model;
}

int default_opset(const onnx::ModelProto& model) {
  int opset = 0;
  for (const auto& o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = static_cast<int>(o.version());
  return opset;
}

ops::Tensor read_onnx_tensor(const std::string& path) {
  onnx::TensorProto t;
  if (!t.ParseFromString(read_file_bytes(path))) throw Error("'" + path + "' is not a serialized ONNX tensor");
  return tensor_from(t, "'" + path + "'");
}

}  // namespace spmd::models
