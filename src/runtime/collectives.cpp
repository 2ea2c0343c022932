#include "spmd/runtime/collectives.hpp"

#include <algorithm>
#include <cstddef>
#include <limits>
#include <source_location>
#include <string>

#include "spmd/runtime/check.hpp"
#include "spmd/runtime/time_account.hpp"
#include "spmd/runtime/watchdog.hpp"

namespace spmd::runtime {

namespace {
// The one place where this file calls MPI: `call` returns an MPI error code. The watchdog
// knows this rank is inside `name` for the duration, and the time account charges it to
// communication; a failure becomes an spmd::Error naming the rank, the call and the line
// here that made it.
template <class Call>
void collective(const Context& ctx, const char* name, Call&& call,
                std::source_location where = std::source_location::current()) {
  TimeScope communication(TimeCategory::Communication);
  Watchdog::Armed armed(ctx.watchdog(), name);
  const int rc = call();
  if (rc != MPI_SUCCESS)
    throw_mpi_error(rc, name, where.file_name(), static_cast<int>(where.line()),
                    "an MPI collective failed; the other ranks of the job stop with it");
}

int checked_count(std::size_t n) {
  if (n > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw Error(rank_tag() + ": collective of " + std::to_string(n) + " elements exceeds MPI's int count");
  return static_cast<int>(n);
}

template <class T>
std::size_t common_length(const PerDevice<std::span<T>>& x, const Context& ctx) {
  if (static_cast<int>(x.size()) != ctx.devices_per_rank())
    throw Error(rank_tag() + ": per-device argument has " + std::to_string(x.size()) + " entries for " +
                std::to_string(ctx.devices_per_rank()) + " local devices");
  const std::size_t n = x.empty() ? 0 : x[0].size();
  for (const auto& s : x)
    if (s.size() != n) throw Error(rank_tag() + ": per-device arrays differ in length");
  return n;
}

// Equal-count gathers need the same length on every rank: checked with one allreduce, so
// that a mismatch throws on every rank instead of corrupting memory on some.
void require_same_length_on_all_ranks(const Context& ctx, std::size_t n, const char* what) {
  std::int64_t len[2] = {static_cast<std::int64_t>(n), -static_cast<std::int64_t>(n)};
  allreduce_max(ctx, std::span<std::int64_t>(len, 2));
  if (len[0] != -len[1]) throw Error(rank_tag() + ": " + what + " called with different lengths on different ranks");
}

// The local devices' arrays side by side: [devices][n].
template <class T>
std::vector<T> concatenate(const PerDevice<std::span<const T>>& x, std::size_t n) {
  std::vector<T> local(n * x.size());
  for (std::size_t d = 0; d < x.size(); ++d) std::copy(x[d].begin(), x[d].end(), local.begin() + d * n);
  return local;
}
}  // namespace

void allreduce_sum(const Context& ctx, std::span<std::int64_t> v) {
  collective(ctx, "MPI_Allreduce(sum, int64)", [&] {
    return MPI_Allreduce(MPI_IN_PLACE, v.data(), checked_count(v.size()), MPI_INT64_T, MPI_SUM, ctx.comm());
  });
}
void allreduce_sum(const Context& ctx, std::span<double> v) {
  collective(ctx, "MPI_Allreduce(sum, double)", [&] {
    return MPI_Allreduce(MPI_IN_PLACE, v.data(), checked_count(v.size()), MPI_DOUBLE, MPI_SUM, ctx.comm());
  });
}
void allreduce_max(const Context& ctx, std::span<double> v) {
  collective(ctx, "MPI_Allreduce(max, double)", [&] {
    return MPI_Allreduce(MPI_IN_PLACE, v.data(), checked_count(v.size()), MPI_DOUBLE, MPI_MAX, ctx.comm());
  });
}
void allreduce_max(const Context& ctx, std::span<std::int64_t> v) {
  collective(ctx, "MPI_Allreduce(max, int64)", [&] {
    return MPI_Allreduce(MPI_IN_PLACE, v.data(), checked_count(v.size()), MPI_INT64_T, MPI_MAX, ctx.comm());
  });
}
ValueAndRank allreduce_maxloc(const Context& ctx, double value) {
  struct {
    double value;
    int rank;
  } in{value, ctx.rank()}, out{};  // MPI_DOUBLE_INT's layout
  collective(ctx, "MPI_Allreduce(maxloc, double)",
             [&] { return MPI_Allreduce(&in, &out, 1, MPI_DOUBLE_INT, MPI_MAXLOC, ctx.comm()); });
  return {out.value, out.rank};
}
void broadcast_bytes(const Context& ctx, void* data, std::size_t bytes, int root) {
  // In pieces of at most 1 GiB: MPI counts are int, and a model of many members (or a long
  // text) may pass 2^31 bytes. Every rank knows `bytes`, so the pieces match.
  constexpr std::size_t kPieceBytes = std::size_t{1} << 30;
  auto* at = static_cast<std::byte*>(data);
  for (std::size_t done = 0; done < bytes; done += kPieceBytes) {
    const std::size_t piece = std::min(kPieceBytes, bytes - done);
    collective(ctx, "MPI_Bcast", [&] { return MPI_Bcast(at + done, static_cast<int>(piece), MPI_BYTE, root, ctx.comm()); });
  }
}
void allgather_bytes(const Context& ctx, const void* in, std::size_t bytes, void* out) {
  collective(ctx, "MPI_Allgather", [&] {
    return MPI_Allgather(in, checked_count(bytes), MPI_BYTE, out, checked_count(bytes), MPI_BYTE, ctx.comm());
  });
}

template <class T>
std::vector<Acc<T>> psum(const Context& ctx, const PerDevice<std::span<const T>>& x) {
  const std::size_t n = common_length(x, ctx);
  std::vector<Acc<T>> acc(n, Acc<T>(0));
  for (const auto& s : x)
    for (std::size_t i = 0; i < n; ++i) acc[i] += static_cast<Acc<T>>(s[i]);
  allreduce_sum(ctx, std::span<Acc<T>>(acc));
  return acc;
}

template <class T>
std::vector<T> all_gather(const Context& ctx, const PerDevice<std::span<const T>>& x) {
  const std::size_t n = common_length(x, ctx);
  require_same_length_on_all_ranks(ctx, n, "all_gather");
  const std::vector<T> local = concatenate(x, n);
  std::vector<T> out(local.size() * static_cast<std::size_t>(ctx.size()));
  allgather_bytes(ctx, local.data(), local.size() * sizeof(T), out.data());
  return out;
}

template <class T>
void broadcast(const Context& ctx, std::vector<T>& data, int root) {
  std::int64_t len = ctx.rank() == root ? static_cast<std::int64_t>(data.size()) : 0;
  allreduce_sum(ctx, std::span<std::int64_t>(&len, 1));
  data.resize(static_cast<std::size_t>(len));
  broadcast_bytes(ctx, data.data(), data.size() * sizeof(T), root);
}

void broadcast(const Context& ctx, std::string& text, int root) {
  std::vector<char> v(text.begin(), text.end());
  broadcast(ctx, v, root);
  text.assign(v.begin(), v.end());
}

#define SPMD_INSTANTIATE(T)                                                                               \
  template std::vector<Acc<T>> psum<T>(const Context&, const PerDevice<std::span<const T>>&);             \
  template std::vector<T> all_gather<T>(const Context&, const PerDevice<std::span<const T>>&);            \
  template void broadcast<T>(const Context&, std::vector<T>&, int);

SPMD_INSTANTIATE(float)
SPMD_INSTANTIATE(double)
SPMD_INSTANTIATE(std::int32_t)
SPMD_INSTANTIATE(std::int64_t)
SPMD_INSTANTIATE(std::uint8_t)
template void broadcast<char>(const Context&, std::vector<char>&, int);
#undef SPMD_INSTANTIATE

}  // namespace spmd::runtime
