#pragma once
// How much memory a rank may still take, and the up-front check that a run's estimated need
// fits it. Three limits apply: the node's free memory (MemAvailable in /proc/meminfo), the
// memory cgroup of the process and those above it (v2 memory.max, v1
// memory.limit_in_bytes, less what the cgroup already uses), both shared by the node's
// ranks; and `ulimit -v` (RLIMIT_AS), per process, less the address space already mapped.
// Bytes are doubles: a need computed from a user's option (2^63 rows per batch) must not
// overflow before it is compared.
#include <mpi.h>

#include <limits>
#include <string>

namespace spmd::runtime {

struct MemoryRoom {
  double bytes = std::numeric_limits<double>::infinity();  // infinity: no such limit
  std::string source;  // "MemAvailable in /proc/meminfo", "cgroup memory.max of /x (limit 4 GiB, 1 GiB used)"
};

// The node's room: the smaller of MemAvailable and every memory cgroup's limit less usage.
MemoryRoom node_memory_room();
// This process's room under RLIMIT_AS: the limit less its current address space (VmSize).
MemoryRoom address_space_room();

// Who draws the same sizes at the same moment: SPMD ranks of one node run the same shapes, and
// so do a rank's devices. A size that fits the node's free memory once may not fit it that many
// times (two ranks each granted 16 GiB of 23 GiB free were both OOM-killed). runtime::Context
// sets them; one of each until then.
struct MemorySharers {
  int ranks_on_node = 1;
  int devices_per_rank = 1;
  int total() const { return ranks_on_node * devices_per_rank; }
};
void set_memory_sharers(MemorySharers sharers);
MemorySharers memory_sharers();

// "1.5 GiB", "512 B"; for messages.
std::string format_bytes(double bytes);

// Collective over comm. Each rank passes its own need (bytes) and what makes it up; the
// ranks of one node add theirs up and compare the sum with the node's room, each rank its
// own need with its address-space room. When some rank's need does not fit, every rank
// throws the same CollectiveError naming the rank, the need, the limit and which limit it
// is, and `hint` (the option to change). Returns a line for a dry run: this rank's need,
// its node's sum and the limits.
std::string require_memory_fits(MPI_Comm comm, double rank_need, const std::string& breakdown, const std::string& hint);

}  // namespace spmd::runtime
