#include "commands.hpp"
#include "spmd/runtime/error.hpp"

namespace spmd::cli {
int cmd_logreg(const Args&) { throw CollectiveError("spmd logreg: not implemented yet"); }
}  // namespace spmd::cli
