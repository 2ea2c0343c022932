// spmd model info: what an ONNX file holds and how spmd eval would take it (models/onnx_info.hpp).
// Serial work: rank 0 reads the file, the other ranks (if launched under mpirun) share its verdict.
#include "command.hpp"
#include "commands.hpp"
#include "spmd/models/onnx_info.hpp"
#include "spmd/runtime/error.hpp"
#include "spmd/workloads/model_info.hpp"
#include "spmd/workloads/report.hpp"

namespace spmd::cli {

namespace {

const char* kModelUsage =
    "usage: spmd model info MODEL.onnx [--json FILE]\n"
    "  info   inputs and outputs (shapes, layout), opset, producer, an op histogram, parameters,\n"
    "         FLOPs per example, whether spmd runs every node, and the features spmd eval expects\n";

int info(const Args& args) {
  po::options_description options("spmd model info options");
  options.add_options()("model", po::value<std::string>(), "the ONNX file (also the first positional argument)");
  options.add(common_options(false));
  Args with_flag = args;
  if (!with_flag.empty() && with_flag[0].rfind("-", 0) != 0) with_flag.insert(with_flag.begin(), "--model");
  const auto cl = parse_validated("model info", "MODEL.onnx [--json OUT]", options, with_flag,
                                  {.inputs = {"model"}, .outputs = {}, .mpi_io = {}}, [](const po::variables_map& vm) {
                                    require_present(vm, "model");
                                    require_readable_file(vm, "model");
                                  });
  if (cl.help) return 0;
  on_root([&] {
    const auto description = models::describe_onnx_model(cl.vm["model"].as<std::string>());
    print_root(workloads::model_info_text(description));
    if (!json_path(cl.vm).empty()) workloads::write_json(json_path(cl.vm), workloads::model_info_json(description));
  });
  return 0;
}

}  // namespace

int cmd_model(const Args& args) { return run_subcommand("model", args, kModelUsage, {{"info", info}}); }

}  // namespace spmd::cli
