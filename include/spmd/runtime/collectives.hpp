#pragma once
// Collectives over devices x ranks, the flax.jax_utils vocabulary on MPI.
//
// A per-device argument is a std::vector with one entry per local device (local order).
// Reductions go local devices first (in order), then ranks (MPI_Allreduce):
//  - integers are summed as int64, exactly;
//  - floating point is accumulated in double.
// psum_ordered sums in global device order after an all-gather, so its floating-point
// result is bitwise the same for every split of the same devices over ranks.
// Every call is collective over the context's communicator and armed in the watchdog.
#include <mpi.h>

#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

#include "spmd/runtime/context.hpp"

namespace spmd::runtime {

template <class T>
using PerDevice = std::vector<T>;

// Wire types.
template <class T>
MPI_Datatype mpi_type();
template <> inline MPI_Datatype mpi_type<double>() { return MPI_DOUBLE; }
template <> inline MPI_Datatype mpi_type<float>() { return MPI_FLOAT; }
template <> inline MPI_Datatype mpi_type<std::int64_t>() { return MPI_INT64_T; }
template <> inline MPI_Datatype mpi_type<std::int32_t>() { return MPI_INT32_T; }
template <> inline MPI_Datatype mpi_type<std::uint8_t>() { return MPI_UINT8_T; }
template <> inline MPI_Datatype mpi_type<char>() { return MPI_CHAR; }

// Accumulator type: int64 for integers, double for floating point.
template <class T>
using Acc = std::conditional_t<std::is_integral_v<T>, std::int64_t, double>;

// Rank-level building blocks (in place, over ctx.comm()).
void allreduce_sum(const Context& ctx, std::span<std::int64_t> inout);
void allreduce_sum(const Context& ctx, std::span<double> inout);
void allreduce_max(const Context& ctx, std::span<double> inout);
void allreduce_max(const Context& ctx, std::span<std::int64_t> inout);
void broadcast_bytes(const Context& ctx, void* data, std::size_t bytes, int root);
// Equal-size all-gather of bytes: out has size()*bytes, rank-major.
void allgather_bytes(const Context& ctx, const void* in, std::size_t bytes, void* out);

// psum: elementwise sum over all devices of all ranks. All per-device spans have one length.
template <class T>
std::vector<Acc<T>> psum(const Context& ctx, const PerDevice<std::span<const T>>& x);
// Scalar form: one value per local device.
template <class T>
Acc<T> psum(const Context& ctx, const PerDevice<T>& x);

// pmean: psum / total_devices, in double.
template <class T>
std::vector<double> pmean(const Context& ctx, const PerDevice<std::span<const T>>& x);
template <class T>
double pmean(const Context& ctx, const PerDevice<T>& x);

// pmax: elementwise maximum over all devices.
template <class T>
std::vector<Acc<T>> pmax(const Context& ctx, const PerDevice<std::span<const T>>& x);

// all_gather: [total_devices][len] flattened, in global device order.
template <class T>
std::vector<T> all_gather(const Context& ctx, const PerDevice<std::span<const T>>& x);

// psum in global device order (layout-independent bits): all_gather, then a sequential
// double sum over devices 0..total-1.
template <class T>
std::vector<double> psum_ordered(const Context& ctx, const PerDevice<std::span<const T>>& x);

// broadcast: root's data to every rank (in place).
template <class T>
void broadcast(const Context& ctx, std::span<T> data, int root = 0) {
  broadcast_bytes(ctx, data.data(), data.size_bytes(), root);
}
// The same length on every rank is checked; a mismatch throws on every rank.
template <class T>
void broadcast(const Context& ctx, std::vector<T>& data, int root = 0);

// replicate: rank 0's value, on every rank and every local device (one copy per device).
template <class T>
PerDevice<std::vector<T>> replicate(const Context& ctx, std::span<const T> value_on_root);
// unreplicate: the copy held by local device 0.
template <class T>
std::vector<T> unreplicate(const PerDevice<std::vector<T>>& replicated);

}  // namespace spmd::runtime
