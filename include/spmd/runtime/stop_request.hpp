#pragma once
// What SIGTERM, SIGINT and SIGUSR1 do (what Slurm, scancel, mpirun and a terminal send),
// for every workload, and the files a signal must not leave behind.
//
// Two regimes:
//  - Inside a StopPolling scope (a workload's loop) such a signal only sets a flag. The
//    loop calls agreed_stop_signal() at step boundaries every rank reaches (a collective:
//    the largest signal number any rank holds), so every rank stops after the same step and
//    the workload ends with its own report. A second SIGINT while a stop is pending ends
//    the process as below (an impatient Ctrl-C).
//    SIGHUP and SIGPIPE (a closed terminal; the stdout of an mpirun that exited) count as
//    stop signals too, unless they were ignored when the handlers were installed.
//  - Anywhere else (start-up, writing results) the signal ends the process: the handler unlinks every
//    registered LiveFile (temporary outputs, the output lock), says so on stderr, and
//    re-raises the signal with its default action, so the exit status stays 128 + signal.
// The handler uses only async-signal-safe calls (unlink, write, sigaction, raise).
#include <string>

namespace spmd::runtime {

class Context;

// While alive (nestable), stop signals are requests polled by the loop (see above). The
// first scope installs the handlers.
class StopPolling {
 public:
  StopPolling();
  ~StopPolling();
  StopPolling(const StopPolling&) = delete;
  StopPolling& operator=(const StopPolling&) = delete;
};

// The first stop signal this process received inside a StopPolling scope, 0 if none.
// Local: no communication.
int local_stop_signal();

// Collective over ctx.comm(): the largest local_stop_signal() of any rank, 0 if none.
int agreed_stop_signal(const Context& ctx);

// "SIGTERM", "SIGINT", "SIGUSR1", ... ("signal N" for others).
std::string signal_name(int signal);

// A file that must not outlive the process when a signal ends it: registered while alive
// (a temporary output until it is renamed, a lock file while held). Up to 32 at once;
// beyond that a file is not registered (the normal paths still remove it). path is copied.
class LiveFile {
 public:
  LiveFile() = default;
  explicit LiveFile(const std::string& path);
  ~LiveFile() { release(); }
  LiveFile(LiveFile&& other) noexcept;
  LiveFile& operator=(LiveFile&& other) noexcept;
  LiveFile(const LiveFile&) = delete;
  LiveFile& operator=(const LiveFile&) = delete;
  // Unregisters the file (it was renamed, or removed by its owner). Does not unlink it.
  void release() noexcept;

 private:
  int slot_ = -1;
};

// For tests: forgets the stop request (the handlers stay).
void reset_stop_request_for_tests();

}  // namespace spmd::runtime
