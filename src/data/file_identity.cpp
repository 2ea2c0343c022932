#include "spmd/data/file_identity.hpp"

#include <sys/stat.h>

#include <filesystem>
#include <system_error>

namespace spmd::data {

std::string input_file_stamp(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return " [missing]";
  return " [size " + std::to_string(st.st_size) + " mtime " + std::to_string(st.st_mtim.tv_sec) + "]";
}

std::string checkpoint_data_identity(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  return path + " (" + (ec ? std::string("?") : std::to_string(size)) + " bytes)";
}

}  // namespace spmd::data
