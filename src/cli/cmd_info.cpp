// spmd info: the start-up table (ranks, hosts, node-local ranks, devices) and library
// versions. Also the simplest end-to-end check of a launch (mpirun, srun, sbatch).
#include <boost/version.hpp>

#include <chrono>
#include <thread>

#include "command.hpp"
#include "commands.hpp"
#include "spmd/backends/backend.hpp"
#include "spmd/runtime/collectives.hpp"
#include "spmd/runtime/versions.hpp"
#include "spmd/workloads/report.hpp"

namespace spmd::cli {

int cmd_info(const Args& args) {
  po::options_description options = common_options();
  const auto cl = parse_validated("info", "[options]", options, args, {}, nullptr);
  if (cl.help) return 0;
  runtime::Context ctx(MPI_COMM_WORLD, context_options(cl.vm));
  const std::string table = workloads::startup_table(ctx, "info");
  auto versions = runtime::library_versions();
  for (auto& line : backends::backend_library_versions()) versions.push_back(std::move(line));
  versions.emplace_back("boost", std::to_string(BOOST_VERSION / 100000) + "." + std::to_string(BOOST_VERSION / 100 % 1000));
  std::string text = table + "# libraries\n";
  for (const auto& [name, version] : versions) text += workloads::format("#   %-6s %s\n", name.c_str(), version.c_str());
  print_root(text);
  auto j = workloads::startup_json(ctx);
  if (ctx.is_root() && !json_path(cl.vm).empty()) {
    for (const auto& [name, version] : versions) j["libraries"][name] = version;
    workloads::write_json(json_path(cl.vm), j);
  }
  ctx.set_phase("info: final barrier");
  std::int64_t one = 1;
  runtime::allreduce_sum(ctx, std::span<std::int64_t>(&one, 1));
  return 0;
}

}  // namespace spmd::cli
