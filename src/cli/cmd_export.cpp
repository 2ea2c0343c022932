// spmd export: an ensemble checkpoint or logreg weights as an ONNX model (workloads/model_export.hpp).
#include "command.hpp"
#include "commands.hpp"
#include "spmd/data/output_set.hpp"
#include "spmd/runtime/error.hpp"
#include "spmd/workloads/model_export.hpp"
#include "spmd/workloads/report.hpp"

namespace spmd::cli {

int cmd_export(const Args& args) {
  po::options_description options("spmd export options");
  options.add_options()(
      "weights", po::value<std::string>(),
      "the model to export: an spmd ensemble checkpoint or a file written by spmd logreg --weights-out (required)")(
      "out", po::value<std::string>(), "the ONNX file to write (required; atomic)")(
      "member", po::value<int>(), "ensembles: export this member only (0-based) instead of the members' mean");
  options.add(common_options(false));
  const auto cl = parse_validated("export", "--weights FILE --out MODEL.onnx [options]", options, args,
                                  {.inputs = {"weights"}, .outputs = {"out"}, .mpi_io = {"weights"}},
                                  [](const po::variables_map& vm) {
                                    require_present(vm, "weights");
                                    require_readable_file(vm, "weights");
                                    require_present(vm, "out");
                                    require_writable_destination(vm, "out");
                                    if (vm.count("member") && vm["member"].as<int>() < 0)
                                      throw Error("--member must be >= 0 (got " + std::to_string(vm["member"].as<int>()) + ")");
                                  });
  if (cl.help) return 0;
  const auto& vm = cl.vm;
  runtime::Context ctx(MPI_COMM_WORLD, context_options(vm));
  workloads::ExportRequest request{vm["weights"].as<std::string>(), vm["out"].as<std::string>(), std::nullopt};
  if (vm.count("member")) request.member = vm["member"].as<int>();
  data::OutputSet outputs(ctx);
  const auto r = workloads::export_onnx(ctx, request, outputs);
  nlohmann::json j = {{"weights", request.weights}, {"out", request.out}, {"kind", r.kind}, {"model", r.description},
                      {"input", r.input}, {"output", r.output}, {"bytes", r.bytes}, {"opset", 13}};
  for (const auto& [key, value] : r.metadata) j["metadata"][key] = value;
  if (const std::string json = json_path(vm); !json.empty()) outputs.write_text(json, workloads::json_text(j));
  outputs.publish();
  std::string text = workloads::format("# exported %s\n#   from   %s\n#   to     %s (ONNX opset 13, %lld bytes)\n",
                                       r.description.c_str(), request.weights.c_str(), request.out.c_str(),
                                       static_cast<long long>(r.bytes));
  text += "#   input  " + r.input + "\n#   output " + r.output + "\n";
  for (const auto& [key, value] : r.metadata) text += workloads::format("#   %-26s %s\n", key.c_str(), value.c_str());
  print_root(text);
  return 0;
}

}  // namespace spmd::cli
