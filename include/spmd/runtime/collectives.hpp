#pragma once
// Collectives over devices x ranks, the flax.jax_utils vocabulary on MPI, and the rank-level
// MPI collectives the workloads need. Workloads call these, never MPI directly.
//
// A per-device argument is a std::vector with one entry per local device (local order);
// global device g is local device g % d of rank g / d (rank-major, as Context numbers them).
//  - psum: local devices first (in order), then ranks (MPI_Allreduce); integers are summed
//    as int64, exactly, so the result does not depend on the layout.
//  - all_gather moves per-device arrays in global device order. (Floating-point sums over
//    devices that must not depend on the layout: workloads/member_sum.hpp.)
// Every call is collective over the context's communicator. Every MPI call made here is
// armed in the hang watchdog for its duration and has its return code checked, in one
// place (collectives.cpp); per-device arrays of unequal lengths, or lengths that differ
// between ranks where they must agree, throw spmd::Error on every rank.
#include <mpi.h>

#include <cstdint>
#include <span>
#include <string>
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
// The largest value over ranks and the lowest rank that holds it (MPI_MAXLOC).
struct ValueAndRank {
  double value;
  int rank;
};
ValueAndRank allreduce_maxloc(const Context& ctx, double value);
void broadcast_bytes(const Context& ctx, void* data, std::size_t bytes, int root);
// Equal-size all-gather of bytes: out has size()*bytes, rank-major.
void allgather_bytes(const Context& ctx, const void* in, std::size_t bytes, void* out);
// psum: elementwise sum over all devices of all ranks. All per-device spans have one length.
template <class T>
std::vector<Acc<T>> psum(const Context& ctx, const PerDevice<std::span<const T>>& x);

// all_gather: [total_devices][len] flattened, in global device order.
template <class T>
std::vector<T> all_gather(const Context& ctx, const PerDevice<std::span<const T>>& x);

// broadcast: root's data to every rank (in place).
template <class T>
void broadcast(const Context& ctx, std::span<T> data, int root = 0) {
  broadcast_bytes(ctx, data.data(), data.size_bytes(), root);
}
// The length comes from root: the other ranks' vectors are resized to it.
template <class T>
void broadcast(const Context& ctx, std::vector<T>& data, int root = 0);
void broadcast(const Context& ctx, std::string& text, int root = 0);

}  // namespace spmd::runtime
