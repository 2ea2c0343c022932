#include "spmd/models/onnx_graph.hpp"

#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "onnx_fusion.hpp"
#include "onnx_proto.hpp"
#include "onnx_subgraphs.hpp"
#include "spmd/runtime/error.hpp"

namespace spmd::models {

namespace {

using ops::ElemType;
using ops::Tensor;

// An If node whose condition is known only when the graph runs, or a Loop: OnnxRunner::run_if
// and run_loop run their graphs; no op of the library is either, so a backend without
// sub-graphs refuses them by name.
void if_reached_op_table(const ops::OpCall& call) { call.fail("internal: a node with sub-graphs reached the op table"); }

// A graph being read (the model's, or an If's branch): tensor slots by name, constant or
// computed. A name it does not hold is looked up in the graph around it: a constant there is
// copied here, a computed value becomes an input here (a capture: its slot there and here).
struct Scope {
  std::map<std::string, int> slot_of;
  std::vector<bool> constant;
  std::vector<Tensor> values;  // constants' values (empty for computed slots)
  Scope* outer = nullptr;
  std::vector<std::pair<int, int>> captures;
  std::map<std::string, int> declared_type;  // TensorProto element types the file states (for CastLike)
  int type_of(const std::string& name) const {  // 0: not stated
    if (const auto it = declared_type.find(name); it != declared_type.end()) return it->second;
    return outer == nullptr ? 0 : outer->type_of(name);
  }
  int add(const std::string& name, bool is_constant, Tensor value = {}) {
    const int k = static_cast<int>(constant.size());
    constant.push_back(is_constant);
    values.push_back(std::move(value));
    if (!name.empty()) slot_of[name] = k;
    return k;
  }
  int find(const std::string& name) {  // -1: nothing produces it
    if (const auto it = slot_of.find(name); it != slot_of.end()) return it->second;
    const int there = outer == nullptr ? -1 : outer->find(name);
    if (there < 0) return -1;
    if (outer->constant[static_cast<std::size_t>(there)]) return add(name, true, outer->values[static_cast<std::size_t>(there)]);
    const int here = add(name, false);
    captures.emplace_back(there, here);
    return here;
  }
};

}  // namespace

struct OnnxGraph::Reader {
  explicit Reader(std::string model) : what(std::move(model)) {}
  const std::string what;
  std::map<std::string, int> unsupported;  // op -> nodes, over every branch read
  // The model's local functions by (domain, name): PyTorch 2's exporter writes modules and
  // aten ops as such; a call is replaced by the function's nodes.
  std::map<std::pair<std::string, std::string>, const onnx::FunctionProto*> functions;
  // The main graph's inputs that have an initializer and are read as inputs (IR >= 4: the
  // initializer is only the input's default); the main graph's initializer of that name is
  // not bound over the input.
  const onnx::GraphProto* main_graph = nullptr;
  std::set<std::string> overridable_inputs;

  // opset: of the default domain, for the nodes read (a function's body may import another).
  void read_nodes(OnnxGraph& g, const onnx::GraphProto& graph, Scope& s, int opset) {
    for (const auto* list : {&graph.input(), &graph.value_info(), &graph.output()})
      for (const auto& v : *list)
        if (v.type().has_tensor_type()) s.declared_type[v.name()] = v.type().tensor_type().elem_type();
    for (const auto& init : graph.initializer()) {
      if (&graph == main_graph && overridable_inputs.count(init.name())) continue;
      s.declared_type[init.name()] = init.data_type();
      s.add(init.name(), true, tensor_from(init, what));
      g.parameter_floats_ += s.values.back().size();
    }
    for (const auto& n : graph.node()) {
      if (const auto f = functions.find({n.domain(), n.op_type()}); f != functions.end()) {
        inline_call(g, n, *f->second, s, opset);
        continue;
      }
      ops::GraphNode node{n.op_type(), n.name().empty() ? n.output(0) : n.name(), opset, attrs_from(n, what), {}, {}};
      const bool known_domain = n.domain().empty() || n.domain() == "ai.onnx";
      note_declared_type(n, s);
      if (known_domain) note_quantized_type(n, node, s);
      if (known_domain && n.op_type() == "CastLike" && n.input_size() == 2)
        if (const int to = s.type_of(n.input(1)); to != 0) node.attrs.ints["spmd_to"] = to;
      if (known_domain && n.op_type() == "Constant") {
        s.add(n.output(0), true, constant_value(node.attrs, what + ", node '" + node.name + "'"));
        continue;
      }
      if (known_domain && n.op_type() == "If") {
        read_if(g, n, std::move(node), s, opset);
        continue;
      }
      if (known_domain && n.op_type() == "Loop") {
        read_loop(g, n, std::move(node), s, opset);
        continue;
      }
      const ops::GraphOpFn fn = known_domain ? ops::find_graph_op(n.op_type()) : nullptr;
      if (!fn) ++unsupported[known_domain ? n.op_type() : n.domain() + "." + n.op_type()];
      bool all_constant = true;
      for (const auto& in : n.input()) {
        const int k = in.empty() ? -1 : s.find(in);
        if (!in.empty() && k < 0) throw Error(what + ": node '" + node.name + "' reads '" + in + "', which nothing produces");
        node.inputs.push_back(k);
        all_constant = all_constant && (k < 0 || s.constant[static_cast<std::size_t>(k)]);
      }
      if (!fn) {
        for (const auto& out : n.output()) s.add(out, false);
        continue;
      }
      if (all_constant && !node.inputs.empty()) {  // folded: run once now
        std::vector<const Tensor*> in;
        for (const int k : node.inputs) in.push_back(k < 0 ? nullptr : &s.values[static_cast<std::size_t>(k)]);
        std::vector<Tensor> outs(static_cast<std::size_t>(n.output_size()));
        std::vector<Tensor*> out;
        for (auto& t : outs) out.push_back(&t);
        call_op(fn, ops::OpCall{node, in, out});
        for (int k = 0; k < n.output_size(); ++k) s.add(n.output(k), true, std::move(outs[static_cast<std::size_t>(k)]));
        continue;
      }
      // Optional outputs left unnamed at the end (MaxPool's Indices, Dropout's mask) are not made.
      int outputs = n.output_size();
      while (outputs > 1 && n.output(outputs - 1).empty()) --outputs;
      for (int k = 0; k < outputs; ++k) node.outputs.push_back(s.add(n.output(k), false));
      g.nodes_.push_back(std::move(node));
      g.fns_.push_back(fn);
    }
  }

  // The element type a Constant or Cast states for its output, or that an op moving its
  // input's values keeps (PyTorch's FX exports pass a zero point through an Identity).
  static void note_declared_type(const onnx::NodeProto& n, Scope& s) {
    if (n.output_size() < 1) return;
    static const std::set<std::string> kKeepsType = {"Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose",
                                                     "Expand",   "Slice",   "Gather",  "Tile",    "Concat",    "Split",
                                                     "Dropout"};
    if (kKeepsType.count(n.op_type()) && n.input_size() > 0)
      if (const int type = s.type_of(n.input(0)); type != 0)
        for (const auto& out : n.output())
          if (!out.empty() && s.type_of(out) == 0) s.declared_type[out] = type;
    for (const auto& a : n.attribute()) {
      if (n.op_type() == "Cast" && a.name() == "to") s.declared_type[n.output(0)] = static_cast<int>(a.i());
      if (n.op_type() != "Constant") continue;
      if (a.name() == "value") s.declared_type[n.output(0)] = a.t().data_type();
      if (a.name() == "value_float" || a.name() == "value_floats") s.declared_type[n.output(0)] = onnx::TensorProto::FLOAT;
      if (a.name() == "value_int" || a.name() == "value_ints") s.declared_type[n.output(0)] = onnx::TensorProto::INT64;
    }
  }

  // The quantizing ops hold their outputs in int64 within the range of a type the file states
  // (graph_quantize.cpp): spmd_to, from opset 21's output_dtype, else the declared type of the
  // output's zero point; QuantizeLinear without one gives uint8, as ONNX says.
  static void note_quantized_type(const onnx::NodeProto& n, ops::GraphNode& node, Scope& s) {
    const int zero = n.op_type() == "QuantizeLinear" ? 2 : n.op_type() == "QLinearConv" || n.op_type() == "QLinearMatMul" ? 7 : -1;
    if (n.op_type() == "DynamicQuantizeLinear" && n.output_size() == 3) {
      s.declared_type[n.output(0)] = s.declared_type[n.output(2)] = onnx::TensorProto::UINT8;
      s.declared_type[n.output(1)] = onnx::TensorProto::FLOAT;
    }
    if (n.op_type() == "MatMulInteger" || n.op_type() == "ConvInteger") s.declared_type[n.output(0)] = onnx::TensorProto::INT32;
    if (zero < 0) return;
    int to = static_cast<int>(node.attrs.i("output_dtype", 0));
    if (to == 0) to = zero < n.input_size() && !n.input(zero).empty() ? s.type_of(n.input(zero)) : onnx::TensorProto::UINT8;
    if (to == 0) return;  // the op refuses to guess
    node.attrs.ints["spmd_to"] = to;
    s.declared_type[n.output(0)] = to;
  }

  // An If: decided at load where its condition is a constant (PyTorch's exports test shapes
  // that are fixed: the chosen branch's nodes join this graph), else both branches read as
  // graphs of their own that the runner picks between.
  void read_if(OnnxGraph& g, const onnx::NodeProto& n, ops::GraphNode node, Scope& s, int opset) {
    const onnx::GraphProto* branch[2] = {nullptr, nullptr};
    for (const auto& a : n.attribute()) {
      if (a.name() == "then_branch") branch[0] = &a.g();
      if (a.name() == "else_branch") branch[1] = &a.g();
    }
    const int cond = n.input_size() == 1 ? s.find(n.input(0)) : -1;
    if (!branch[0] || !branch[1] || cond < 0)
      throw Error(what + ": If node '" + node.name + "' needs a condition that some node produces and both branches");
    for (const auto* b : branch)
      if (b->output_size() != n.output_size())
        throw Error(what + ": If node '" + node.name + "' has " + std::to_string(n.output_size()) + " outputs and a branch " +
                    std::to_string(b->output_size()));
    if (s.constant[static_cast<std::size_t>(cond)]) {
      const Tensor& c = s.values[static_cast<std::size_t>(cond)];
      if (c.size() != 1) throw Error(what + ": If node '" + node.name + "': its condition holds " + std::to_string(c.size()) + " values");
      const onnx::GraphProto& chosen = *branch[(c.type == ElemType::Int64 ? c.i[0] != 0 : c.f[0] != 0.0f) ? 0 : 1];
      read_nodes(g, chosen, s, opset);  // ONNX names are unique across a model's graphs
      for (int k = 0; k < n.output_size(); ++k) s.slot_of[n.output(k)] = output_slot(chosen, k, s);
      return;
    }
    node.inputs = {cond};
    Branches branches;
    for (int b = 0; b < 2; ++b) {
      Scope inner;
      inner.outer = &s;
      auto graph = std::make_shared<OnnxGraph>();
      graph->path_ = g.path_;
      graph->opset_ = g.opset_;
      read_nodes(*graph, *branch[b], inner, opset);
      for (int k = 0; k < n.output_size(); ++k) {
        graph->outputs_.push_back({branch[b]->output(k).name(), dims_of(branch[b]->output(k))});
        graph->output_index_.push_back(output_slot(*branch[b], k, inner));
      }
      for (const auto& [there, here] : inner.captures) {
        graph->inputs_.push_back({"", {}, ElemType::Float32});
        graph->input_index_.push_back(here);
        node.inputs.push_back(there);
      }
      graph->finish(inner.constant, inner.values);
      branches.graph[b] = std::move(graph);
    }
    node.attrs.ints[kBranchesAttr] = static_cast<std::int64_t>(g.branches_.size());
    g.branches_.push_back(std::move(branches));
    for (const auto& out : n.output()) node.outputs.push_back(s.add(out, false));
    g.nodes_.push_back(std::move(node));
    g.fns_.push_back(&if_reached_op_table);
  }

  // A Loop: its body read as a graph of its own whose inputs are the iteration number, the
  // condition, the loop-carried values, then the values it reads from the graphs around it;
  // OnnxRunner::run_loop runs it. (PyTorch exports nn.EmbeddingBag over a [batch, length]
  // input as a Loop over the bags.)
  void read_loop(OnnxGraph& g, const onnx::NodeProto& n, ops::GraphNode node, Scope& s, int opset) {
    const onnx::GraphProto* body = nullptr;
    for (const auto& a : n.attribute())
      if (a.name() == "body") body = &a.g();
    const int carried = n.input_size() - 2;
    if (!body || carried < 0 || body->input_size() != carried + 2 || body->output_size() < carried + 1 ||
        n.output_size() != body->output_size() - 1)
      throw Error(what + ": Loop node '" + node.name + "' needs a trip count and condition input (either may be empty), a body of " +
                  "2 + N inputs for its N loop-carried values, and one output per body output but the condition");
    Scope inner;
    inner.outer = &s;
    auto graph = std::make_shared<OnnxGraph>();
    graph->path_ = g.path_;
    graph->opset_ = g.opset_;
    for (const auto& in : body->input()) {
      graph->inputs_.push_back({in.name(), dims_of(in), ElemType::Float32});
      graph->input_index_.push_back(inner.add(in.name(), false));
    }
    read_nodes(*graph, *body, inner, opset);
    for (int k = 0; k < body->output_size(); ++k) {
      graph->outputs_.push_back({body->output(k).name(), dims_of(body->output(k))});
      graph->output_index_.push_back(output_slot(*body, k, inner));
    }
    for (const auto& in : n.input()) node.inputs.push_back(in.empty() ? -1 : s.find(in));
    for (std::size_t k = 2; k < node.inputs.size(); ++k)
      if (node.inputs[k] < 0) throw Error(what + ": Loop node '" + node.name + "' reads a value that nothing produces");
    for (const auto& [there, here] : inner.captures) {
      graph->inputs_.push_back({"", {}, ElemType::Float32});
      graph->input_index_.push_back(here);
      node.inputs.push_back(there);
    }
    graph->finish(inner.constant, inner.values);
    node.attrs.ints[kLoopAttr] = static_cast<std::int64_t>(g.branches_.size());
    node.attrs.ints[kLoopCarriedAttr] = carried;
    g.branches_.push_back({{std::move(graph), nullptr}});
    for (const auto& out : n.output()) node.outputs.push_back(s.add(out, false));
    g.nodes_.push_back(std::move(node));
    g.fns_.push_back(&if_reached_op_table);
  }

  // A call of a local function: its nodes, their names prefixed by the call's (the function's
  // inputs and outputs by the call's), attributes that refer to the call's (ref_attr_name) set
  // from it or, where the call has none, left to the op's default.
  void inline_call(OnnxGraph& g, const onnx::NodeProto& call, const onnx::FunctionProto& f, Scope& s, int opset) {
    if (++depth > 64) throw Error(what + ": function " + f.domain() + "." + f.name() + " calls nest deeper than 64 (recursive?)");
    const std::string prefix = (call.name().empty() ? call.output(0) : call.name()) + "/" + f.name() + "/";
    std::map<std::string, std::string> rename;
    for (int k = 0; k < f.input_size(); ++k) rename[f.input(k)] = k < call.input_size() ? call.input(k) : "";
    for (int k = 0; k < f.output_size(); ++k)
      rename[f.output(k)] = k < call.output_size() && !call.output(k).empty() ? call.output(k) : prefix + f.output(k);
    const auto name_of = [&](const std::string& x) {
      const auto it = rename.find(x);
      return x.empty() ? x : it != rename.end() ? it->second : prefix + x;
    };
    onnx::GraphProto body;
    for (const auto& fn : f.node()) {
      onnx::NodeProto& n = *body.add_node();
      n = fn;
      n.set_name(prefix + fn.name());
      for (auto& in : *n.mutable_input()) in = name_of(in);
      for (auto& out : *n.mutable_output()) out = name_of(out);
      auto& attrs = *n.mutable_attribute();
      for (int a = attrs.size(); a-- > 0;) {
        if (attrs.Get(a).ref_attr_name().empty()) continue;
        const auto from = std::find_if(call.attribute().begin(), call.attribute().end(),
                                       [&](const onnx::AttributeProto& c) { return c.name() == attrs.Get(a).ref_attr_name(); });
        if (from == call.attribute().end()) {
          attrs.DeleteSubrange(a, 1);
          continue;
        }
        const std::string name = attrs.Get(a).name();
        *attrs.Mutable(a) = *from;
        attrs.Mutable(a)->set_name(name);
      }
    }
    for (const auto& o : f.opset_import())
      if (o.domain().empty() || o.domain() == "ai.onnx") opset = static_cast<int>(o.version());
    read_nodes(g, body, s, opset);
    --depth;
  }
  int depth = 0;

  int output_slot(const onnx::GraphProto& graph, int k, Scope& s) const {
    const int slot = s.find(graph.output(k).name());
    if (slot < 0) throw Error(what + ": output '" + graph.output(k).name() + "' is produced by no node");
    return slot;
  }
};

std::shared_ptr<const OnnxGraph> OnnxGraph::load(const std::string& path, const std::string& output) {
  Reader reader("ONNX model '" + path + "'");
  const std::string& what = reader.what;
  const onnx::ModelProto model = read_onnx_model(path, what);
  auto g = std::make_shared<OnnxGraph>();
  g->path_ = path;
  g->opset_ = default_opset(model);
  if (g->opset_ < kOldestOpset || g->opset_ > kNewestOpset)
    throw Error(what + " imports opset " + std::to_string(g->opset_) + " of the default domain; spmd knows the rules of opsets " +
                std::to_string(kOldestOpset) + " to " + std::to_string(kNewestOpset) +
                ": export it again with one of those (torch.onnx.export(..., opset_version=17))");
  const onnx::GraphProto& graph = model.graph();
  Scope s;
  std::set<std::string> initializers;
  for (const auto& init : graph.initializer()) initializers.insert(init.name());
  // An input with an initializer is a weight listed as an input (IR < 4 lists every one; PyTorch's
  // keep_initializers_as_inputs) or, from IR 4, an input whose initializer is its default. The
  // data come through the inputs without one; where every input has one (IR >= 4), those inputs
  // are the model's inputs, as ONNX Runtime feeds them.
  reader.main_graph = &graph;
  const bool all_have_defaults =
      model.ir_version() >= 4 && graph.input_size() > 0 &&
      std::all_of(graph.input().begin(), graph.input().end(), [&](const auto& in) { return initializers.count(in.name()) > 0; });
  if (all_have_defaults)
    for (const auto& in : graph.input()) reader.overridable_inputs.insert(in.name());
  for (const auto& in : graph.input()) {
    if (initializers.count(in.name()) && !reader.overridable_inputs.count(in.name())) continue;
    // Double and float16 inputs are computed in float32, as such weights are read (tensor_from); integer
    // and bool ones (indices, uint8 images) as int64.
    static const std::map<int, std::string> kInputTypes = {
        {onnx::TensorProto::FLOAT, "float"}, {onnx::TensorProto::DOUBLE, "double"}, {onnx::TensorProto::FLOAT16, "float16"},
        {onnx::TensorProto::BFLOAT16, "bfloat16"}, {onnx::TensorProto::UINT8, "uint8"},
        {onnx::TensorProto::INT8, "int8"},   {onnx::TensorProto::UINT16, "uint16"}, {onnx::TensorProto::INT16, "int16"},
        {onnx::TensorProto::INT32, "int32"}, {onnx::TensorProto::INT64, "int64"},   {onnx::TensorProto::BOOL, "bool"}};
    const int type = in.type().tensor_type().elem_type();
    const auto known = kInputTypes.find(type);
    if (known == kInputTypes.end())
      throw Error(what + ": input '" + in.name() + "' has element type " + std::to_string(type) +
                  "; the graph ops take float, double, integer and bool inputs");
    const bool floating = type == onnx::TensorProto::FLOAT || type == onnx::TensorProto::DOUBLE ||
                          type == onnx::TensorProto::FLOAT16 || type == onnx::TensorProto::BFLOAT16;
    g->inputs_.push_back({in.name(), dims_of(in), floating ? ElemType::Float32 : ElemType::Int64, known->second});
    g->input_index_.push_back(s.add(in.name(), false));
  }
  for (const auto& f : model.functions()) reader.functions[{f.domain(), f.name()}] = &f;
  reader.read_nodes(*g, graph, s, g->opset_);
  if (!reader.unsupported.empty()) {
    std::string list, have;
    for (const auto& [op, count] : reader.unsupported)
      list += (list.empty() ? "" : ", ") + op + " (" + std::to_string(count) + " node" + (count > 1 ? "s" : "") + ")";
    for (const auto& op : ops::graph_op_names()) have += (have.empty() ? "" : " ") + op;
    throw Error(what + " uses ops spmd does not run: " + list + ". Supported: Constant If Loop " + have);
  }
  for (int k = 0; k < graph.output_size(); ++k) {
    if (!output.empty() && graph.output(k).name() != output) continue;
    g->outputs_.push_back({graph.output(k).name(), dims_of(graph.output(k))});
    g->output_index_.push_back(reader.output_slot(graph, k, s));
  }
  if (graph.output_size() == 0) throw Error(what + " declares no graph outputs: there is nothing to evaluate");
  if (!output.empty() && g->outputs_.empty()) {
    std::string names;
    for (int k = 0; k < graph.output_size() && k < 8; ++k) names += (k ? ", '" : "'") + graph.output(k).name() + "'";
    if (graph.output_size() > 8) names += ", ...";
    throw Error(what + " has no output '" + output + "'; its outputs: " + names);
  }
  g->inputs_rewritten_ = true;
  g->finish(s.constant, s.values);
  return g;
}

void OnnxGraph::finish(std::vector<bool>& constant, std::vector<ops::Tensor>& values) {
  fuse_for_inference({nodes_, fns_, constant, values, output_index_});
  place_constants_first(constant, values);
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
  for (const int k : output_index_) last[static_cast<std::size_t>(k)] = -1;
  // Where a tensor's values are read last: Shape and Size read only its shape, which stays
  // when a node takes the storage (PyTorch's x.reshape(x.shape[0], -1) reads x's Shape last).
  std::vector<int> dies_at(tensor_count_, -1);
  for (std::size_t n = 0; n < nodes_.size(); ++n) {
    for (const int k : nodes_[n].outputs) dies_at[static_cast<std::size_t>(k)] = static_cast<int>(n);
    if (nodes_[n].op == "Shape" || nodes_[n].op == "Size") continue;
    for (const int k : nodes_[n].inputs)
      if (k >= 0) dies_at[static_cast<std::size_t>(k)] = static_cast<int>(n);
  }
  for (const int k : output_index_) dies_at[static_cast<std::size_t>(k)] = -1;
  // The main graph's inputs are written before every run (OnnxRunner::input), so the last node
  // reading one may take its storage (a Flatten of the images then copies nothing); they are
  // not released, so the next run's input keeps whatever storage it got in exchange. A branch's
  // or a loop body's inputs are set once for several runs (the captured values): kept whole.
  for (const int k : input_index_) {
    last[static_cast<std::size_t>(k)] = -1;
    if (!inputs_rewritten_) dies_at[static_cast<std::size_t>(k)] = -1;
  }
  release_after_.assign(nodes_.size(), {});
  for (std::size_t k = constants_.size(); k < tensor_count_; ++k)
    if (last[k] >= 0) release_after_[static_cast<std::size_t>(last[k])].push_back(static_cast<int>(k));
  input0_dies_.assign(nodes_.size(), 0);
  for (std::size_t n = 0; n < nodes_.size(); ++n) {
    const auto& in = nodes_[n].inputs;
    input0_dies_[n] = !in.empty() && in[0] >= 0 && dies_at[static_cast<std::size_t>(in[0])] == static_cast<int>(n) &&
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

}  // namespace spmd::models
