#pragma once
// One function per subcommand; each takes the arguments after the command name and
// returns the process exit code. Errors are thrown (see main.cpp for how they end the job).
#include <string>
#include <vector>

namespace spmd::cli {

using Args = std::vector<std::string>;

int cmd_info(const Args& args);
int cmd_data(const Args& args);
int cmd_eval(const Args& args);
int cmd_logreg(const Args& args);
int cmd_ensemble(const Args& args);
int cmd_export(const Args& args);
int cmd_model(const Args& args);

// Prints on rank 0 only.
void print_root(const std::string& text);

}  // namespace spmd::cli
