#pragma once
// Versions of the libraries this binary always runs with, for `spmd info` and --json (a
// module backend's own libraries: backends::backend_library_versions).
#include <string>
#include <utility>
#include <vector>

namespace spmd::runtime {

std::vector<std::pair<std::string, std::string>> library_versions();

}  // namespace spmd::runtime
