#pragma once
// What every workload command does between binding its options and running the workload,
// and after: the context (ranks, devices, backend), the time account of the workload from
// here to its results (workloads/time_breakdown.hpp), signals polled until the command
// ends them (runtime/stop_request.hpp: a stop is agreed at the workload's next agreement),
// the start-up table, and at the end the time breakdown on stdout and in the JSON.
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "command.hpp"
#include "spmd/runtime/context.hpp"
#include "spmd/runtime/stop_request.hpp"
#include "spmd/runtime/time_account.hpp"

namespace spmd::cli {

struct Session {
  explicit Session(const CommandLine& cl);
  // With the context options the command settled (context_options(cl.vm), adjusted).
  Session(const CommandLine& cl, const runtime::ContextOptions& options);

  const CommandLine& cl;
  runtime::Context ctx;
  runtime::TimeAccount account;
  std::optional<runtime::StopPolling> stop_polling;
  std::string json;  // --json, or empty

  // Rank 0 prints the start-up table of the command, then `lines`.
  void startup(const std::string& lines) const;
  // Collective: stops the account, prints the time breakdown on rank 0 and returns it as JSON.
  nlohmann::json time_breakdown();
};

}  // namespace spmd::cli
