#include "spmd/runtime/memory_limits.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <vector>

#include "spmd/runtime/agree.hpp"
#include "spmd/runtime/check.hpp"
#include "spmd/runtime/mpi.hpp"

namespace spmd::runtime {

namespace {
// The first number in `path` after `key` ("MemAvailable:" in /proc/meminfo), times `unit`;
// negative when absent.
double number_after(const std::string& path, const std::string& key, double unit) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key, 0) == 0) return std::strtod(line.c_str() + key.size(), nullptr) * unit;
  return -1;
}

// A cgroup file's number: -1 when missing, infinity for "max" and for cgroup v1's
// "unlimited" (a page-rounded 2^63).
double cgroup_number(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text)) return -1;
  if (text == "max") return std::numeric_limits<double>::infinity();
  const double x = std::strtod(text.c_str(), nullptr);
  return x >= std::ldexp(1.0, 62) ? std::numeric_limits<double>::infinity() : x;
}

// The memory cgroups of this process and their ancestors, as (limit file, usage file).
std::vector<std::pair<std::string, std::string>> memory_cgroup_files() {
  std::vector<std::pair<std::string, std::string>> files;
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    const auto c1 = line.find(':'), c2 = line.find(':', c1 + 1);
    if (c1 == std::string::npos || c2 == std::string::npos) continue;
    const std::string controllers = line.substr(c1 + 1, c2 - c1 - 1);
    std::string path = line.substr(c2 + 1);
    const bool v2 = controllers.empty(), v1 = controllers == "memory" || controllers.find("memory,") == 0 ||
                                               controllers.find(",memory") != std::string::npos;
    if (!v1 && !v2) continue;
    for (;;) {
      for (const std::string& base : v2 ? std::vector<std::string>{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}
                                       : std::vector<std::string>{"/sys/fs/cgroup/memory"}) {
        const std::string dir = base + (path == "/" ? "" : path);
        if (v2) files.emplace_back(dir + "/memory.max", dir + "/memory.current");
        else files.emplace_back(dir + "/memory.limit_in_bytes", dir + "/memory.usage_in_bytes");
      }
      if (path == "/" || path.empty()) break;
      const auto slash = path.rfind('/');
      path = slash == 0 ? "/" : path.substr(0, slash);
    }
  }
  return files;
}
}  // namespace

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (bytes >= 1024 && u < 6) {
    bytes /= 1024;
    ++u;
  }
  char text[64];
  std::snprintf(text, sizeof text, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return text;
}

namespace {
std::atomic<int> sharer_ranks{1}, sharer_devices{1};
}  // namespace

void set_memory_sharers(MemorySharers sharers) {
  sharer_ranks.store(std::max(1, sharers.ranks_on_node));
  sharer_devices.store(std::max(1, sharers.devices_per_rank));
}
MemorySharers memory_sharers() { return {sharer_ranks.load(), sharer_devices.load()}; }

MemoryRoom node_memory_room() {
  MemoryRoom room;
  if (const double available = number_after("/proc/meminfo", "MemAvailable:", 1024); available >= 0)
    room = {available, "MemAvailable in /proc/meminfo (" + format_bytes(available) + ")"};
  for (const auto& [limit_file, usage_file] : memory_cgroup_files()) {
    const double limit = cgroup_number(limit_file);
    if (limit < 0 || std::isinf(limit)) continue;
    const double used = std::max(0.0, cgroup_number(usage_file));
    if (limit - used < room.bytes)
      room = {std::max(0.0, limit - used), "the memory cgroup's limit " + limit_file + " (" + format_bytes(limit) +
                                               ", " + format_bytes(used) + " already used)"};
  }
  return room;
}

MemoryRoom address_space_room() {
  rlimit limit{};
  if (getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return {};
  const double cap = static_cast<double>(limit.rlim_cur);
  const double mapped = std::max(0.0, number_after("/proc/self/status", "VmSize:", 1024));
  return {std::max(0.0, cap - mapped), "ulimit -v (RLIMIT_AS " + format_bytes(cap) + ", " + format_bytes(mapped) +
                                           " already mapped by this process)"};
}

std::string require_memory_fits(MPI_Comm comm, double rank_need, const std::string& breakdown, const std::string& hint) {
  NodeComm node(comm);
  int rank = 0, node_size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(node.comm(), &node_size);
  double node_need = rank_need;
  SPMD_CHECK_MPI(MPI_Allreduce(&rank_need, &node_need, 1, MPI_DOUBLE, MPI_SUM, node.comm()), "summing the node's memory need");
  // The node's files are read once per node; the ranks share the node's room.
  MemoryRoom node_room = node.rank() == 0 ? node_memory_room() : MemoryRoom{};
  SPMD_CHECK_MPI(MPI_Bcast(&node_room.bytes, 1, MPI_DOUBLE, 0, node.comm()), "sharing the node's memory room");
  const MemoryRoom own = address_space_room();
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  const std::string who = "rank " + std::to_string(rank) + " (" + host + ")";
  const std::string need_text = format_bytes(rank_need) + " (" + breakdown + ")";
  std::string error;
  if (rank_need > own.bytes)
    error = who + " needs " + need_text + " but " + own.source + " leaves it " + format_bytes(own.bytes) + "; " + hint;
  else if (node_need > node_room.bytes && node.rank() == 0)
    error = "the " + std::to_string(node_size) + " rank(s) on " + host + " need " + format_bytes(node_need) +
            " together (" + who + ": " + need_text + ") but " + node_room.source + " leaves " +
            format_bytes(node_room.bytes) + "; " + hint + ", or run fewer ranks per node";
  if (!error.empty()) error = "not enough memory for this run: " + error;
  agree_or_throw(comm, error);
  return "# memory: rank " + std::to_string(rank) + " needs " + need_text + "; its node's " + std::to_string(node_size) +
         " rank(s) " + format_bytes(node_need) + " of " +
         (std::isinf(node_room.bytes) ? std::string("(no node limit found)") : format_bytes(node_room.bytes)) +
         (std::isinf(own.bytes) ? "" : "; ulimit -v leaves " + format_bytes(own.bytes)) + "\n";
}

}  // namespace spmd::runtime
