#include "spmd/runtime/time_account.hpp"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <string>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "spmd/runtime/error.hpp"

namespace spmd::runtime {

namespace {

std::int64_t steady_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The account's clock. steady_clock's fenced read of the time-stamp counter costs several
// times a plain read and stalls the pipeline of the step around it, which matters in short
// eval steps. Where the kernel itself keeps time with the TSC (its clocksource is "tsc":
// invariant and synchronised across cores), the counter is read directly and converted to
// nanoseconds once, at stop, against steady_clock.
// Elsewhere ticks are steady_clock's nanoseconds.
bool kernel_uses_tsc() {
#if defined(__x86_64__)
  std::ifstream in("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  std::string name;
  return static_cast<bool>(in >> name) && name == "tsc";
#else
  return false;
#endif
}
const bool g_tsc = kernel_uses_tsc();

inline std::int64_t now_ticks() noexcept {
#if defined(__x86_64__)
  if (g_tsc) return static_cast<std::int64_t>(__rdtsc());
#endif
  return steady_ns();
}

// The running account, in ticks. Only the accounting thread reads or writes it
// (t_accounting is true there alone), so it needs no lock: a scope on another thread never
// gets past its flag. libspmd is loaded with the program, so its thread-locals can be
// initial-exec (one load, no __tls_get_addr call).
struct Account {
  std::array<std::int64_t, kTimeCategories> ticks{};
  TimeCategory current = TimeCategory::Other;
  std::int64_t start = 0, last = 0;  // the window's start, the last switch
  std::int64_t start_ns = 0;         // steady_clock at the start, for the conversion
  bool running = false;
};
Account g_account;
__attribute__((tls_model("initial-exec"))) thread_local bool t_accounting = false;
__attribute__((tls_model("initial-exec"))) thread_local std::int64_t t_transfer_ticks = 0;
__attribute__((tls_model("initial-exec"))) thread_local int t_transfer_depth = 0;  // DeviceTransferTimers alive here

std::int64_t& slot(TimeCategory c) { return g_account.ticks[static_cast<int>(c)]; }

// Charges the time since the last switch to the current category.
void charge() noexcept {
  const std::int64_t now = now_ticks();
  slot(g_account.current) += now - g_account.last;
  g_account.last = now;
}

bool accounting_here() noexcept { return t_accounting && g_account.running; }

}  // namespace

const char* to_string(TimeCategory c) {
  switch (c) {
    case TimeCategory::Compute: return "compute";
    case TimeCategory::Communication: return "communication";
    case TimeCategory::Io: return "io";
    case TimeCategory::HostDevice: return "host_device";
    case TimeCategory::Other: return "other";
  }
  return "?";
}

std::int64_t TimeSpent::sum_ns() const {
  std::int64_t sum = 0;
  for (auto v : ns) sum += v;
  return sum;
}

TimeAccount::TimeAccount() {
  if (g_account.running) throw Error("internal: a time account is already running in this process");
  g_account = Account{};
  g_account.start_ns = steady_ns();
  g_account.start = g_account.last = now_ticks();
  g_account.running = true;
  t_accounting = true;
}

TimeAccount::~TimeAccount() {
  if (accounting_here()) {
    g_account.running = false;
    t_accounting = false;
  }
}

TimeSpent TimeAccount::stop() {
  if (!accounting_here()) throw Error("internal: TimeAccount::stop on a thread that does not account, or twice");
  charge();
  const std::int64_t stop_ns = steady_ns();
  g_account.running = false;
  t_accounting = false;
  TimeSpent spent;
  const std::int64_t total_ticks = g_account.last - g_account.start;
  if (!g_tsc) {
    spent.ns = g_account.ticks;
    spent.total_ns = total_ticks;
    return spent;
  }
  // Ticks to nanoseconds at the rate the window itself shows, rounding the running sums so
  // that the categories still add up to the total exactly.
  spent.total_ns = stop_ns - g_account.start_ns;
  if (total_ticks <= 0) {
    spent.ns[static_cast<int>(TimeCategory::Other)] = spent.total_ns;
    return spent;
  }
  __int128 ticks_so_far = 0;
  std::int64_t ns_so_far = 0;
  for (int c = 0; c < kTimeCategories; ++c) {
    ticks_so_far += g_account.ticks[static_cast<std::size_t>(c)];
    const auto ns = static_cast<std::int64_t>(ticks_so_far * spent.total_ns / total_ticks);
    spent.ns[static_cast<std::size_t>(c)] = ns - ns_so_far;
    ns_so_far = ns;
  }
  return spent;
}

TimeScope::TimeScope(TimeCategory category) noexcept : category_(category) {
  if (!accounting_here()) return;
  active_ = true;
  charge();
  previous_ = g_account.current;
  g_account.current = category;
  charged_at_entry_ = slot(category);
}

TimeScope::~TimeScope() {
  if (!active_ || !accounting_here()) return;
  charge();
  g_account.current = previous_;
}

void TimeScope::reclassify(TimeCategory to, std::int64_t ticks) noexcept {
  if (!active_ || !accounting_here() || ticks <= 0 || to == category_) return;
  charge();
  const std::int64_t moved = std::min(ticks, slot(category_) - charged_at_entry_);
  if (moved <= 0) return;
  slot(category_) -= moved;
  slot(to) += moved;
}

DeviceTransferTimer::DeviceTransferTimer() noexcept : scope_(TimeCategory::HostDevice) {
  if (accounting_here()) return;
  off_thread_ = true;
  if (t_transfer_depth++ == 0) start_ticks_ = now_ticks();  // the outermost timer counts, once
}

DeviceTransferTimer::~DeviceTransferTimer() {
  if (!off_thread_) return;
  --t_transfer_depth;
  if (start_ticks_ >= 0) t_transfer_ticks += now_ticks() - start_ticks_;
}

std::int64_t take_thread_transfer_ticks() noexcept {
  const std::int64_t ticks = t_transfer_ticks;
  t_transfer_ticks = 0;
  return ticks;
}

}  // namespace spmd::runtime
