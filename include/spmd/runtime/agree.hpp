#pragma once
// Agreement on failure. A rank that finds a problem (a bad label in its shard, a file it
// cannot open) must not leave the others waiting in the next collective: every rank calls
// agree_or_throw at the same point with its own verdict, and if any rank failed, all of
// them throw the same CollectiveError carrying the lowest failing rank's message.
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace spmd::runtime {

// local_error: empty when this rank is fine, else a message (the rank is prefixed).
// Collective over comm. Throws spmd::CollectiveError on every rank if any rank failed.
void agree_or_throw(MPI_Comm comm, const std::string& local_error);
// The same agreement carrying, in the same allreduce, the largest of the ranks' local_stop
// (a stop signal number, runtime/stop_request.hpp; 0 for none): returned when no rank
// failed. For loops that agree on failures anyway and should stop on a signal at no cost.
int agree_or_throw_and_stop(MPI_Comm comm, const std::string& local_error, int local_stop);

// Runs fn(); an spmd::Error (or std::exception) it throws becomes this rank's verdict for
// agree_or_throw. Use around per-rank work that is followed by collectives.
template <class Fn>
void agree_on(MPI_Comm comm, Fn&& fn) {
  std::string error;
  try {
    fn();
  } catch (const std::exception& e) {
    error = e.what();
    if (error.empty()) error = "unknown error";
  }
  agree_or_throw(comm, error);
}

// Checks that a value meant to be identical on every rank (the options, the inputs) is.
// canonical: a text form ("key=value" lines). On mismatch every rank throws a
// CollectiveError that names a differing rank and the first differing line.
void require_identical_on_all_ranks(MPI_Comm comm, const std::string& canonical, const std::string& what);

// 64-bit FNV-1a: stable across hosts and builds (std::hash is not).
std::uint64_t stable_hash(const std::string& text);
// The same over bytes, continuing from `state` (the FNV offset basis to start), so that
// several buffers hash as their concatenation.
inline constexpr std::uint64_t kStableHashStart = 1469598103934665603ull;
std::uint64_t stable_hash(const void* data, std::size_t bytes, std::uint64_t state = kStableHashStart);

}  // namespace spmd::runtime
