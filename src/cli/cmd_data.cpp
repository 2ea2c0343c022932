#include "commands.hpp"
#include "spmd/runtime/error.hpp"

namespace spmd::cli {
int cmd_data(const Args&) { throw CollectiveError("spmd data: not implemented yet"); }
}  // namespace spmd::cli
