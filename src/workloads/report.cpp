#include "spmd/workloads/report.hpp"

#include <fcntl.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "spmd/runtime/error.hpp"
#include "spmd/runtime/io_deadline.hpp"
#include "spmd/runtime/stop_request.hpp"

namespace spmd::workloads {

std::string format(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char buf[512];
  const int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n < static_cast<int>(sizeof buf)) return std::string(buf, static_cast<size_t>(std::max(n, 0)));
  std::string out(static_cast<size_t>(n) + 1, '\0');
  va_start(ap, fmt);
  std::vsnprintf(out.data(), out.size(), fmt, ap);
  va_end(ap);
  out.resize(static_cast<size_t>(n));
  return out;
}

std::string startup_table(const runtime::Context& ctx, const std::string& command) {
  const auto rows = ctx.gather_rank_table();
  if (!ctx.is_root()) return {};
  std::string out = format("# spmd %s  version %s\n# ranks %d  devices/rank %d  total devices %d  backend %s (%s)\n",
                           command.c_str(), SPMD_VERSION, ctx.size(), ctx.devices_per_rank(), ctx.total_devices(),
                           std::string(ctx.backend()).c_str(), ctx.backend_note().c_str());
  out += format("# %5s  %-20s  %5s  %s\n", "rank", "host", "local", "devices");
  for (const auto& r : rows)
    out += format("# %5d  %-20s  %5d  %s\n", r.rank, r.host.c_str(), r.local_rank, r.devices.c_str());
  return out;
}

nlohmann::json startup_json(const runtime::Context& ctx) {
  const auto rows = ctx.gather_rank_table();
  nlohmann::json j;
  j["ranks"] = ctx.size();
  j["devices_per_rank"] = ctx.devices_per_rank();
  j["total_devices"] = ctx.total_devices();
  j["backend"] = std::string(ctx.backend());
  j["backend_note"] = ctx.backend_note();
  nlohmann::json table = nlohmann::json::array();
  for (const auto& r : rows)
    table.push_back({{"rank", r.rank}, {"host", r.host}, {"local_rank", r.local_rank}, {"devices", r.devices}});
  j["rank_table"] = table;
  return j;
}

std::string Table::header() const {
  std::string names = "#", units = "#";
  for (const auto& c : columns_) {
    names += format(" %*s", c.width, c.name.c_str());
    units += format(" %*s", c.width, c.unit.empty() ? "" : ("(" + c.unit + ")").c_str());
  }
  return names + "\n" + units + "\n";
}

std::string Table::row(const std::vector<std::string>& cells) const {
  std::string out = " ";
  for (size_t i = 0; i < columns_.size(); ++i)
    out += format(" %*s", columns_[i].width, i < cells.size() ? cells[i].c_str() : "");
  return out + "\n";
}

void write_text_atomic(const std::string& path, const std::string& text) {
  namespace fs = std::filesystem;
  const fs::path final_path(path);
  const fs::path dir = final_path.has_parent_path() ? final_path.parent_path() : fs::path(".");
  const fs::path tmp = dir / ("." + final_path.filename().string() + ".tmp." + std::to_string(::getpid()));
  // POSIX calls, so that a failure says why (errno: "No space left on device"), and the
  // temporary file goes whatever fails.
  const auto fail = [&](const std::string& what, int error) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw Error("cannot write '" + path + "': " + what + " (" + std::strerror(error) + "; " +
                std::to_string(text.size()) + " bytes to write)");
  };
  const runtime::IoDeadline deadline("open", tmp.string());
  const runtime::LiveFile live(tmp.string());  // a signal that ends the process removes it
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("cannot create " + tmp.string(), errno);
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
  std::error_code ec;
  fs::rename(tmp, final_path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw Error("cannot write '" + path + "': rename failed (" + ec.message() + ")");
  }
}

void write_json(const std::string& path, const nlohmann::json& j) { write_text_atomic(path, j.dump(2) + "\n"); }

bool stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

namespace {
double monotonic_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

ProgressLine::ProgressLine(bool enabled) : ProgressLine(enabled, enabled && stderr_is_terminal()) {}
ProgressLine::ProgressLine(bool enabled, bool live) : enabled_(enabled), live_(live) {}

void ProgressLine::update(const std::string& label, std::int64_t done, std::int64_t total, const std::string& detail,
                          std::int64_t every) {
  if (!enabled_) return;
  const double now = monotonic_seconds();
  if (done <= last_done_ || last_done_ < 0) {
    first_done_ = done;
    first_seconds_ = now;
  }
  last_done_ = done;
  if (!live_) {
    if (every > 0 && (done % every == 0 || done == total)) {
      std::fputs(format("# %s %lld/%lld  %s\n", label.c_str(), static_cast<long long>(done), static_cast<long long>(total),
                        detail.c_str()).c_str(), stdout);
      std::fflush(stdout);
    }
    return;
  }
  constexpr int kWidth = 30;
  const int filled = total > 0 ? static_cast<int>(kWidth * std::clamp<std::int64_t>(done, 0, total) / total) : kWidth;
  std::string eta;
  if (done > first_done_ && done < total)
    eta = format("  ETA %.0f s", (now - first_seconds_) / static_cast<double>(done - first_done_) *
                                      static_cast<double>(total - done));
  std::fprintf(stderr, "\r%s [%-*s] %lld/%lld  %s%s ", label.c_str(), kWidth, std::string(static_cast<size_t>(filled), '#').c_str(),
               static_cast<long long>(done), static_cast<long long>(total), detail.c_str(), eta.c_str());
  open_ = done < total;
  if (!open_) std::fputs("\n", stderr);
  std::fflush(stderr);
}

bool ProgressLine::due(double period) {
  if (!enabled_) return false;
  const double now = monotonic_seconds();
  if (last_due_ < 0) last_due_ = now;
  if (now - last_due_ < (live_ ? kLiveRedrawSeconds : period)) return false;
  last_due_ = now;
  return true;
}

void ProgressLine::close() {
  if (!open_) return;
  std::fputs("\n", stderr);
  std::fflush(stderr);
  open_ = false;
}

}  // namespace spmd::workloads
