#include "spmd/data/output_set.hpp"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "output_path.hpp"
#include "spmd/runtime/agree.hpp"
#include "spmd/runtime/context.hpp"
#include "spmd/runtime/error.hpp"
#include "spmd/runtime/io_deadline.hpp"
#include "spmd/runtime/stop_request.hpp"
#include "spmd/runtime/time_account.hpp"

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

std::string write_text_temporary(const std::string& path, const std::string& text) {
  output_path::require_writable_target(path);
  const std::string tmp = output_path::temp_path_for(path, static_cast<long>(::getpid()));
  // POSIX calls, so that a failure says why (errno: "No space left on device"), and the
  // temporary file goes whatever fails.
  const auto fail = [&](const std::string& what, int error) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw Error("cannot write '" + path + "': " + what + " (" + std::strerror(error) + "; " +
                std::to_string(text.size()) + " bytes to write)");
  };
  const runtime::IoDeadline deadline("open", tmp);
  const runtime::LiveFile live(tmp);  // a signal that ends the process removes it
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("cannot create " + tmp, errno);
  for (std::size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : ENOSPC;
      ::close(fd);
      fail("write failed", error);
    }
    done += static_cast<std::size_t>(n);
  }
  // Some file systems report a full disk only here (NFS, quotas).
  if (::fsync(fd) != 0 && errno != EINVAL) {
    const int error = errno;
    ::close(fd);
    fail("write failed", error);
  }
  if (::close(fd) != 0) fail("write failed", errno);
  return tmp;
}

void write_text_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = write_text_temporary(path, text);
  try {
    output_path::publish(tmp, path);
  } catch (...) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw;
  }
}

std::string replace_refusal(const std::string& final_path) {
  struct stat st {};
  if (::lstat(final_path.c_str(), &st) != 0) return "";  // nothing there yet
  if (S_ISDIR(st.st_mode)) return "'" + final_path + "' is a directory";
  if (!S_ISREG(st.st_mode)) return "";
  const int fd = ::open(final_path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return "";
  int flags = 0;
  const bool known = ::ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0;
  ::close(fd);
  if (known && (flags & (FS_IMMUTABLE_FL | FS_APPEND_FL)))
    return "'" + final_path + "' is " + ((flags & FS_IMMUTABLE_FL) ? "immutable" : "append-only") +
           " (lsattr shows it; chattr -" + ((flags & FS_IMMUTABLE_FL) ? "i" : "a") +
           " by its owner lifts it): it cannot be replaced";
  return "";
}


OutputSet::OutputSet(const runtime::Context& ctx) : ctx_(ctx) {}

OutputSet::~OutputSet() {
  std::error_code ec;
  if (!published_)
    for (const auto& staged : staged_) fs::remove(staged.first, ec);
}

void OutputSet::stage(std::string temp_path, std::string final_path) {
  if (published_) throw Error("internal: output '" + final_path + "' staged after its run's outputs were published");
  if (!ctx_.is_root()) return;
  live_.emplace_back(temp_path);  // until published: a signal that ends the process removes it
  staged_.emplace_back(std::move(temp_path), std::move(final_path));
}

void OutputSet::write_text(const std::string& path, const std::string& text) {
  runtime::TimeScope io(runtime::TimeCategory::Io);
  std::string temp;
  runtime::agree_on(ctx_.comm(), [&] {
    if (ctx_.is_root()) temp = write_text_temporary(path, text);
  });
  if (ctx_.is_root()) stage(std::move(temp), path);
}

void OutputSet::publish() {
  runtime::TimeScope io(runtime::TimeCategory::Io);
  std::size_t done = 0;
  runtime::agree_on(ctx_.comm(), [&] {
    if (!ctx_.is_root()) return;
    for (const auto& staged : staged_)
      if (const std::string why = replace_refusal(staged.second); !why.empty())
        throw Error("cannot publish the run's outputs: " + why + "; no output was published");
    try {
      for (; done < staged_.size(); ++done) output_path::publish(staged_[done].first, staged_[done].second);
    } catch (const Error& e) {
      std::string published;
      for (std::size_t k = 0; k < done; ++k) published += (published.empty() ? "" : ", ") + staged_[k].second;
      throw Error(std::string(e.what()) + (published.empty() ? "; no output was published"
                                                             : "; already published: " + published));
    }
  });
  published_ = true;
  live_.clear();
}

}  // namespace spmd::data
