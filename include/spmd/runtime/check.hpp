#pragma once
// Check macros: every failing library call becomes an spmd::Error whose message names the
// rank, the call as written, file:line, the library's own description and a hint.
//   SPMD_CHECK_MPI(MPI_Allreduce(...), "hint");
//   hid_t f = SPMD_CHECK_HDF5(H5Fopen(...), "hint");   // yields the call's value
// CUDA and cuBLAS checks live in backends/cuda/check.hpp (only in the CUDA module).
#include <mpi.h>

#include <string>

#include "spmd/runtime/error.hpp"

namespace spmd::runtime {

// World rank, or -1 before MPI_Init / after MPI_Finalize. Safe to call anywhere.
int world_rank_or_unknown();
// "rank 3" or "rank ?" for messages.
std::string rank_tag();

[[noreturn]] void throw_call_error(const char* domain, const char* call, const char* file, int line,
                                   const std::string& detail, const char* hint);
[[noreturn]] void throw_mpi_error(int code, const char* call, const char* file, int line, const char* hint);
// Reads HDF5's own error stack for the detail.
[[noreturn]] void throw_hdf5_error(const char* call, const char* file, int line, const char* hint);

}  // namespace spmd::runtime

#define SPMD_CHECK_MPI(call, hint)                                                      \
  do {                                                                                  \
    const int spmd_mpi_rc_ = (call);                                                    \
    if (spmd_mpi_rc_ != MPI_SUCCESS)                                                    \
      ::spmd::runtime::throw_mpi_error(spmd_mpi_rc_, #call, __FILE__, __LINE__, hint);  \
  } while (0)

// HDF5 returns negative values (hid_t, herr_t, htri_t, hssize_t) on failure.
#define SPMD_CHECK_HDF5(call, hint)                                                     \
  ([&]() {                                                                              \
    auto spmd_h5_value_ = (call);                                                       \
    if (spmd_h5_value_ < 0) ::spmd::runtime::throw_hdf5_error(#call, __FILE__, __LINE__, hint); \
    return spmd_h5_value_;                                                              \
  }())

// Validation of user input: throws spmd::Error(message) when cond is false.
#define SPMD_REQUIRE(cond, message)                              \
  do {                                                           \
    if (!(cond)) throw ::spmd::Error(message);                   \
  } while (0)
