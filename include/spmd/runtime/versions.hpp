#pragma once
// Versions of the libraries this binary runs with, for `spmd info` and --json.
#include <string>
#include <utility>
#include <vector>

namespace spmd::runtime {

std::vector<std::pair<std::string, std::string>> library_versions();

}  // namespace spmd::runtime
