#include "spmd/data/file_identity.hpp"
#include "spmd/runtime/io_deadline.hpp"

#include <sys/stat.h>

#include <ctime>
#include <filesystem>
#include <system_error>

namespace spmd::data {

std::string input_file_stamp(const FileIdentity& id) {
  if (id.size < 0) return " [missing]";
  return " [size " + std::to_string(id.size) + " mtime " + std::to_string(id.mtime_ns / 1000000000) + "]";
}

std::string checkpoint_data_identity(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  return path + " (" + (ec ? std::string("?") : std::to_string(size)) + " bytes)";
}

FileIdentity file_identity(const std::string& path) {
  struct stat st {};
  FileIdentity id;
  const runtime::IoDeadline deadline("stat", path);
  if (::stat(path.c_str(), &st) != 0) return id;
  id.device = static_cast<std::uint64_t>(st.st_dev);
  id.inode = static_cast<std::uint64_t>(st.st_ino);
  id.size = static_cast<std::int64_t>(st.st_size);
  id.mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return id;
}

namespace {
std::string clock_text(std::int64_t ns) {
  const std::time_t seconds = static_cast<std::time_t>(ns / 1000000000);
  char text[32] = {0};
  std::strftime(text, sizeof text, "%H:%M:%S", std::localtime(&seconds));
  return std::string(text) + "." + std::to_string((ns % 1000000000) / 100000000);
}
}  // namespace

std::string describe_change(const FileIdentity& before, const FileIdentity& after) {
  if (after.size < 0) return "removed";
  std::string out;
  if (before.device != after.device || before.inode != after.inode) out = "replaced (another file under the same name)";
  if (before.size != after.size)
    out += (out.empty() ? "" : ", ") + std::string("size ") + std::to_string(before.size) + " -> " +
           std::to_string(after.size) + " bytes";
  if (before.mtime_ns != after.mtime_ns)
    out += (out.empty() ? "" : ", ") + std::string("modified ") + clock_text(before.mtime_ns) + " -> " +
           clock_text(after.mtime_ns);
  return out.empty() ? "unchanged" : out;
}

}  // namespace spmd::data
