// IoDeadline: see the header. One monitor per process, created on first use and never
// destroyed (a scope may still be open in a thread when the process exits).
#include "spmd/runtime/io_deadline.hpp"

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <thread>

#include "spmd/runtime/check.hpp"
#include "spmd/runtime/mpi.hpp"
#include "spmd/runtime/watchdog.hpp"

namespace spmd::runtime {
namespace {

using Clock = std::chrono::steady_clock;

// A tick later than kSuspendedGap means the process did not run: not counted.
constexpr auto kTick = std::chrono::milliseconds(200);

struct Open {
  std::string call, path, phase;
  double waited_s = 0;  // time the process ran while the call was open
};

class Monitor {
 public:
  static Monitor& get() {
    static Monitor* m = new Monitor();  // never destroyed: see above
    return *m;
  }

  void set_deadline(double s) {
    std::lock_guard<std::mutex> lock(mutex_);
    deadline_s_ = s;
  }
  void set_phase(const std::string& p) {
    std::lock_guard<std::mutex> lock(mutex_);
    phase_ = p;
  }
  std::string phase() {
    std::lock_guard<std::mutex> lock(mutex_);
    return phase_;
  }
  void set_stall(int rank, const std::string& call, const std::string& path_part) {
    std::lock_guard<std::mutex> lock(mutex_);
    stall_rank_ = rank;
    stall_call_ = call;
    stall_path_part_ = path_part;
  }

  unsigned long long open(const char* call, const std::string& path, bool* stall) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!thread_started_) {
      std::thread([this] { loop(); }).detach();
      thread_started_ = true;
    }
    const auto id = ++next_id_;
    open_[id] = Open{call, path, phase_, 0};
    *stall = !stall_call_.empty() && stall_call_ == call && path.find(stall_path_part_) != std::string::npos &&
             stall_rank_ == world_rank_or_unknown();
    if (*stall) stall_call_.clear();  // the first such call only
    cv_.notify_one();
    return id;
  }

  void close(unsigned long long id) {
    std::lock_guard<std::mutex> lock(mutex_);
    open_.erase(id);
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    auto last = Clock::now();
    for (;;) {
      if (open_.empty()) {
        cv_.wait(lock, [this] { return !open_.empty(); });
        last = Clock::now();
      }
      cv_.wait_for(lock, kTick);
      const auto now = Clock::now();
      const auto gap = now - last;
      last = now;
      if (gap > kSuspendedGap) continue;
      const double dt = std::chrono::duration<double>(gap).count();
      for (auto& [id, o] : open_) {
        o.waited_s += dt;
        if (deadline_s_ > 0 && o.waited_s > deadline_s_) report_and_abort(o);
      }
    }
  }

  [[noreturn]] void report_and_abort(const Open& o) {
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    std::fprintf(stderr,
                 "spmd: rank %d on %s: error: hang detected: '%s' of '%s' has not returned after %.0f s during '%s' "
                 "(--hang-timeout %g): the file system holding it does not answer (a hung or unreachable mount?); "
                 "ending the job\n",
                 world_rank_or_unknown(), host, o.call.c_str(), o.path.c_str(), o.waited_s, o.phase.c_str(),
                 deadline_s_);
    std::fflush(stderr);
    abort_job(3);
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<unsigned long long, Open> open_;
  unsigned long long next_id_ = 0;
  double deadline_s_ = 300;
  std::string phase_ = "start-up";
  int stall_rank_ = -1;
  std::string stall_call_, stall_path_part_;
  bool thread_started_ = false;
};

}  // namespace

void set_io_deadline(double seconds) { Monitor::get().set_deadline(seconds); }
void set_io_phase(const std::string& phase) { Monitor::get().set_phase(phase); }
std::string io_phase() { return Monitor::get().phase(); }
void simulate_io_stall(int rank, const std::string& what) {
  const auto colon = what.find(':');
  Monitor::get().set_stall(rank, what.substr(0, colon), colon == std::string::npos ? "" : what.substr(colon + 1));
}

IoDeadline::IoDeadline(const char* call, const std::string& path) {
  bool stall = false;
  id_ = Monitor::get().open(call, path, &stall);
  // As a call into a hung mount: it never returns; the monitor ends the job.
  while (stall) std::this_thread::sleep_for(std::chrono::hours(1));
}

IoDeadline::~IoDeadline() { Monitor::get().close(id_); }

}  // namespace spmd::runtime
