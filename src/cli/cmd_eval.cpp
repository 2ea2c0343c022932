#include "commands.hpp"
#include "spmd/runtime/error.hpp"

namespace spmd::cli {
int cmd_eval(const Args&) { throw CollectiveError("spmd eval: not implemented yet"); }
}  // namespace spmd::cli
