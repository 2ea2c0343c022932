#include "session.hpp"

#include "commands.hpp"
#include "spmd/workloads/report.hpp"
#include "spmd/workloads/time_breakdown.hpp"

namespace spmd::cli {

Session::Session(const CommandLine& cl) : Session(cl, context_options(cl.vm)) {}

Session::Session(const CommandLine& cl, const runtime::ContextOptions& options)
    : cl(cl), ctx(MPI_COMM_WORLD, options), stop_polling(std::in_place), json(json_path(cl.vm)) {}

void Session::startup(const std::string& lines) const {
  print_root(workloads::startup_table(ctx, cl.command) + lines);
}

nlohmann::json Session::time_breakdown() {
  const auto breakdown = workloads::reduce_time_breakdown(ctx, account.stop());
  print_root(workloads::time_breakdown_table(breakdown));
  return workloads::to_json(breakdown);
}

}  // namespace spmd::cli
