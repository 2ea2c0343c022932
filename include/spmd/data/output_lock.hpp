#pragma once
// One writer per output: a job claims an output file (a checkpoint) for its whole lifetime,
// so that a second job given the same path is refused at start instead of both running
// and one losing the other's epochs.
//
// The claim is flock(LOCK_EX | LOCK_NB) on `<dir>/.<name>.lock` beside the output, whose
// text says who holds it (host, pid, since when) for the refusal message. The holder
// removes the file when it lets go; the kernel releases a flock when its process ends,
// however it ends (SIGKILL included), so a crash never leaves a stale claim (only an
// unlocked file, which the next job takes over and says so, removing the temporary
// `.NAME.tmp.PID` the dead holder may have left half written). A signal that ends the holder
// removes the file too (runtime::LiveFile). Linux's NFS client
// maps flock to POSIX byte-range locks, which the server arbitrates across nodes; on file
// systems mounted without lock support (Lustre's -o noflock) the claim is a no-op, said in
// the message of the error flock returns.
#include <string>

#include "spmd/runtime/stop_request.hpp"

namespace spmd::runtime {
class Context;
}

namespace spmd::data {

class OutputLock {
 public:
  // Collective: rank 0 claims `output` (named in messages as --option) and holds the claim
  // until destruction; every rank throws the same CollectiveError when another process
  // holds it ("in use by another job: host H, pid P, since T").
  OutputLock(const runtime::Context& ctx, const std::string& output, const std::string& option);
  ~OutputLock();
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

  // On rank 0, when the lock file was there unlocked (its holder died without removing
  // it): "# --OPTION 'OUTPUT': taking over a stale lock left by host H, pid P, since T ...\n"
  // for the start-up lines; else "".
  const std::string& takeover_line() const { return takeover_line_; }

 private:
  int fd_ = -1;
  std::string path_;
  std::string takeover_line_;
  runtime::LiveFile live_;  // removed by a signal that ends the process
};

}  // namespace spmd::data
