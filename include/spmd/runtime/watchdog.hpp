#pragma once
// Hang watchdog. Collectives arm it for the duration of the MPI call; a thread checks every
// 100 ms. When one rank has been inside the same collective for longer than the timeout, it
// asks every other rank (on a private communicator, answered by their watchdog threads)
// where it is, prints a report naming the step and the ranks that did not arrive, and
// aborts the job (abort_job) so that no rank is left waiting.
//
// Ranks that do not answer at all are dead, hung outside MPI, or unreachable. Such silence
// is looked for early (after min(5 s, timeout / 2) in one collective) and reported at once
// as a warning naming the ranks and their hosts; a host none of whose ranks answers is
// named as lost. Under mpirun the abort then waits 30 s for the launcher, which notices a
// lost node by itself (TCP keepalive on its daemons' connections): mpirun's own teardown,
// once an abort is under way, waits forever on an unreachable daemon. srun's does not.
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace spmd::runtime {

// A gap between a watcher's ticks longer than this is a suspension of the process (SIGSTOP,
// as `scontrol suspend` does), not a wait: the watchdog and the I/O deadline leave it out.
inline constexpr auto kSuspendedGap = std::chrono::seconds(2);

class Watchdog {
 public:
  // Collective over comm (it duplicates it). timeout_s <= 0 builds a disabled watchdog.
  Watchdog(MPI_Comm comm, double timeout_s);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  double timeout_s() const { return timeout_s_; }
  void set_phase(const std::string& phase);
  // The phase "name step" (e.g. "eval step" 12), set without building a string: this runs
  // on every step of a loop whose steps take microseconds. name must outlive the watchdog
  // (a string literal).
  void set_step_phase(const char* name, std::int64_t step);

  // RAII: marks this rank as waiting in `call` (e.g. "MPI_Allreduce") during the current phase.
  class Armed {
   public:
    Armed(Watchdog* w, const char* call);
    ~Armed();
    Armed(const Armed&) = delete;
    Armed& operator=(const Armed&) = delete;

   private:
    Watchdog* w_;
  };

 private:
  // What the other ranks said when asked where they are: one entry per rank, the asking
  // rank's own included; empty where no answer came within the deadline.
  using PeerStates = std::vector<std::string>;
  struct Diagnosis;

  void loop();
  void answer_queries();
  PeerStates query_peers(std::chrono::milliseconds deadline);
  Diagnosis diagnose(const PeerStates& states, const std::string& call, const std::string& phase) const;
  void warn_if_silent(double waited_s);
  [[noreturn]] void report_and_abort(double waited_s);
  std::string describe_self();
  std::string current_phase_locked() const;  // the phase text; mutex_ held by the caller

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  double timeout_s_ = 0;
  double probe_after_s_ = 0;        // when silence is first looked for in one collective
  std::vector<std::string> hosts_;  // host of every rank, for the reports
  std::mutex mutex_;
  std::condition_variable cv_;
  std::string phase_ = "start-up";
  const char* step_name_ = nullptr;  // when set, the phase is "step_name_ step_"
  std::int64_t step_ = 0;
  const char* call_ = nullptr;
  std::uint64_t arm_count_ = 0;
  std::uint64_t probed_arm_ = 0;  // the arm whose silence was last looked for
  std::chrono::steady_clock::time_point armed_at_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace spmd::runtime
