#include "commands.hpp"
#include "spmd/runtime/error.hpp"

namespace spmd::cli {
int cmd_ensemble(const Args&) { throw CollectiveError("spmd ensemble: not implemented yet"); }
}  // namespace spmd::cli
