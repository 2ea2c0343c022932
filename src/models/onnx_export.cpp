#include "spmd/models/onnx_export.hpp"

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <cstring>
#include <initializer_list>

#include "spmd/models/cnn_params.hpp"
#include "spmd/runtime/error.hpp"

namespace spmd::models {
namespace {

constexpr int kOpset = 13;      // every op used here is unchanged from 13 to 17
constexpr int kIrVersion = 8;   // what opset 13..17 files carry; read by every current runtime

// A graph under construction, with names made unique by a prefix (one per member).
class GraphBuilder {
 public:
  explicit GraphBuilder(onnx::GraphProto& graph) : graph_(graph) {}
  onnx::GraphProto& graph() { return graph_; }

  onnx::NodeProto& node(const std::string& op, std::initializer_list<std::string> inputs, const std::string& output) {
    onnx::NodeProto& n = *graph_.add_node();
    n.set_op_type(op);
    n.set_name(output);
    for (const auto& in : inputs) n.add_input(in);
    n.add_output(output);
    return n;
  }
  static void ints(onnx::NodeProto& n, const std::string& name, std::initializer_list<std::int64_t> values) {
    onnx::AttributeProto& a = *n.add_attribute();
    a.set_name(name);
    a.set_type(onnx::AttributeProto::INTS);
    for (const auto v : values) a.add_ints(v);
  }
  static void integer(onnx::NodeProto& n, const std::string& name, std::int64_t value) {
    onnx::AttributeProto& a = *n.add_attribute();
    a.set_name(name);
    a.set_type(onnx::AttributeProto::INT);
    a.set_i(value);
  }
  // A float32 initializer of `dims` from `values` (raw little-endian bytes, as exporters write).
  const std::string& initializer(const std::string& name, std::initializer_list<std::int64_t> dims, const float* values) {
    onnx::TensorProto& t = *graph_.add_initializer();
    t.set_name(name);
    t.set_data_type(onnx::TensorProto::FLOAT);
    std::int64_t count = 1;
    for (const auto d : dims) {
      t.add_dims(d);
      count *= d;
    }
    t.set_raw_data(values, static_cast<std::size_t>(count) * sizeof(float));
    return t.name();
  }
  // A float32 graph input or output [batch, dims...].
  void value(bool input, const std::string& name, std::initializer_list<std::int64_t> dims) {
    onnx::ValueInfoProto& v = input ? *graph_.add_input() : *graph_.add_output();
    v.set_name(name);
    auto& tensor = *v.mutable_type()->mutable_tensor_type();
    tensor.set_elem_type(onnx::TensorProto::FLOAT);
    tensor.mutable_shape()->add_dim()->set_dim_param("batch");
    for (const auto d : dims) tensor.mutable_shape()->add_dim()->set_dim_value(d);
  }

 private:
  onnx::GraphProto& graph_;
};

onnx::ModelProto new_model(const std::string& graph_name, const OnnxDescription& description) {
  onnx::ModelProto model;
  model.set_ir_version(kIrVersion);
  model.set_producer_name("spmd-kit");
  model.set_producer_version(SPMD_VERSION);
  model.set_doc_string(description.doc);
  onnx::OperatorSetIdProto& opset = *model.add_opset_import();
  opset.set_domain("");
  opset.set_version(kOpset);
  for (const auto& [key, value] : description.metadata) {
    onnx::StringStringEntryProto& p = *model.add_metadata_props();
    p.set_key(key);
    p.set_value(value);
  }
  model.mutable_graph()->set_name(graph_name);
  return model;
}

// The checker and shape inference (strict) on the finished model, then its bytes.
std::string checked_bytes(onnx::ModelProto& model, const std::string& what) {
  try {
    onnx::checker::check_model(model);
    onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(), {1, 1, 0});
  } catch (const std::exception& e) {
    throw Error("internal: the ONNX graph of " + what + " is refused by the ONNX checker: " + e.what());
  }
  std::string bytes;
  if (!model.SerializeToString(&bytes)) throw Error("internal: the ONNX graph of " + what + " cannot be serialized");
  return bytes;
}

// HWIO [3, 3, I, O] -> OIHW [O, I, 3, 3], ONNX Conv's layout.
std::vector<float> oihw(const float* hwio, int kh, int kw, int in, int out) {
  std::vector<float> w(static_cast<std::size_t>(kh) * kw * in * out);
  for (int y = 0; y < kh; ++y)
    for (int x = 0; x < kw; ++x)
      for (int i = 0; i < in; ++i)
        for (int o = 0; o < out; ++o)
          w[((static_cast<std::size_t>(o) * in + i) * kh + y) * kw + x] =
              hwio[((static_cast<std::size_t>(y) * kw + x) * in + i) * out + o];
  return w;
}

// One member's subgraph from the NCHW input to its probabilities, named `output`.
void member_graph(GraphBuilder& g, const CnnLayout& layout, const std::vector<float>& params, const std::string& prefix,
                  const std::string& nchw, const std::string& output) {
  const auto& tensors = layout.tensors();
  const auto at = [&](std::size_t t) { return params.data() + tensors[t].offset; };
  std::string x = nchw;
  for (std::size_t l = 0; l < layout.convs().size(); ++l) {
    const CnnConvLayer& c = layout.convs()[l];
    const std::string name = prefix + "conv" + std::to_string(l);
    const int k = layout.config().kernel_size, p = layout.config().pool_size;
    const auto w = oihw(at(c.kernel), k, k, c.in_channels, c.out_channels);
    auto& conv = g.node("Conv",
                        {x, g.initializer(name + ".weight", {c.out_channels, c.in_channels, k, k}, w.data()),
                         g.initializer(name + ".bias", {c.out_channels}, at(c.bias))},
                        name);
    GraphBuilder::ints(conv, "kernel_shape", {k, k});
    GraphBuilder::ints(conv, "pads", {k / 2, k / 2, k / 2, k / 2});  // SAME for the odd kernel
    g.node("Relu", {name}, name + ".relu");
    auto& pool = g.node("AveragePool", {name + ".relu"}, name + ".pool");
    GraphBuilder::ints(pool, "kernel_shape", {p, p});
    GraphBuilder::ints(pool, "strides", {p, p});
    x = name + ".pool";
  }
  auto& nhwc = g.node("Transpose", {x}, prefix + "nhwc");  // flatten in our (NHWC) order
  GraphBuilder::ints(nhwc, "perm", {0, 2, 3, 1});
  auto& flat = g.node("Flatten", {prefix + "nhwc"}, prefix + "flat");
  GraphBuilder::integer(flat, "axis", 1);
  x = prefix + "flat";
  for (std::size_t j = 0; j < layout.denses().size(); ++j) {
    const CnnDenseLayer& d = layout.denses()[j];
    const std::string name = prefix + "dense" + std::to_string(j);
    g.node("Gemm",
           {x, g.initializer(name + ".weight", {d.in_features, d.out_features}, at(d.kernel)),
            g.initializer(name + ".bias", {d.out_features}, at(d.bias))},
           name);
    x = name;
    if (d.relu) x = g.node("Relu", {name}, name + ".relu").output(0);
  }
  GraphBuilder::integer(g.node("Softmax", {x}, output), "axis", 1);
}

}  // namespace

std::string cnn_ensemble_onnx(const CnnConfig& config, const std::vector<std::vector<float>>& members,
                              const OnnxDescription& description) {
  const CnnLayout layout(config);
  if (members.empty()) throw Error("ONNX export: the ensemble has no member");
  for (std::size_t m = 0; m < members.size(); ++m)
    if (members[m].size() != layout.param_count())
      throw Error("ONNX export: member " + std::to_string(m) + " has " + std::to_string(members[m].size()) +
                  " parameters; the " + config.describe() + " CNN has " + std::to_string(layout.param_count()));
  onnx::ModelProto model = new_model("spmd_cnn_ensemble", description);
  GraphBuilder g(*model.mutable_graph());
  g.value(true, "images", {config.height, config.width, config.channels});
  GraphBuilder::ints(g.node("Transpose", {"images"}, "nchw"), "perm", {0, 3, 1, 2});
  if (members.size() == 1) {
    member_graph(g, layout, members.front(), "", "nchw", "probabilities");
  } else {
    onnx::NodeProto mean;  // added last, after the members it reads
    for (std::size_t m = 0; m < members.size(); ++m) {
      const std::string prefix = "member" + std::to_string(m) + ".";
      member_graph(g, layout, members[m], prefix, "nchw", prefix + "probabilities");
      mean.add_input(prefix + "probabilities");
    }
    mean.set_op_type("Mean");
    mean.set_name("probabilities");
    mean.add_output("probabilities");
    *g.graph().add_node() = std::move(mean);
  }
  g.value(false, "probabilities", {config.classes});
  return checked_bytes(model, "the " + config.describe() + " ensemble");
}

std::string logreg_onnx(const LogregParameters& w, const OnnxDescription& description) {
  if (w.features < 1 || w.classes < 1 || w.W.size() != static_cast<std::size_t>(w.features) * w.classes ||
      (w.has_intercept() && w.bias.size() != static_cast<std::size_t>(w.classes)))
    throw Error("ONNX export: logistic-regression weights of inconsistent sizes");
  onnx::ModelProto model = new_model("spmd_logreg", description);
  GraphBuilder g(*model.mutable_graph());
  g.value(true, "features", {w.features});
  onnx::NodeProto& gemm = g.node("Gemm", {"features", g.initializer("W", {w.features, w.classes}, w.W.data())}, "logits");
  if (w.has_intercept()) gemm.add_input(g.initializer("b", {w.classes}, w.bias.data()));
  GraphBuilder::integer(g.node("Softmax", {"logits"}, "probabilities"), "axis", 1);
  g.value(false, "probabilities", {w.classes});
  return checked_bytes(model, "the logistic regression");
}

}  // namespace spmd::models
