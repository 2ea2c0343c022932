#include "spmd/runtime/watchdog.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <vector>

#include "spmd/runtime/mpi.hpp"

namespace spmd::runtime {

namespace {
constexpr int kQueryTag = 7101;
constexpr int kReplyTag = 7102;
constexpr auto kPoll = std::chrono::milliseconds(100);
// How long a report waits for the other ranks' answers.
constexpr auto kQueryDeadline = std::chrono::seconds(3);
// Silence is looked for this long into one collective at the latest: early enough to be
// printed before mpirun's keepalive (15 s with the jobs/ scripts' options) ends the job.
constexpr double kProbeAfterMax_s = 5;
// With a host silent, mpirun gets this long to end the job before the abort.
constexpr int kLauncherGrace_s = 30;

// Open MPI's mpirun sets OMPI_COMM_WORLD_RANK in the ranks it starts; srun does not. Only
// mpirun's teardown hangs on a lost node once an abort is under way (srun's gives up on the
// node's slurmstepd after KillWait), so only mpirun gets the grace.
bool launched_by_mpirun() { return std::getenv("OMPI_COMM_WORLD_RANK") != nullptr; }

std::string join_ranks(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : " ") + std::to_string(r);
  return out;
}
}  // namespace

struct Watchdog::Diagnosis {
  std::vector<int> arrived;      // waiting in the same call and phase as this rank
  std::vector<int> silent;       // no answer
  std::string absent;            // "rank 2 on node2 (no answer ...); rank 5 on node1 (at ...)"
  std::string lost_hosts;        // "node2 (ranks 2 3)": other hosts none of whose ranks answered
};

Watchdog::Watchdog(MPI_Comm comm, double timeout_s) : timeout_s_(timeout_s) {
  MPI_Comm_rank(comm, &rank_);
  MPI_Comm_size(comm, &size_);
  if (timeout_s_ <= 0) return;
  probe_after_s_ = std::min(kProbeAfterMax_s, timeout_s_ / 2);
  // Every rank's host, so that a report can say where the silent ranks are.
  std::vector<char> names(static_cast<size_t>(size_) * MPI_MAX_PROCESSOR_NAME, '\0');
  char mine[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  MPI_Get_processor_name(mine, &len);
  MPI_Allgather(mine, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, comm);
  for (int r = 0; r < size_; ++r) hosts_.emplace_back(names.data() + static_cast<size_t>(r) * MPI_MAX_PROCESSOR_NAME);
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  // A private communicator, so queries never match the program's own messages.
  if (level == MPI_THREAD_MULTIPLE) MPI_Comm_dup(comm, &comm_);
  thread_ = std::thread([this] { loop(); });
}

Watchdog::~Watchdog() {
  if (thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  if (comm_ != MPI_COMM_NULL) {
    // Answer what is still in flight, then free: MPI_Comm_free is collective in effect at
    // finalize, and an unanswered query would only delay a rank that is aborting anyway.
    answer_queries();
    MPI_Comm_free(&comm_);
  }
}

void Watchdog::set_phase(const std::string& phase) {
  std::lock_guard<std::mutex> lock(mutex_);
  phase_ = phase;
  step_name_ = nullptr;
}

void Watchdog::set_step_phase(const char* name, std::int64_t step) {
  std::lock_guard<std::mutex> lock(mutex_);
  step_name_ = name;
  step_ = step;
}

Watchdog::Armed::Armed(Watchdog* w, const char* call) : w_(w) {
  if (!w_ || w_->timeout_s_ <= 0) return;
  std::lock_guard<std::mutex> lock(w_->mutex_);
  w_->call_ = call;
  w_->armed_at_ = std::chrono::steady_clock::now();
  ++w_->arm_count_;
}

Watchdog::Armed::~Armed() {
  if (!w_ || w_->timeout_s_ <= 0) return;
  std::lock_guard<std::mutex> lock(w_->mutex_);
  w_->call_ = nullptr;
}

std::string Watchdog::current_phase_locked() const {
  return step_name_ ? std::string(step_name_) + " " + std::to_string(step_) : phase_;
}

std::string Watchdog::describe_self() {
  std::lock_guard<std::mutex> lock(mutex_);
  // "1<TAB>call<TAB>phase" while inside a collective, "0<TAB><TAB>phase" otherwise.
  return std::string(call_ ? "1" : "0") + "\t" + (call_ ? call_ : "") + "\t" + current_phase_locked();
}

void Watchdog::answer_queries() {
  if (comm_ == MPI_COMM_NULL) return;
  for (;;) {
    int flag = 0;
    MPI_Status st;
    MPI_Iprobe(MPI_ANY_SOURCE, kQueryTag, comm_, &flag, &st);
    if (!flag) return;
    int dummy = 0;
    MPI_Recv(&dummy, 1, MPI_INT, st.MPI_SOURCE, kQueryTag, comm_, MPI_STATUS_IGNORE);
    const std::string me = describe_self();
    MPI_Send(me.data(), static_cast<int>(me.size()), MPI_CHAR, st.MPI_SOURCE, kReplyTag, comm_);
  }
}

void Watchdog::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  auto last_tick = std::chrono::steady_clock::now();
  while (!stop_) {
    cv_.wait_for(lock, kPoll);
    if (stop_) break;
    // A tick that comes much later than the poll period means this process did not run in
    // between: the job was suspended (SIGSTOP, as Slurm's `scontrol suspend` does) or the
    // node starved it. That time is nobody's wait, so it does not count: a job suspended as
    // a whole carries on when resumed. A rank stuck while the others run is still reported,
    // by the others, whose watchdogs tick throughout.
    const auto now = std::chrono::steady_clock::now();
    if (now - last_tick > kSuspendedGap && call_ != nullptr) armed_at_ += now - last_tick - kPoll;
    last_tick = now;
    const bool armed = call_ != nullptr;
    const double waited = armed ? std::chrono::duration<double>(std::chrono::steady_clock::now() - armed_at_).count() : 0;
    const bool probe = armed && waited > probe_after_s_ && probed_arm_ != arm_count_;
    if (probe) probed_arm_ = arm_count_;
    lock.unlock();
    answer_queries();
    if (armed && waited > timeout_s_) report_and_abort(waited);
    if (probe) warn_if_silent(waited);
    lock.lock();
  }
}

Watchdog::PeerStates Watchdog::query_peers(std::chrono::milliseconds deadline) {
  PeerStates state(static_cast<size_t>(size_));
  state[static_cast<size_t>(rank_)] = describe_self();
  if (comm_ == MPI_COMM_NULL) return state;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    int q = 1;
    MPI_Request req;
    MPI_Isend(&q, 1, MPI_INT, r, kQueryTag, comm_, &req);
    MPI_Request_free(&req);
  }
  const auto until = std::chrono::steady_clock::now() + deadline;
  int missing = size_ - 1;
  while (missing > 0 && std::chrono::steady_clock::now() < until) {
    answer_queries();
    int flag = 0;
    MPI_Status st;
    MPI_Iprobe(MPI_ANY_SOURCE, kReplyTag, comm_, &flag, &st);
    if (!flag) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    int count = 0;
    MPI_Get_count(&st, MPI_CHAR, &count);
    std::string text(static_cast<size_t>(count), '\0');
    MPI_Recv(text.data(), count, MPI_CHAR, st.MPI_SOURCE, kReplyTag, comm_, MPI_STATUS_IGNORE);
    if (state[static_cast<size_t>(st.MPI_SOURCE)].empty()) --missing;
    state[static_cast<size_t>(st.MPI_SOURCE)] = text;
  }
  return state;
}

Watchdog::Diagnosis Watchdog::diagnose(const PeerStates& state, const std::string& my_call,
                                       const std::string& my_phase) const {
  Diagnosis d;
  std::ostringstream absent;
  for (int r = 0; r < size_; ++r) {
    const std::string& s = state[static_cast<size_t>(r)];
    const std::string where = "rank " + std::to_string(r) + " on " + hosts_[static_cast<size_t>(r)];
    if (s.empty()) {
      d.silent.push_back(r);
      absent << (absent.tellp() > 0 ? "; " : "") << where << " (no answer: exited, hung outside MPI, or unreachable)";
      continue;
    }
    const auto t1 = s.find('\t'), t2 = s.find('\t', t1 + 1);
    const bool in_call = s[0] == '1';
    const std::string call = s.substr(t1 + 1, t2 - t1 - 1), phase = s.substr(t2 + 1);
    if (in_call && call == my_call && phase == my_phase) {
      d.arrived.push_back(r);
    } else {
      absent << (absent.tellp() > 0 ? "; " : "") << where << " (at '" << phase << "'"
             << (in_call ? ", waiting in " + call : ", not in a collective") << ")";
    }
  }
  d.absent = absent.str();
  // A host none of whose ranks answers: lost, or cut off from this one. This rank's own host
  // is never called lost (its silent ranks are dead or hung processes).
  std::map<std::string, std::pair<std::vector<int>, bool>> by_host;  // ranks, any answered
  for (int r = 0; r < size_; ++r) {
    auto& h = by_host[hosts_[static_cast<size_t>(r)]];
    h.first.push_back(r);
    if (!state[static_cast<size_t>(r)].empty()) h.second = true;
  }
  for (const auto& [host, h] : by_host) {
    if (h.second || host == hosts_[static_cast<size_t>(rank_)]) continue;
    d.lost_hosts += (d.lost_hosts.empty() ? "" : ", ") + host + " (rank" + (h.first.size() > 1 ? "s " : " ") +
                    join_ranks(h.first) + ")";
  }
  return d;
}

void Watchdog::warn_if_silent(double waited_s) {
  std::string my_call, my_phase;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!call_) return;  // the collective finished meanwhile
    my_call = call_;
    my_phase = current_phase_locked();
  }
  if (comm_ == MPI_COMM_NULL) return;  // nobody could answer: only the timeout can tell
  const Diagnosis d = diagnose(query_peers(kQueryDeadline), my_call, my_phase);
  // One warning per collective from the job: the lowest rank waiting there prints it.
  if (d.silent.empty() || d.arrived.empty() || d.arrived.front() != rank_) return;
  std::ostringstream os;
  os << "rank " << rank_ << " on " << hosts_[static_cast<size_t>(rank_)] << ": warning: waited "
     << static_cast<int>(waited_s) << " s in " << my_call << " during '" << my_phase
     << "'; no answer from rank" << (d.silent.size() > 1 ? "s " : " ") << join_ranks(d.silent) << ".\n";
  if (!d.lost_hosts.empty()) os << "  lost or unreachable: " << d.lost_hosts << " (none of its ranks answers)\n";
  os << "  the job ends when the launcher notices, or after --hang-timeout (" << timeout_s_ << " s)\n";
  std::fputs(os.str().c_str(), stderr);
  std::fflush(stderr);
}

void Watchdog::report_and_abort(double waited_s) {
  std::string my_call, my_phase;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    my_call = call_ ? call_ : "?";
    my_phase = current_phase_locked();
  }
  const Diagnosis d = diagnose(query_peers(kQueryDeadline), my_call, my_phase);
  // With a host lost, an abort now would leave mpirun waiting on that host's daemon for
  // good; its keepalive (or slurmd's silence) ends the job by itself if given the time.
  const int grace_s = d.lost_hosts.empty() || !launched_by_mpirun() ? 0 : kLauncherGrace_s;
  // Every waiting rank times out at about the same moment; one report is enough. The lowest
  // waiting rank prints and aborts; the others give it a head start, then abort quietly.
  if (!d.arrived.empty() && d.arrived.front() != rank_) {
    std::this_thread::sleep_for(std::chrono::seconds(3 + grace_s));
    abort_job(3);
  }
  std::ostringstream os;
  os << "rank " << rank_ << " on " << hosts_[static_cast<size_t>(rank_)] << ": error: hang detected: waited "
     << static_cast<int>(waited_s) << " s in " << my_call << " during '" << my_phase
     << "'.\n  ranks waiting there: " << join_ranks(d.arrived)
     << "\n  ranks that did not arrive: " << (d.absent.empty() ? "none (the collective itself is stuck)" : d.absent);
  if (!d.lost_hosts.empty()) {
    os << "\n  lost or unreachable: " << d.lost_hosts << " (none of its ranks answers)";
    if (grace_s > 0) os << "; aborting in " << grace_s << " s unless the launcher ends the job first";
  }
  os << "\n  hint: a rank ran a different number of steps (for eval with uneven data: --strategy infinite-pad), "
        "crashed, or is slow; raise --hang-timeout (now "
     << timeout_s_ << " s) if the step is legitimately long.\n";
  std::fputs(os.str().c_str(), stderr);
  std::fflush(stderr);
  std::this_thread::sleep_for(std::chrono::seconds(grace_s));
  abort_job(3);
}

}  // namespace spmd::runtime
