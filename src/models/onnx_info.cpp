#include "spmd/models/onnx_info.hpp"

#include <algorithm>
#include <cctype>
#include <set>

#include "onnx_proto.hpp"
#include "spmd/models/onnx_classifier.hpp"
#include "spmd/models/onnx_graph.hpp"
#include "spmd/runtime/error.hpp"

namespace spmd::models {

namespace {

std::string type_name(int type) {
  switch (type) {
    case onnx::TensorProto::FLOAT: return "float32";
    case onnx::TensorProto::DOUBLE: return "float64";
    case onnx::TensorProto::FLOAT16: return "float16";
    case onnx::TensorProto::BFLOAT16: return "bfloat16";
    default: {
      std::string name = onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(type));
      std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
      return name.empty() ? "type " + std::to_string(type) : name;
    }
  }
}

std::int64_t element_bytes(int type) {
  switch (type) {
    case onnx::TensorProto::DOUBLE: case onnx::TensorProto::INT64: case onnx::TensorProto::UINT64: return 8;
    case onnx::TensorProto::FLOAT16: case onnx::TensorProto::BFLOAT16: case onnx::TensorProto::INT16:
    case onnx::TensorProto::UINT16: return 2;
    case onnx::TensorProto::INT8: case onnx::TensorProto::UINT8: case onnx::TensorProto::BOOL: return 1;
    default: return 4;
  }
}

// Images by their channel axis: a 4-D shape whose dimension 1 (NCHW) or 3 (NHWC) is 1, 3 or 4
// and the other is not.
std::string layout_of(const std::vector<std::string>& dims) {
  if (dims.size() != 4) return "";
  const auto channels = [](const std::string& d) { return d == "1" || d == "3" || d == "4"; };
  if (channels(dims[1]) && !channels(dims[3])) return "NCHW";
  if (channels(dims[3]) && !channels(dims[1])) return "NHWC";
  return "";
}

OnnxModelInfo::Value value_of(const onnx::ValueInfoProto& v) {
  OnnxModelInfo::Value out{v.name(), type_name(v.type().tensor_type().elem_type()), {}, ""};
  for (const auto& d : v.type().tensor_type().shape().dim())
    out.dims.push_back(d.has_dim_value() ? std::to_string(d.dim_value()) : d.has_dim_param() ? d.dim_param() : "?");
  out.layout = layout_of(out.dims);
  return out;
}

std::string shape_text(const std::vector<std::string>& dims) {
  std::string s = "[";
  for (std::size_t k = 0; k < dims.size(); ++k) s += (k ? ", " : "") + dims[k];
  return s + "]";
}

// What the features dataset may hold for the input (onnx_classifier.hpp's rules).
std::string expected_features(const OnnxModelInfo::Value& in) {
  std::vector<std::string> row(in.dims.begin() + 1, in.dims.end());
  std::string text = "features [N, " + shape_text(row).substr(1) + " as stored (1-sized dimensions aside)";
  if (in.layout == "NCHW")
    text += ", or images [N, " + row[1] + ", " + row[2] + ", " + row[0] + "] (NHWC, transposed to NCHW)";
  if (row.size() == 1) text += ", or any sample of " + row[0] + " values (read row-major)";
  return text;
}

// FLOPs of one example: 2 per multiply-add of the Conv, Gemm and MatMul nodes (and their quantized
// forms: integer multiply-adds counted alike) of a run (of the
// batch the file fixes, else of 1 row) per row, and of the recurrent nodes' GEMMs (every step's
// X W^T and H R^T).
std::int64_t flops_per_example(const std::shared_ptr<const OnnxGraph>& graph) {
  OnnxRunner runner(graph);
  const std::int64_t rows = std::max<std::int64_t>(1, graph->inputs().front().dims.at(0));
  std::vector<std::int64_t> shape{rows};
  for (std::size_t k = 1; k < graph->inputs().front().dims.size(); ++k) shape.push_back(graph->inputs().front().dims[k]);
  runner.input(0).reset(ops::ElemType::Float32, shape);
  std::fill(runner.input(0).f.begin(), runner.input(0).f.end(), 0.0f);
  std::int64_t macs = 0;
  runner.run([&](const ops::OpCall& call) {
    const std::string& op = call.node.op;
    const std::int64_t out = call.out[0]->size();
    if (op == "Conv" || op == "ConvInteger" || op == "QLinearConv") {
      const auto& w = call.input(op == "QLinearConv" ? 3 : 1).shape;
      std::int64_t per_output = 1;
      for (std::size_t k = 1; k < w.size(); ++k) per_output *= w[k];
      macs += out * per_output;
    } else if (op == "Gemm") {
      const auto& a = call.input(0).shape;
      macs += out * (call.node.attrs.i("transA", 0) ? a[0] : a[1]);
    } else if (op == "MatMul" || op == "MatMulInteger" || op == "QLinearMatMul") {
      macs += out * call.input(0).shape.back();
    } else if (op == "LSTM" || op == "GRU" || op == "RNN") {  // Y: [steps, directions, batch, hidden]
      const auto& w = call.input(1).shape;                    // [directions, gates * hidden, input]
      const std::int64_t hidden = call.input(2).shape.back();
      macs += out / hidden * w[1] * (w[2] + hidden);
    }
  });
  macs /= rows;
  return 2 * macs;
}

}  // namespace

std::string OnnxModelInfo::Value::shape() const { return shape_text(dims); }

OnnxModelInfo describe_onnx_model(const std::string& path) {
  const onnx::ModelProto model = read_onnx_model(path, "ONNX model '" + path + "'");
  OnnxModelInfo info;
  info.path = path;
  info.producer = model.producer_name();
  info.producer_version = model.producer_version();
  info.ir_version = model.ir_version();
  info.opset = default_opset(model);
  for (const auto& o : model.opset_import()) info.opsets[o.domain() == "ai.onnx" ? "" : o.domain()] = static_cast<int>(o.version());
  const auto& graph = model.graph();
  std::map<std::string, bool> initializer;
  for (const auto& t : graph.initializer()) {
    initializer[t.name()] = true;
    std::int64_t count = 1;
    for (const auto d : t.dims()) count *= d;
    info.parameters += count;
    info.parameter_bytes += t.has_raw_data() ? static_cast<std::int64_t>(t.raw_data().size()) : count * element_bytes(t.data_type());
  }
  // As OnnxGraph::load reads them: where every input has an initializer (IR >= 4), those are
  // the inputs' defaults and the inputs are the model's.
  const bool all_have_defaults =
      model.ir_version() >= 4 && graph.input_size() > 0 &&
      std::all_of(graph.input().begin(), graph.input().end(), [&](const auto& in) { return initializer.count(in.name()) > 0; });
  for (const auto& in : graph.input())
    if (all_have_defaults || !initializer.count(in.name())) info.inputs.push_back(value_of(in));
  for (const auto& out : graph.output()) info.outputs.push_back(value_of(out));
  std::set<std::pair<std::string, std::string>> local_functions;  // inlined at load: their ops are checked there
  for (const auto& f : model.functions()) local_functions.insert({f.domain(), f.name()});
  for (const auto& n : graph.node()) {
    if (local_functions.count({n.domain(), n.op_type()})) {
      ++info.op_counts[n.domain() + "." + n.op_type()];
      continue;
    }
    const bool default_domain = n.domain().empty() || n.domain() == "ai.onnx";
    const std::string op = default_domain ? n.op_type() : n.domain() + "." + n.op_type();
    ++info.op_counts[op];
    if (!default_domain || (op != "Constant" && op != "If" && op != "Loop" && !ops::find_graph_op(op))) ++info.unsupported[op];
  }
  if (!info.unsupported.empty()) {
    info.refusal = "it uses ops spmd does not run:";
    for (const auto& [op, count] : info.unsupported) info.refusal += " " + op + " (" + std::to_string(count) + ")";
    return info;
  }
  const auto& in_dims = info.inputs.empty() ? std::vector<std::string>{} : info.inputs.front().dims;
  std::string symbolic;
  for (std::size_t k = 1; k < in_dims.size(); ++k)
    if (in_dims[k].empty() || !std::isdigit(static_cast<unsigned char>(in_dims[k][0]))) symbolic += (symbolic.empty() ? "" : ", ") + in_dims[k];
  if (info.inputs.size() == 1 && !symbolic.empty()) {  // eval's load checks need the data's sizes
    info.data_sized = symbolic;
    info.expects = expected_features(info.inputs.front());
    return info;
  }
  try {
    const auto classifier = make_onnx_classifier(path);  // every check spmd eval makes at load
    const auto loaded = OnnxGraph::load(path);
    info.classes = classifier->classes();
    const std::string last = loaded->output_kind(0);
    const auto& out_dims = info.outputs.front().dims;
    if (std::all_of(out_dims.begin() + std::min<std::size_t>(1, out_dims.size()), out_dims.end(),
                    [](const std::string& d) { return d == "1"; }))  // one score per example: a binary classifier
      info.output_reading = last == "Sigmoid" ? "probability of class 1" : "logit of class 1";
    else
      info.output_reading = last == "Softmax" ? "probabilities" : last == "LogSoftmax" ? "log-probabilities" : "logits";
    info.expects = expected_features(info.inputs.front());
    info.flops_per_example = flops_per_example(loaded);
    info.evaluable = true;
  } catch (const Error& e) {
    info.refusal = e.what();
  }
  return info;
}

}  // namespace spmd::models
