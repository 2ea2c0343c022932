#pragma once
// The built-in CPU backend (src/backends/cpu/).
#include "spmd/backends/backend.hpp"

namespace spmd::backends::cpu {

const Backend& backend();

}  // namespace spmd::backends::cpu
