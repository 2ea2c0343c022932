#pragma once
// Deadline on file-system calls that a hung mount never returns from. A dead NFS server or a
// stuck parallel file system blocks stat(), open() and statvfs() in the kernel, on every rank
// that touches the path at once, before or outside any collective: the hang watchdog (which
// watches MPI calls) never sees it, and every rank waits forever. Each such call is wrapped
// in an IoDeadline scope; one thread per process, started on first use, ends the job when a
// scope stays open longer than the deadline (--hang-timeout), with a report naming the rank,
// its host, the call, the path and the phase. It covers start-up (option checks, before the
// watchdog exists) as well as the run.
//
// Only metadata calls and opens are wrapped, never bulk reads or writes: those take as long
// as the data is big, and collective ones are the watchdog's.
#include <string>

namespace spmd::runtime {

// Seconds one wrapped call may take; <= 0 disables the deadline. Default 300 (--hang-timeout's).
void set_io_deadline(double seconds);

// What the program is doing, named in the report ("start-up: option and input checks", a
// workload's phase). Context::set_phase keeps it current.
void set_io_phase(const std::string& phase);
// The phase last set (for reports of other failures: an allocation that failed).
std::string io_phase();

// Testing aid (--simulate-stall RANK:io:CALL[:TEXT]): on this rank, the first wrapped CALL
// (stat, open, ...) whose path contains TEXT blocks as if its mount had hung, until the
// deadline ends the job. what: "CALL" or "CALL:TEXT".
void simulate_io_stall(int rank, const std::string& what);

class IoDeadline {
 public:
  // call: the system or library call ("stat", "open", "H5Fcreate"); path: what it touches.
  IoDeadline(const char* call, const std::string& path);
  ~IoDeadline();
  IoDeadline(const IoDeadline&) = delete;
  IoDeadline& operator=(const IoDeadline&) = delete;

 private:
  unsigned long long id_ = 0;
};

}  // namespace spmd::runtime
