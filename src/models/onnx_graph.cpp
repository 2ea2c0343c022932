#include "spmd/models/onnx_graph.hpp"

#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "onnx_fusion.hpp"
#include "onnx_proto.hpp"
#include "spmd/runtime/error.hpp"

namespace spmd::models {

namespace {

using ops::ElemType;
using ops::Tensor;

template <class T>
std::vector<T> raw_values(const std::string& raw) {
  std::vector<T> v(raw.size() / sizeof(T));
  std::memcpy(v.data(), raw.data(), v.size() * sizeof(T));
  return v;
}

// A TensorProto as a float32 or int64 tensor (the two types the graph ops compute in).
Tensor tensor_from(const onnx::TensorProto& t, const std::string& what) {
  if (t.data_location() == onnx::TensorProto::EXTERNAL)
    throw Error(what + ": tensor '" + t.name() + "' keeps its data in an external file, which is not supported");
  Tensor out;
  const std::vector<std::int64_t> dims(t.dims().begin(), t.dims().end());
  const bool raw = t.has_raw_data();
  const auto ints = [&](auto values) {
    out.reset(ElemType::Int64, dims);
    for (std::size_t k = 0; k < out.i.size() && k < values.size(); ++k) out.i[k] = static_cast<std::int64_t>(values[k]);
  };
  switch (t.data_type()) {
    case onnx::TensorProto::FLOAT: {
      out.reset(ElemType::Float32, dims);
      const auto v = raw ? raw_values<float>(t.raw_data()) : std::vector<float>(t.float_data().begin(), t.float_data().end());
      std::copy_n(v.begin(), std::min(v.size(), out.f.size()), out.f.begin());
      break;
    }
    case onnx::TensorProto::DOUBLE: {
      out.reset(ElemType::Float32, dims);
      const auto v = raw ? raw_values<double>(t.raw_data()) : std::vector<double>(t.double_data().begin(), t.double_data().end());
      for (std::size_t k = 0; k < out.f.size() && k < v.size(); ++k) out.f[k] = static_cast<float>(v[k]);
      break;
    }
    case onnx::TensorProto::INT64:
      ints(raw ? raw_values<std::int64_t>(t.raw_data()) : std::vector<std::int64_t>(t.int64_data().begin(), t.int64_data().end()));
      break;
    case onnx::TensorProto::INT32:
      ints(raw ? raw_values<std::int32_t>(t.raw_data()) : std::vector<std::int32_t>(t.int32_data().begin(), t.int32_data().end()));
      break;
    case onnx::TensorProto::INT8: case onnx::TensorProto::UINT8: case onnx::TensorProto::BOOL:
      if (raw) ints(raw_values<std::uint8_t>(t.raw_data()));
      else ints(std::vector<std::int32_t>(t.int32_data().begin(), t.int32_data().end()));
      break;
    default:
      throw Error(what + ": tensor '" + t.name() + "' has element type " + std::to_string(t.data_type()) +
                  " (float, double and integer tensors are supported)");
  }
  if (out.size() != static_cast<std::int64_t>(out.type == ElemType::Float32 ? out.f.size() : out.i.size()))
    throw Error(what + ": tensor '" + t.name() + "' holds fewer values than its shape " + ops::to_string(dims));
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

// The graph as it is being read: tensor slots by name, constant or computed.
struct Builder {
  std::map<std::string, int> slot_of;
  std::vector<bool> constant;
  std::vector<Tensor> values;  // constants' values (empty for computed slots)
  int add(const std::string& name, bool is_constant, Tensor value = {}) {
    const int k = static_cast<int>(constant.size());
    constant.push_back(is_constant);
    values.push_back(std::move(value));
    if (!name.empty()) slot_of[name] = k;
    return k;
  }
};

}  // namespace

std::string read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read '" + path + "'");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

namespace {

// A tensor whose data lives in a file beside the model (ONNX's external data: PyTorch writes
// models over 2 GB so, onnx.save(..., save_as_external_data=True) any): the bytes read into
// raw_data, as if the model held them.
void read_external_data(onnx::TensorProto& t, const std::filesystem::path& dir, const std::string& what) {
  std::string location;
  std::int64_t offset = 0, length = -1;
  for (const auto& kv : t.external_data()) {
    try {
      if (kv.key() == "location") location = kv.value();
      else if (kv.key() == "offset") offset = std::stoll(kv.value());
      else if (kv.key() == "length") length = std::stoll(kv.value());
    } catch (const std::exception&) {
      throw Error(what + ": tensor '" + t.name() + "' has external data " + kv.key() + " '" + kv.value() + "', not a number");
    }
  }
  const std::filesystem::path rel(location);
  if (location.empty() || rel.is_absolute() || std::find(rel.begin(), rel.end(), "..") != rel.end())
    throw Error(what + ": tensor '" + t.name() + "' names its external data file as '" + location +
                "'; ONNX takes a path relative to the model's folder, inside it");
  const std::filesystem::path file = dir / rel;
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(what + ": cannot read '" + file.string() + "', the external data of tensor '" + t.name() + "'");
  in.seekg(0, std::ios::end);
  const std::int64_t size = in.tellg();
  if (length < 0) length = size - offset;
  if (offset < 0 || length < 0 || offset + length > size)
    throw Error(what + ": '" + file.string() + "' holds " + std::to_string(size) + " bytes; tensor '" + t.name() +
                "' needs bytes " + std::to_string(offset) + " to " + std::to_string(offset + length) + " of it");
  std::string bytes(static_cast<std::size_t>(length), '\0');
  in.seekg(offset);
  in.read(bytes.data(), length);
  if (!in) throw Error(what + ": reading tensor '" + t.name() + "' from '" + file.string() + "' failed");
  t.set_raw_data(std::move(bytes));
  t.clear_external_data();
  t.set_data_location(onnx::TensorProto::DEFAULT);
}

void read_all_external_data(onnx::ModelProto& model, const std::string& path, const std::string& what) {
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  auto* graph = model.mutable_graph();
  for (auto& t : *graph->mutable_initializer())
    if (t.data_location() == onnx::TensorProto::EXTERNAL) read_external_data(t, dir, what);
  for (auto& n : *graph->mutable_node())
    for (auto& a : *n.mutable_attribute())
      if (a.has_t() && a.t().data_location() == onnx::TensorProto::EXTERNAL) read_external_data(*a.mutable_t(), dir, what);
}

}  // namespace

bool onnx_checker_knows(const onnx::ModelProto& model) {
  const int newest_opset = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map().at(onnx::ONNX_DOMAIN).second;
  return model.ir_version() <= onnx::IR_VERSION && default_opset(model) <= newest_opset;
}

onnx::ModelProto read_onnx_model(const std::string& path, const std::string& what) {
  onnx::ModelProto model;
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

std::shared_ptr<const OnnxGraph> OnnxGraph::load(const std::string& path) {
  const std::string what = "ONNX model '" + path + "'";
  const onnx::ModelProto model = read_onnx_model(path, what);
  auto g = std::make_shared<OnnxGraph>();
  g->path_ = path;
  g->opset_ = default_opset(model);
  if (g->opset_ < kOldestOpset || g->opset_ > kNewestOpset)
    throw Error(what + " imports opset " + std::to_string(g->opset_) + " of the default domain; spmd knows the rules of opsets " +
                std::to_string(kOldestOpset) + " to " + std::to_string(kNewestOpset) +
                ": export it again with one of those (torch.onnx.export(..., opset_version=17))");
  const onnx::GraphProto& graph = model.graph();
  Builder b;
  for (const auto& init : graph.initializer()) {
    b.add(init.name(), true, tensor_from(init, what));
    g->parameter_floats_ += b.values.back().size();
  }
  for (const auto& in : graph.input()) {
    if (b.slot_of.count(in.name())) continue;  // an initializer listed as an input (IR < 4)
    const int type = in.type().tensor_type().elem_type();
    const bool integer = type == onnx::TensorProto::INT64 || type == onnx::TensorProto::INT32 || type == onnx::TensorProto::BOOL;
    // Double inputs are computed in float32, as double weights are read (tensor_from).
    if (type != onnx::TensorProto::FLOAT && type != onnx::TensorProto::DOUBLE && !integer)
      throw Error(what + ": input '" + in.name() + "' has element type " + std::to_string(type) +
                  "; the graph ops take float, integer and bool inputs");
    g->inputs_.push_back({in.name(), dims_of(in), integer ? ElemType::Int64 : ElemType::Float32});
    g->input_index_.push_back(b.add(in.name(), false));
  }
  std::map<std::string, int> unsupported;
  for (const auto& n : graph.node()) {
    ops::GraphNode node{n.op_type(), n.name().empty() ? n.output(0) : n.name(), g->opset_, attrs_from(n, what), {}, {}};
    const bool known_domain = n.domain().empty() || n.domain() == "ai.onnx";
    if (known_domain && n.op_type() == "Constant") {
      b.add(n.output(0), true, constant_value(node.attrs, what + ", node '" + node.name + "'"));
      continue;
    }
    const ops::GraphOpFn fn = known_domain ? ops::find_graph_op(n.op_type()) : nullptr;
    if (!fn) ++unsupported[known_domain ? n.op_type() : n.domain() + "." + n.op_type()];
    bool all_constant = true;
    for (const auto& in : n.input()) {
      if (in.empty()) {
        node.inputs.push_back(-1);
        continue;
      }
      const auto it = b.slot_of.find(in);
      if (it == b.slot_of.end()) throw Error(what + ": node '" + node.name + "' reads '" + in + "', which nothing produces");
      node.inputs.push_back(it->second);
      all_constant = all_constant && b.constant[static_cast<std::size_t>(it->second)];
    }
    if (!fn) {
      for (const auto& out : n.output()) b.add(out, false);
      continue;
    }
    if (all_constant && !node.inputs.empty()) {  // folded: run once now
      std::vector<const Tensor*> in;
      for (const int k : node.inputs) in.push_back(k < 0 ? nullptr : &b.values[static_cast<std::size_t>(k)]);
      std::vector<Tensor> outs(static_cast<std::size_t>(n.output_size()));
      std::vector<Tensor*> out;
      for (auto& t : outs) out.push_back(&t);
      fn(ops::OpCall{node, in, out});
      for (int k = 0; k < n.output_size(); ++k) b.add(n.output(k), true, std::move(outs[static_cast<std::size_t>(k)]));
      continue;
    }
    for (const auto& out : n.output()) node.outputs.push_back(b.add(out, false));
    g->nodes_.push_back(std::move(node));
    g->fns_.push_back(fn);
  }
  if (!unsupported.empty()) {
    std::string list, have;
    for (const auto& [op, count] : unsupported) list += (list.empty() ? "" : ", ") + op + " (" + std::to_string(count) + " node" + (count > 1 ? "s" : "") + ")";
    for (const auto& op : ops::graph_op_names()) have += (have.empty() ? "" : " ") + op;
    throw Error(what + " uses ops spmd does not run: " + list + ". Supported: Constant " + have);
  }
  for (const auto& out : graph.output()) {
    const auto it = b.slot_of.find(out.name());
    if (it == b.slot_of.end()) throw Error(what + ": output '" + out.name() + "' is produced by no node");
    g->outputs_.push_back({out.name(), dims_of(out)});
    g->output_index_.push_back(it->second);
  }
  fuse_for_inference({g->nodes_, g->fns_, b.constant, b.values, g->output_index_});
  g->place_constants_first(b.constant, b.values);
  return g;
}

void OnnxGraph::place_constants_first(const std::vector<bool>& constant, std::vector<ops::Tensor>& values) {
  // Constants first in the table: a run's tensors are the slots after them.
  std::vector<int> renumber(constant.size());
  int next = 0;
  for (std::size_t k = 0; k < constant.size(); ++k)
    if (constant[k]) {
      renumber[k] = next++;
      constants_.push_back(std::move(values[k]));
    }
  for (std::size_t k = 0; k < constant.size(); ++k)
    if (!constant[k]) renumber[k] = next++;
  for (auto& node : nodes_) {
    for (auto& k : node.inputs) k = k < 0 ? -1 : renumber[static_cast<std::size_t>(k)];
    for (auto& k : node.outputs) k = renumber[static_cast<std::size_t>(k)];
  }
  for (auto& k : input_index_) k = renumber[static_cast<std::size_t>(k)];
  for (auto& k : output_index_) k = renumber[static_cast<std::size_t>(k)];
  tensor_count_ = constant.size();
  // Liveness: the last node that reads each run tensor (or makes it, when none reads it).
  std::vector<int> last(tensor_count_, -1);
  for (std::size_t n = 0; n < nodes_.size(); ++n) {
    for (const int k : nodes_[n].outputs) last[static_cast<std::size_t>(k)] = static_cast<int>(n);
    for (const int k : nodes_[n].inputs)
      if (k >= 0) last[static_cast<std::size_t>(k)] = static_cast<int>(n);
  }
  for (const int k : input_index_) last[static_cast<std::size_t>(k)] = -1;
  for (const int k : output_index_) last[static_cast<std::size_t>(k)] = -1;
  release_after_.assign(nodes_.size(), {});
  for (std::size_t k = constants_.size(); k < tensor_count_; ++k)
    if (last[k] >= 0) release_after_[static_cast<std::size_t>(last[k])].push_back(static_cast<int>(k));
  input0_dies_.assign(nodes_.size(), 0);
  for (std::size_t n = 0; n < nodes_.size(); ++n) {
    const auto& in = nodes_[n].inputs;
    const auto& released = release_after_[n];
    input0_dies_[n] = !in.empty() && in[0] >= 0 && std::find(released.begin(), released.end(), in[0]) != released.end() &&
                      std::count(in.begin(), in.end(), in[0]) == 1;
  }
}

std::string OnnxGraph::output_kind(std::size_t k) const {
  // The node writing each tensor (the last one: an ONNX graph writes a tensor once).
  std::map<int, const ops::GraphNode*> producer;
  for (const auto& node : nodes_)
    for (const int o : node.outputs) producer[o] = &node;
  const auto kind = [&](const auto& self, int t) -> std::string {
    const auto it = producer.find(t);
    if (it == producer.end()) return "";
    const ops::GraphNode& n = *it->second;
    static const std::vector<std::string> passes = {"Identity", "Reshape", "Flatten", "Squeeze", "Dropout"};
    if (std::find(passes.begin(), passes.end(), n.op) != passes.end()) return self(self, n.inputs.at(0));
    if (n.op == "Mean") {
      for (const int in : n.inputs)
        if (in < 0 || self(self, in) != "Softmax") return n.op;
      return "Softmax";
    }
    return n.op;
  };
  return kind(kind, output_index_.at(k));
}

OnnxRunner::OnnxRunner(std::shared_ptr<const OnnxGraph> graph)
    : graph_(std::move(graph)), tensors_(graph_->tensor_count_), last_size_(graph_->tensor_count_, 0) {}

std::int64_t OnnxRunner::tensor_bytes() const {
  std::int64_t bytes = 0;
  for (const auto& t : tensors_)
    bytes += static_cast<std::int64_t>(t.f.capacity() * sizeof(float) + t.i.capacity() * sizeof(std::int64_t));
  for (const auto& v : pool_) bytes += static_cast<std::int64_t>(v.capacity() * sizeof(float));
  return bytes;
}

void OnnxRunner::take_from_pool(ops::FloatBuffer& f, std::size_t want) {
  // The smallest storage that holds what the tensor needed last time, else the largest (it
  // grows least): handing out whatever came last lets storage drift between tensors of
  // different sizes from run to run, each growing, until a run holds far more than it needs.
  std::size_t best = 0;
  for (std::size_t i = 1; i < pool_.size(); ++i) {
    const std::size_t c = pool_[i].capacity(), b = pool_[best].capacity();
    const bool fits = c >= want, best_fits = b >= want;
    if (fits ? !best_fits || c < b : !best_fits && c > b) best = i;
  }
  f.swap(pool_[best]);
  pool_[best].swap(pool_.back());
  pool_.pop_back();
}

void OnnxRunner::run(const NodeObserver& after_each) {
  const auto& g = *graph_;
  for (std::size_t n = 0; n < g.nodes_.size(); ++n) {
    const ops::GraphNode& node = g.nodes_[n];
    in_.clear();
    out_.clear();
    for (const int k : node.inputs) in_.push_back(k < 0 ? nullptr : &k_output(static_cast<std::size_t>(k)));
    for (const int k : node.outputs) {
      ops::Tensor& t = tensors_[static_cast<std::size_t>(k)];
      if (t.f.capacity() == 0 && !pool_.empty()) take_from_pool(t.f, last_size_[static_cast<std::size_t>(k)]);
      out_.push_back(&t);
    }
    ops::OpCall call{node, in_, out_};
    if (g.input0_dies_[n]) call.dying_input0 = &tensors_[static_cast<std::size_t>(node.inputs[0])];
    g.fns_[n](call);
    if (after_each) after_each(call);
    for (const int k : node.outputs) last_size_[static_cast<std::size_t>(k)] = tensors_[static_cast<std::size_t>(k)].f.size();
    for (const int k : g.release_after_[n]) {
      auto& f = tensors_[static_cast<std::size_t>(k)].f;
      if (f.capacity() == 0) continue;
      pool_.push_back(std::move(f));
      f = {};
    }
  }
}

}  // namespace spmd::models
