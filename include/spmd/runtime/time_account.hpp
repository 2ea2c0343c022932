#pragma once
// Where a rank's time goes. Between TimeAccount's start and stop, every nanosecond of the
// thread that made it (the rank's main thread) is charged to exactly one category: the one
// current at that moment. Scopes switch the current category where the program funnels an
// operation (collectives.cpp and point_to_point.cpp: communication; the HDF5 classes of
// data/: io; DevicePool::run: compute; the CUDA module's copies: host_device); leaving a
// scope switches back. Entering charges the time since the last switch to the category
// that was current, so a scope inside another never counts twice, and the categories add
// up to the total exactly (integer ticks of one clock, telescoping sums; converted to
// nanoseconds by rounding their running sums).
//
// Only the accounting thread accounts. A scope on any other thread (a device worker, the
// prefetch thread, the hang watchdog) does nothing; device workers measure their copies with
// DeviceTransferTimer, which DevicePool::run collects and charges on the main thread.
//
// Clock: the time-stamp counter where the kernel keeps time with it (x86-64, clocksource
// "tsc"; ~11 ns a read), converted to nanoseconds at stop; steady_clock elsewhere (~30 ns).
// One read per switch, two per scope (tools/bench/bench_time_account.cpp).
#include <array>
#include <cstdint>

namespace spmd::runtime {

enum class TimeCategory : int {
  Compute = 0,    // the main thread dispatching to and waiting for the devices (DevicePool::run)
  Communication,  // inside the program's MPI collectives and point-to-point calls, waiting for other ranks included
  Io,             // HDF5 reads and writes (parallel ones included), and waiting for the prefetch thread's reads
  HostDevice,     // host<->device copies (CUDA module); 0 on the CPU backend
  Other,          // everything else: host-side work between those (the solver's vector algebra, tallies, ...)
};
inline constexpr int kTimeCategories = 5;
// "compute", "communication", "io", "host_device", "other": the JSON keys.
const char* to_string(TimeCategory c);

// One rank's account: nanoseconds per category (indexed by TimeCategory) and the window's
// length (steady_clock); sum(ns) == total_ns.
struct TimeSpent {
  std::array<std::int64_t, kTimeCategories> ns{};
  std::int64_t total_ns = 0;
  std::int64_t at(TimeCategory c) const { return ns[static_cast<int>(c)]; }
  std::int64_t sum_ns() const;
};

// RAII: starts accounting on the calling thread, everything charged to Other until a scope
// says otherwise. One at a time per process (throws spmd::Error for a second one).
class TimeAccount {
 public:
  TimeAccount();
  ~TimeAccount();  // stops accounting if stop() was not called (an exception unwinding)
  TimeAccount(const TimeAccount&) = delete;
  TimeAccount& operator=(const TimeAccount&) = delete;

  // Ends the window and returns it. Scopes entered afterwards do nothing. Call once.
  TimeSpent stop();
};

// RAII: charges the calling thread's time to `category` while alive, if it is the
// accounting thread; elsewhere (or with no TimeAccount running) it does nothing.
class TimeScope {
 public:
  explicit TimeScope(TimeCategory category) noexcept;
  ~TimeScope();
  TimeScope(const TimeScope&) = delete;
  TimeScope& operator=(const TimeScope&) = delete;

  // Moves up to `ticks` (the account's clock units, as take_thread_transfer_ticks gives
  // them) of the time this scope has charged to its own category (up to now, scopes nested
  // in it excluded) to `to`: the part of a device dispatch that the devices spent copying.
  // Never more than the scope charged, so the sum stays exact.
  void reclassify(TimeCategory to, std::int64_t ticks) noexcept;

 private:
  bool active_ = false;
  TimeCategory category_;
  TimeCategory previous_ = TimeCategory::Other;
  std::int64_t charged_at_entry_ = 0;  // the category's nanoseconds when the scope began
};

// RAII for host<->device copies. On the accounting thread: a TimeScope(HostDevice). On any
// other thread (a device's worker): adds the time to that thread's transfer counter, which
// DevicePool's worker hands to DevicePool::run after each job (take_thread_transfer_ticks);
// timers nested on such a thread count once, as the outermost.
class DeviceTransferTimer {
 public:
  DeviceTransferTimer() noexcept;
  ~DeviceTransferTimer();
  DeviceTransferTimer(const DeviceTransferTimer&) = delete;
  DeviceTransferTimer& operator=(const DeviceTransferTimer&) = delete;

 private:
  TimeScope scope_;             // accounts on the accounting thread
  bool off_thread_ = false;     // any other thread: counted here instead
  std::int64_t start_ticks_ = -1;  // -1: not the outermost timer on its thread (nested ones count nothing)
};

// This thread's transfer time since the last call (DeviceTransferTimer on a thread that
// does not account), in the account's clock units (for TimeScope::reclassify), reset to 0.
std::int64_t take_thread_transfer_ticks() noexcept;

}  // namespace spmd::runtime
