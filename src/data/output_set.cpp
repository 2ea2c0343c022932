#include "spmd/data/output_set.hpp"

#include <fcntl.h>
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

namespace spmd::data {

namespace fs = std::filesystem;

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

OutputSet::OutputSet(const runtime::Context& ctx) : ctx_(ctx) {}

OutputSet::~OutputSet() {
  for (const auto& [temp, final_path] : staged_) {
    std::error_code ec;
    if (!published_) fs::remove(temp, ec);
  }
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
