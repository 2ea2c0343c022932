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

#include "spmd/data/output_set.hpp"
#include "spmd/runtime/error.hpp"
#include "spmd/runtime/io_deadline.hpp"

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

// A path or dataset name may hold bytes that are not UTF-8 (Linux names are bytes): JSON cannot
// hold them, so each is written as U+FFFD rather than failing the run after its work is done.
std::string json_text(const nlohmann::json& j) {
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

void write_json(const std::string& path, const nlohmann::json& j) { data::write_text_atomic(path, json_text(j)); }

namespace {
// stderr is a terminal (live progress bars) or not (periodic lines).
bool stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

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
