#include "spmd/runtime/collectives.hpp"

#include <algorithm>
#include <limits>
#include <string>

#include "spmd/runtime/check.hpp"
#include "spmd/runtime/watchdog.hpp"

namespace spmd::runtime {

namespace {
int checked_count(std::size_t n) {
  if (n > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw Error(rank_tag() + ": collective of " + std::to_string(n) + " elements exceeds MPI's int count");
  return static_cast<int>(n);
}

template <class T>
std::size_t common_length(const PerDevice<std::span<const T>>& x, const Context& ctx) {
  if (static_cast<int>(x.size()) != ctx.devices_per_rank())
    throw Error(rank_tag() + ": per-device argument has " + std::to_string(x.size()) + " entries for " +
                std::to_string(ctx.devices_per_rank()) + " local devices");
  const std::size_t n = x.empty() ? 0 : x[0].size();
  for (const auto& s : x)
    if (s.size() != n) throw Error(rank_tag() + ": per-device arrays differ in length");
  return n;
}
}  // namespace

void allreduce_sum(const Context& ctx, std::span<std::int64_t> v) {
  Watchdog::Armed armed(ctx.watchdog(), "MPI_Allreduce(sum, int64)");
  SPMD_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, v.data(), checked_count(v.size()), MPI_INT64_T, MPI_SUM, ctx.comm()), "");
}
void allreduce_sum(const Context& ctx, std::span<double> v) {
  Watchdog::Armed armed(ctx.watchdog(), "MPI_Allreduce(sum, double)");
  SPMD_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, v.data(), checked_count(v.size()), MPI_DOUBLE, MPI_SUM, ctx.comm()), "");
}
void allreduce_max(const Context& ctx, std::span<double> v) {
  Watchdog::Armed armed(ctx.watchdog(), "MPI_Allreduce(max, double)");
  SPMD_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, v.data(), checked_count(v.size()), MPI_DOUBLE, MPI_MAX, ctx.comm()), "");
}
void allreduce_max(const Context& ctx, std::span<std::int64_t> v) {
  Watchdog::Armed armed(ctx.watchdog(), "MPI_Allreduce(max, int64)");
  SPMD_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, v.data(), checked_count(v.size()), MPI_INT64_T, MPI_MAX, ctx.comm()), "");
}
void broadcast_bytes(const Context& ctx, void* data, std::size_t bytes, int root) {
  Watchdog::Armed armed(ctx.watchdog(), "MPI_Bcast");
  SPMD_CHECK_MPI(MPI_Bcast(data, checked_count(bytes), MPI_BYTE, root, ctx.comm()), "");
}
void allgather_bytes(const Context& ctx, const void* in, std::size_t bytes, void* out) {
  Watchdog::Armed armed(ctx.watchdog(), "MPI_Allgather");
  SPMD_CHECK_MPI(MPI_Allgather(in, checked_count(bytes), MPI_BYTE, out, checked_count(bytes), MPI_BYTE, ctx.comm()), "");
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
Acc<T> psum(const Context& ctx, const PerDevice<T>& x) {
  PerDevice<std::span<const T>> spans;
  for (const auto& v : x) spans.emplace_back(&v, 1);
  return psum<T>(ctx, spans)[0];
}

template <class T>
std::vector<double> pmean(const Context& ctx, const PerDevice<std::span<const T>>& x) {
  const auto s = psum<T>(ctx, x);
  std::vector<double> out(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) out[i] = static_cast<double>(s[i]) / ctx.total_devices();
  return out;
}

template <class T>
double pmean(const Context& ctx, const PerDevice<T>& x) {
  return static_cast<double>(psum<T>(ctx, x)) / ctx.total_devices();
}

template <class T>
std::vector<Acc<T>> pmax(const Context& ctx, const PerDevice<std::span<const T>>& x) {
  const std::size_t n = common_length(x, ctx);
  std::vector<Acc<T>> acc(n, std::numeric_limits<Acc<T>>::lowest());
  for (const auto& s : x)
    for (std::size_t i = 0; i < n; ++i) acc[i] = std::max(acc[i], static_cast<Acc<T>>(s[i]));
  allreduce_max(ctx, std::span<Acc<T>>(acc));
  return acc;
}

template <class T>
std::vector<T> all_gather(const Context& ctx, const PerDevice<std::span<const T>>& x) {
  const std::size_t n = common_length(x, ctx);
  // Same length everywhere is a precondition of an equal-count gather: check it.
  std::int64_t len[2] = {static_cast<std::int64_t>(n), -static_cast<std::int64_t>(n)};
  allreduce_max(ctx, std::span<std::int64_t>(len, 2));
  if (len[0] != -len[1]) throw Error(rank_tag() + ": all_gather called with different lengths on different ranks");
  std::vector<T> local(n * x.size());
  for (std::size_t d = 0; d < x.size(); ++d) std::copy(x[d].begin(), x[d].end(), local.begin() + d * n);
  std::vector<T> out(local.size() * static_cast<std::size_t>(ctx.size()));
  allgather_bytes(ctx, local.data(), local.size() * sizeof(T), out.data());
  return out;
}

template <class T>
std::vector<double> psum_ordered(const Context& ctx, const PerDevice<std::span<const T>>& x) {
  const std::size_t n = common_length(x, ctx);
  const auto all = all_gather<T>(ctx, x);
  std::vector<double> out(n, 0.0);
  for (int g = 0; g < ctx.total_devices(); ++g)
    for (std::size_t i = 0; i < n; ++i) out[i] += static_cast<double>(all[static_cast<std::size_t>(g) * n + i]);
  return out;
}

template <class T>
void broadcast(const Context& ctx, std::vector<T>& data, int root) {
  std::int64_t len[2] = {static_cast<std::int64_t>(data.size()), 0};
  if (ctx.rank() != root) len[0] = 0;
  allreduce_sum(ctx, std::span<std::int64_t>(len, 1));
  data.resize(static_cast<std::size_t>(len[0]));
  broadcast_bytes(ctx, data.data(), data.size() * sizeof(T), root);
}

template <class T>
PerDevice<std::vector<T>> replicate(const Context& ctx, std::span<const T> value_on_root) {
  std::vector<T> v(value_on_root.begin(), value_on_root.end());
  broadcast(ctx, v, 0);
  return PerDevice<std::vector<T>>(static_cast<std::size_t>(ctx.devices_per_rank()), v);
}

template <class T>
std::vector<T> unreplicate(const PerDevice<std::vector<T>>& replicated) {
  if (replicated.empty()) throw Error(rank_tag() + ": unreplicate of an empty per-device value");
  return replicated[0];
}

#define SPMD_INSTANTIATE(T)                                                                               \
  template std::vector<Acc<T>> psum<T>(const Context&, const PerDevice<std::span<const T>>&);             \
  template Acc<T> psum<T>(const Context&, const PerDevice<T>&);                                           \
  template std::vector<double> pmean<T>(const Context&, const PerDevice<std::span<const T>>&);            \
  template double pmean<T>(const Context&, const PerDevice<T>&);                                          \
  template std::vector<Acc<T>> pmax<T>(const Context&, const PerDevice<std::span<const T>>&);             \
  template std::vector<T> all_gather<T>(const Context&, const PerDevice<std::span<const T>>&);            \
  template std::vector<double> psum_ordered<T>(const Context&, const PerDevice<std::span<const T>>&);     \
  template void broadcast<T>(const Context&, std::vector<T>&, int);                                       \
  template PerDevice<std::vector<T>> replicate<T>(const Context&, std::span<const T>);                    \
  template std::vector<T> unreplicate<T>(const PerDevice<std::vector<T>>&);

SPMD_INSTANTIATE(float)
SPMD_INSTANTIATE(double)
SPMD_INSTANTIATE(std::int32_t)
SPMD_INSTANTIATE(std::int64_t)
SPMD_INSTANTIATE(std::uint8_t)
template void broadcast<char>(const Context&, std::vector<char>&, int);
#undef SPMD_INSTANTIATE

}  // namespace spmd::runtime
