#include "spmd/runtime/stop_request.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <span>
#include <utility>

#include "spmd/runtime/check.hpp"
#include "spmd/runtime/collectives.hpp"
#include "spmd/runtime/context.hpp"

namespace spmd::runtime {

namespace {

constexpr int kStopSignals[] = {SIGTERM, SIGINT, SIGUSR1};
// Signals of a lost terminal or launcher (the stdout pipe of an mpirun that exited): the
// same treatment, where nobody chose to ignore them before us.
constexpr int kLostSignals[] = {SIGHUP, SIGPIPE};

// Plain atomics of static storage: lock-free, so the handler may read and write them.
std::atomic<int> polling_depth{0};
std::atomic<int> requested{0};
std::atomic<bool> installed{false};
int handler_rank = -1;  // set before the handlers are installed, read only by them

// A LiveFile slot: free (0), being filled (1), live (2). The handler unlinks live ones.
struct Slot {
  std::atomic<int> state{0};
  char path[4096] = {};
};
Slot slots[32];

void say(const char* text) {
  const std::size_t n = std::strlen(text);
  if (::write(STDERR_FILENO, text, n) < 0) {
    // Nothing to do: stderr is gone.
  }
}

// Decimal text of a small non-negative value into buf (async-signal-safe).
const char* decimal(long value, char (&buf)[24]) {
  char* p = buf + sizeof buf - 1;
  *p = '\0';
  if (value < 0) return "?";
  do {
    *--p = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value > 0 && p > buf);
  return p;
}

const char* name_of(int signal) {
  switch (signal) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
    case SIGHUP: return "SIGHUP";
    case SIGPIPE: return "SIGPIPE";
  }
  return "a signal";
}

// Removes what must not outlive the process, says so, and ends it by `signal` itself.
// why: " outside a step boundary" or " again before the stop".
[[noreturn]] void end_by(int signal, const char* why) {
  char rank_text[24];
  const char* rank = decimal(handler_rank, rank_text);
  bool removed_any = false;
  for (auto& slot : slots) {
    if (slot.state.load() != 2) continue;
    if (::unlink(slot.path) != 0) continue;  // gone already (renamed onto its final name)
    removed_any = true;
    say("spmd: rank ");
    say(rank);
    say(": ");
    say(name_of(signal));
    say(" ended the run");
    say(why);
    say("; removed '");
    say(slot.path);
    say("'\n");
  }
  if (!removed_any && handler_rank <= 0) {
    say("spmd: ");
    say(name_of(signal));
    say(" ended the run");
    say(why);
    say("; no file left behind\n");
  }
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(signal, &dfl, nullptr);
  sigset_t unblock;
  sigemptyset(&unblock);
  sigaddset(&unblock, signal);
  ::pthread_sigmask(SIG_UNBLOCK, &unblock, nullptr);
  ::raise(signal);
  ::_exit(128 + signal);  // not reached for a signal whose default action ends the process
}

extern "C" void on_signal(int signal) {
  const int saved_errno = errno;
  if (polling_depth.load() > 0) {
    int none = 0;
    if (requested.compare_exchange_strong(none, signal) || signal != SIGINT) {
      errno = saved_errno;
      return;
    }
    end_by(signal, " again before the stop");
  }
  end_by(signal, " outside a step boundary");
}

// Whether this process was started directly by Open MPI's launcher (mpirun on this host,
// orted on others). Such a parent exiting (two quick Ctrl-C on mpirun) tells its ranks
// nothing; Open MPI ends them with _exit about a second later, which no handler sees.
bool started_by_open_mpi() {
  std::ifstream comm("/proc/" + std::to_string(::getppid()) + "/comm");
  std::string name;
  std::getline(comm, name);
  return name == "mpirun" || name == "mpiexec" || name == "orterun" || name == "orted";
}

void install_once() {
  bool expected = false;
  if (!installed.compare_exchange_strong(expected, true)) return;
  handler_rank = world_rank_or_unknown();
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  // SA_RESTART: a read interrupted by a stop request carries on (HDF5 and MPI do not
  // expect EINTR); the stop takes effect at the next step boundary anyway.
  sa.sa_flags = SA_RESTART;
  for (int s : kStopSignals) ::sigaction(s, &sa, nullptr);
  for (int s : kLostSignals) {
    struct sigaction before {};
    if (::sigaction(s, nullptr, &before) == 0 && before.sa_handler == SIG_DFL) ::sigaction(s, &sa, nullptr);
  }
  // So the kernel sends SIGHUP the moment the launcher goes: a stop at the next step
  // boundary, or the removal of the live files, within that second.
  const pid_t parent = ::getppid();
  if (started_by_open_mpi() && ::prctl(PR_SET_PDEATHSIG, SIGHUP) == 0 && ::getppid() != parent) ::raise(SIGHUP);
}

}  // namespace

StopPolling::StopPolling() {
  install_once();
  polling_depth.fetch_add(1);
}

StopPolling::~StopPolling() { polling_depth.fetch_sub(1); }

int local_stop_signal() { return requested.load(); }

int agreed_stop_signal(const Context& ctx) {
  std::int64_t signal = requested.load();
  allreduce_max(ctx, std::span<std::int64_t>(&signal, 1));
  return static_cast<int>(signal);
}

std::string signal_name(int signal) {
  const char* name = name_of(signal);
  return std::strcmp(name, "a signal") == 0 ? "signal " + std::to_string(signal) : std::string(name);
}

LiveFile::LiveFile(const std::string& path) {
  // Without handlers nothing would unlink it; installing them here makes a signal during
  // the write remove the file even outside any workload loop.
  install_once();
  if (path.size() >= sizeof(Slot::path)) return;
  for (int k = 0; k < static_cast<int>(std::size(slots)); ++k) {
    int free_state = 0;
    if (!slots[k].state.compare_exchange_strong(free_state, 1)) continue;
    std::memcpy(slots[k].path, path.c_str(), path.size() + 1);
    slots[k].state.store(2);
    slot_ = k;
    return;
  }
}

LiveFile::LiveFile(LiveFile&& other) noexcept : slot_(std::exchange(other.slot_, -1)) {}

LiveFile& LiveFile::operator=(LiveFile&& other) noexcept {
  if (this != &other) {
    release();
    slot_ = std::exchange(other.slot_, -1);
  }
  return *this;
}

void LiveFile::release() noexcept {
  if (slot_ < 0) return;
  slots[slot_].state.store(0);
  slot_ = -1;
}

void reset_stop_request_for_tests() { requested.store(0); }

}  // namespace spmd::runtime
