#pragma once
// A benchmark's Python peer (PyTorch, h5py): a script beside the benchmark's source, run
// with /usr/bin/python3, printing one JSON object on stdout.
#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace spmd::bench {

// Runs `/usr/bin/python3 <folder of source_file>/<script> <args>` (stderr dropped) and
// parses its output; {"error": why} when python, the script or its output is missing.
// source_file: the caller's __FILE__, which is relative to the build folder (this
// executable's) when the compiler was given a relative path.
inline nlohmann::json run_python_peer(const char* source_file, const std::string& script, const std::string& args) {
  std::filesystem::path source = source_file;
  if (source.is_relative()) source = std::filesystem::read_symlink("/proc/self/exe").parent_path() / source;
  const std::string path = (source.parent_path() / script).lexically_normal().string();
  std::error_code ec;
  if (!std::filesystem::exists("/usr/bin/python3", ec)) return {{"error", "no /usr/bin/python3"}};
  const std::string cmd = "/usr/bin/python3 " + path + " " + args + " 2>/dev/null";
  std::FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return {{"error", "cannot run " + cmd}};
  std::string out;
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), static_cast<int>(buf.size()), pipe) != nullptr) out += buf.data();
  pclose(pipe);
  try {
    return nlohmann::json::parse(out);
  } catch (const std::exception&) {
    return {{"error", "unreadable output from " + path + ": " + out.substr(0, 200)}};
  }
}

}  // namespace spmd::bench
