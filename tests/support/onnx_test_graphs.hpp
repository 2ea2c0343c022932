#pragma once
// Small ONNX graphs written with the ONNX library's protobuf types, for tests that run one
// graph on two backends: input "x" [batch, dims...] float, output "y", weights drawn from a
// fixed seed. The output is [batch, classes] (every graph here ends in a 2-D tensor).
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace spmd::test {

class OnnxTestGraph {
 public:
  OnnxTestGraph(std::vector<std::int64_t> row, int opset = 13) {
    model_.set_ir_version(8);
    auto* op = model_.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    graph_ = model_.mutable_graph();
    graph_->set_name("test");
    auto* x = graph_->add_input();
    x->set_name("x");
    auto* t = x->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    t->mutable_shape()->add_dim()->set_dim_param("batch");
    for (const auto d : row) t->mutable_shape()->add_dim()->set_dim_value(d);
    auto* y = graph_->add_output();
    y->set_name("y");
    auto* yt = y->mutable_type()->mutable_tensor_type();
    yt->set_elem_type(onnx::TensorProto::FLOAT);
    yt->mutable_shape()->add_dim()->set_dim_param("batch");
    yt->mutable_shape()->add_dim()->set_dim_param("classes");
  }

  // Another graph output, after "y", of this element type (its shape unknown).
  void output(const std::string& name, int elem_type = onnx::TensorProto::FLOAT) {
    auto* o = graph_->add_output();
    o->set_name(name);
    auto* t = o->mutable_type()->mutable_tensor_type();
    t->set_elem_type(elem_type);
    t->mutable_shape();  // no dimensions declared: the checker needs the field
  }

  // A node; attrs are added to the returned node.
  onnx::NodeProto& node(const std::string& op, std::vector<std::string> in, std::vector<std::string> out) {
    auto* n = graph_->add_node();
    n->set_op_type(op);
    n->set_name(out.front());
    for (const auto& s : in) n->add_input(s);
    for (const auto& s : out) n->add_output(s);
    return *n;
  }
  static void attr(onnx::NodeProto& n, const std::string& name, std::int64_t v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void attr(onnx::NodeProto& n, const std::string& name, float v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void attr(onnx::NodeProto& n, const std::string& name, const std::vector<std::int64_t>& v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (const auto e : v) a->add_ints(e);
  }
  static void attr(onnx::NodeProto& n, const std::string& name, const std::string& v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
  }

  // A float initializer: `values`, or (empty) values drawn uniformly from [lo, hi).
  void weights(const std::string& name, const std::vector<std::int64_t>& dims, float lo = -1.0f, float hi = 1.0f,
               std::vector<float> values = {}) {
    auto* t = graph_->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    std::int64_t n = 1;
    for (const auto d : dims) {
      t->add_dims(d);
      n *= d;
    }
    std::uniform_real_distribution<float> u(lo, hi);
    if (values.empty())
      for (std::int64_t k = 0; k < n; ++k) values.push_back(u(rng_));
    for (const float v : values) t->add_float_data(v);
  }
  void ints(const std::string& name, const std::vector<std::int64_t>& values) {
    auto* t = graph_->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<std::int64_t>(values.size()));
    for (const auto v : values) t->add_int64_data(v);
  }

  // A narrow integer initializer (uint8, int8, int32: elem_type) of shape `dims` (empty: a scalar),
  // as ONNX stores such values (int32_data).
  void narrow_ints(const std::string& name, int elem_type, const std::vector<std::int64_t>& dims,
                   const std::vector<std::int32_t>& values) {
    auto* t = graph_->add_initializer();
    t->set_name(name);
    t->set_data_type(elem_type);
    for (const auto d : dims) t->add_dims(d);
    for (const auto v : values) t->add_int32_data(v);
  }

  void save(const std::string& path) const {
    std::ofstream out(path, std::ios::binary);
    model_.SerializeToOstream(&out);
  }

 private:
  onnx::ModelProto model_;
  onnx::GraphProto* graph_ = nullptr;
  std::mt19937 rng_{20261126};
};

}  // namespace spmd::test
