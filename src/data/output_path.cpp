#include "output_path.hpp"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <filesystem>

#include "spmd/data/output_space.hpp"
#include "spmd/runtime/error.hpp"
#include "spmd/runtime/io_deadline.hpp"

namespace spmd::data::output_path {

namespace fs = std::filesystem;

void require_writable_target(const std::string& final_path) {
  if (final_path.empty()) throw Error("cannot write an HDF5 file: no output path given");
  const fs::path target(final_path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw Error("cannot write '" + final_path + "': the folder '" + dir.string() + "' does not exist");
  if (fs::is_directory(target, ec)) throw Error("cannot write '" + final_path + "': it is a directory");
}

std::string temp_path_for(const std::string& final_path, long pid) {
  const fs::path target(final_path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  // Built by appending: GCC 12 warns falsely (-Wrestrict) on "." + std::string.
  std::string name(".");
  name += target.filename().string();
  name += ".tmp.";
  name += std::to_string(pid);
  return (dir / name).string();
}

void fsync_path(const std::string& path, bool directory) {
  const runtime::IoDeadline deadline("fsync", path);
  const int fd = ::open(path.c_str(), directory ? O_RDONLY | O_DIRECTORY : O_RDONLY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

void publish(const std::string& temp_path, const std::string& final_path) {
  fsync_path(temp_path, false);
  std::error_code ec;
  fs::rename(temp_path, final_path, ec);
  if (ec) throw Error("cannot rename '" + temp_path + "' to '" + final_path + "': " + ec.message());
  const fs::path parent = fs::path(final_path).parent_path();
  fsync_path(parent.empty() ? std::string(".") : parent.string(), true);
}

}  // namespace spmd::data::output_path

namespace spmd::data {

namespace fs = std::filesystem;

std::string space_shortage(const std::string& final_path, std::uint64_t bytes, const std::string& what) {
  const fs::path target(final_path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  struct statvfs st {};
  const runtime::IoDeadline deadline("statvfs", dir.string());
  if (::statvfs(dir.c_str(), &st) != 0) return "";  // cannot tell: let the write say
  const std::uint64_t free_bytes = static_cast<std::uint64_t>(st.f_bavail) * st.f_frsize;
  if (free_bytes >= bytes) return "";
  return "No space left on device: '" + dir.string() + "' has " + std::to_string(free_bytes) + " bytes free, " + what +
         " needs " + std::to_string(bytes) + " bytes";
}

}  // namespace spmd::data
