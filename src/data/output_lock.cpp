#include "spmd/data/output_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "output_path.hpp"
#include "spmd/runtime/agree.hpp"
#include "spmd/runtime/context.hpp"
#include "spmd/runtime/error.hpp"
#include "spmd/runtime/io_deadline.hpp"

namespace spmd::data {

namespace fs = std::filesystem;

namespace {

std::string lock_path_for(const std::string& output) {
  const fs::path target(output);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  return (dir / ("." + target.filename().string() + ".lock")).string();
}

std::string holder_text() {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  const std::time_t now = std::time(nullptr);
  char when[64] = {0};
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", std::localtime(&now));
  return "host " + std::string(host) + ", pid " + std::to_string(::getpid()) + ", since " + when;
}

// The holder text in the file, without its trailing newline.
std::string read_holder(int fd) {
  std::string text;
  char buffer[256];
  ::lseek(fd, 0, SEEK_SET);
  for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<std::size_t>(n));
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

// The dead holder's temporary of the output (`.NAME.tmp.PID`, output_path.hpp), which a kill
// -9 in the middle of a write leaves: removed now that its writer is known to be gone (the
// lock is free, and only the lock's holder writes the output). Returns what the take-over line
// adds ("" when there was none).
std::string remove_unfinished_output(const std::string& output, const std::string& holder) {
  const auto at = holder.find(", pid ");
  if (at == std::string::npos) return "";
  char* end = nullptr;
  const long pid = std::strtol(holder.c_str() + at + 6, &end, 10);
  if (pid <= 0 || end == holder.c_str() + at + 6) return "";
  const std::string temp = output_path::temp_path_for(output, pid);
  struct stat st {};
  if (::lstat(temp.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return "";
  if (::unlink(temp.c_str()) != 0) return "; its unfinished '" + temp + "' could not be removed: " + std::strerror(errno);
  return "; removed its unfinished '" + temp + "'";
}

}  // namespace

OutputLock::OutputLock(const runtime::Context& ctx, const std::string& output, const std::string& option) {
  runtime::agree_on(ctx.comm(), [&] {
    if (!ctx.is_root()) return;
    const std::string path = lock_path_for(output);
    // The holder removes the file when it lets go. A process that opened the old file just
    // before that would lock a name nobody sees any more, so after locking, the locked file
    // must still be the one under the name; if not, try again.
    const runtime::IoDeadline deadline("open", path);
    for (int attempt = 0;; ++attempt) {
      const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
      if (fd < 0)
        throw Error("--" + option + " '" + output + "': cannot create the lock file '" + path + "' (" +
                    std::strerror(errno) + ")");
      if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
        const int error = errno;
        const std::string holder = read_holder(fd);
        ::close(fd);
        if (error == EWOULDBLOCK) {
          throw Error("--" + option + " '" + output + "' is in use by another job (" +
                      (holder.empty() ? std::string("holder unknown") : holder) + "): two jobs writing one " + option +
                      " would overwrite each other's. Give this job another --" + option +
                      ", or wait for that one to end.");
        }
        throw Error("--" + option + " '" + output + "': cannot lock '" + path + "' (" + std::strerror(error) + ")");
      }
      struct stat locked {}, named {};
      if (::fstat(fd, &locked) == 0 && ::stat(path.c_str(), &named) == 0 && locked.st_ino == named.st_ino &&
          locked.st_dev == named.st_dev) {
        const std::string stale = read_holder(fd);
        if (!stale.empty())
          takeover_line_ = "# --" + option + " '" + output + "': taking over a stale lock left by " + stale +
                           " (no process holds it: that one ended without removing it" +
                           remove_unfinished_output(output, stale) + ")\n";
        const std::string text = holder_text() + "\n";  // for the next job's message
        if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
          // The claim holds without the text; only another job's message would be poorer.
        }
        fd_ = fd;
        path_ = path;
        live_ = runtime::LiveFile(path);
        return;
      }
      ::close(fd);
      if (attempt == 100) throw Error("--" + option + " '" + output + "': cannot settle the lock file '" + path + "'");
    }
  });
}

OutputLock::~OutputLock() {
  if (fd_ < 0) return;
  live_.release();
  ::unlink(path_.c_str());  // while still locked: nobody can take it between the two
  ::close(fd_);             // releases the flock
}

}  // namespace spmd::data
