#include "spmd/runtime/agree.hpp"

#include <sstream>
#include <vector>

#include "spmd/runtime/check.hpp"
#include "spmd/runtime/time_account.hpp"

namespace spmd::runtime {

std::uint64_t stable_hash(const void* data, std::size_t bytes, std::uint64_t state) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) {
    state ^= p[i];
    state *= 1099511628211ull;
  }
  return state;
}

std::uint64_t stable_hash(const std::string& text) { return stable_hash(text.data(), text.size()); }

namespace {
// Broadcast a string from root (length first).
std::string bcast_string(MPI_Comm comm, const std::string& s, int root, int rank) {
  long long n = rank == root ? static_cast<long long>(s.size()) : 0;
  SPMD_CHECK_MPI(MPI_Bcast(&n, 1, MPI_LONG_LONG, root, comm), "broadcasting an error message");
  std::string out = rank == root ? s : std::string(static_cast<size_t>(n), '\0');
  if (n > 0) SPMD_CHECK_MPI(MPI_Bcast(out.data(), static_cast<int>(n), MPI_CHAR, root, comm), "broadcasting an error message");
  return out;
}
}  // namespace

void agree_or_throw(MPI_Comm comm, const std::string& local_error) { agree_or_throw_and_stop(comm, local_error, 0); }

int agree_or_throw_and_stop(MPI_Comm comm, const std::string& local_error, int local_stop) {
  TimeScope communication(TimeCategory::Communication);
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  // One MIN reduction: the lowest failing rank (size: none) and the negated largest signal.
  const int mine[2] = {local_error.empty() ? size : rank, -local_stop};
  int agreed[2] = {size, 0};
  SPMD_CHECK_MPI(MPI_Allreduce(mine, agreed, 2, MPI_INT, MPI_MIN, comm), "agreeing on success or failure");
  const int first = agreed[0];
  if (first == size) return -agreed[1];
  int failing = 0;
  const int me_failing = local_error.empty() ? 0 : 1;
  SPMD_CHECK_MPI(MPI_Allreduce(&me_failing, &failing, 1, MPI_INT, MPI_SUM, comm), "counting failed ranks");
  std::string message = bcast_string(comm, local_error, first, rank);
  if (failing > 1 && failing < size) message += " (" + std::to_string(failing) + " of " + std::to_string(size) + " ranks failed)";
  throw CollectiveError(message);
}

void require_identical_on_all_ranks(MPI_Comm comm, const std::string& canonical, const std::string& what) {
  TimeScope communication(TimeCategory::Communication);
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const std::uint64_t h = stable_hash(canonical);
  std::uint64_t lo = 0, hi = 0;
  SPMD_CHECK_MPI(MPI_Allreduce(&h, &lo, 1, MPI_UINT64_T, MPI_MIN, comm), "comparing option hashes");
  SPMD_CHECK_MPI(MPI_Allreduce(&h, &hi, 1, MPI_UINT64_T, MPI_MAX, comm), "comparing option hashes");
  if (lo == hi) return;
  // Rare path: find the first rank that differs from rank 0 and the first differing line.
  const std::string root_text = bcast_string(comm, canonical, 0, rank);
  const int differs = canonical != root_text ? rank : size;
  int first = size;
  SPMD_CHECK_MPI(MPI_Allreduce(&differs, &first, 1, MPI_INT, MPI_MIN, comm), "locating a differing rank");
  const std::string other = bcast_string(comm, canonical, first, rank);
  auto lines = [](const std::string& s) {
    std::vector<std::string> v;
    std::istringstream is(s);
    for (std::string l; std::getline(is, l);) v.push_back(l);
    return v;
  };
  const auto a = lines(root_text), b = lines(other);
  std::string detail;
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    const std::string la = i < a.size() ? a[i] : "(nothing)", lb = i < b.size() ? b[i] : "(nothing)";
    if (la != lb) {
      detail = "rank 0 has '" + la + "', rank " + std::to_string(first) + " has '" + lb + "'";
      break;
    }
  }
  std::ostringstream os;
  os << "ranks were started with different " << what << " (hash " << std::hex << lo << " vs " << hi << std::dec
     << "): " << detail << ". Every rank of an SPMD job must get the same arguments and inputs.";
  throw CollectiveError(os.str());
}

}  // namespace spmd::runtime
