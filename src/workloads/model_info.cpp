#include "spmd/workloads/model_info.hpp"

#include <utility>

#include "spmd/workloads/report.hpp"

namespace spmd::workloads {

using models::OnnxModelInfo;

std::string model_info_text(const OnnxModelInfo& info) {
  std::string t = format("# model      %s\n#   format   ONNX IR %lld, opset %d, producer %s %s\n", info.path.c_str(),
                         static_cast<long long>(info.ir_version), info.opset,
                         info.producer.empty() ? "(not said)" : info.producer.c_str(), info.producer_version.c_str());
  for (const auto& [kind, values] : {std::pair{"input ", &info.inputs}, std::pair{"output", &info.outputs}})
    for (const auto& v : *values)
      t += format("#   %s   %-16s %-8s %s%s\n", kind, v.name.c_str(), v.type.c_str(), v.shape().c_str(),
                  v.layout.empty() ? "" : (" " + v.layout).c_str());
  int nodes = 0;
  for (const auto& [op, count] : info.op_counts) nodes += count;
  t += format("#   size     %lld parameters (%.1f KiB), %d nodes\n", static_cast<long long>(info.parameters),
              static_cast<double>(info.parameter_bytes) / 1024.0, nodes);
  if (info.flops_per_example)
    t += format("#   compute  %.3f MFLOP per example (2 per multiply-add of Conv, Gemm, MatMul, quantized ones alike)\n",
                static_cast<double>(*info.flops_per_example) / 1e6);
  if (info.evaluable)
    t += format("#   spmd eval runs it: %d classes, output read as %s; expects %s\n", info.classes,
                info.output_reading.c_str(), info.expects.c_str());
  else if (!info.data_sized.empty())
    t += "#   spmd eval takes " + info.data_sized + " from the data's samples, then checks it; expects " + info.expects + "\n";
  else
    t += "#   spmd eval refuses it: " + info.refusal + "\n";
  t += format("# %-24s %6s  %s\n", "op", "nodes", "supported");
  for (const auto& [op, count] : info.op_counts)
    t += format("  %-24s %6d  %s\n", op.c_str(), count, info.unsupported.count(op) ? "no" : "yes");
  return t;
}

nlohmann::json model_info_json(const OnnxModelInfo& info) {
  const auto values = [](const std::vector<OnnxModelInfo::Value>& vs) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& v : vs) a.push_back({{"name", v.name}, {"type", v.type}, {"dims", v.dims}, {"layout", v.layout}});
    return a;
  };
  nlohmann::json j = {{"path", info.path}, {"producer", info.producer}, {"producer_version", info.producer_version},
                      {"ir_version", info.ir_version}, {"opset", info.opset}, {"opsets", info.opsets},
                      {"inputs", values(info.inputs)}, {"outputs", values(info.outputs)}, {"ops", info.op_counts},
                      {"unsupported_ops", info.unsupported}, {"all_supported", info.unsupported.empty()},
                      {"parameters", info.parameters}, {"parameter_bytes", info.parameter_bytes},
                      {"evaluable", info.evaluable}, {"refusal", info.refusal}, {"data_sized", info.data_sized}, {"classes", info.classes},
                      {"output_reading", info.output_reading}, {"expects", info.expects}};
  j["flops_per_example"] = info.flops_per_example ? nlohmann::json(*info.flops_per_example) : nlohmann::json(nullptr);
  return j;
}

}  // namespace spmd::workloads
