#include "spmd/runtime/mpi.hpp"

#include <hdf5.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "spmd/runtime/check.hpp"

namespace spmd::runtime {

NodeComm::NodeComm(MPI_Comm comm) {
  int rank = 0;
  SPMD_CHECK_MPI(MPI_Comm_rank(comm, &rank), "");
  SPMD_CHECK_MPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node_),
                 "splitting the communicator by node");
  SPMD_CHECK_MPI(MPI_Comm_rank(node_, &rank_), "");
}

NodeComm::~NodeComm() {
  if (node_ != MPI_COMM_NULL) MPI_Comm_free(&node_);
}

void abort_job(int code) {
  std::thread([code] {
    std::this_thread::sleep_for(std::chrono::seconds(10));
    std::_Exit(code);
  }).detach();
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

Mpi::Mpi(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = MPI_THREAD_SINGLE;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
      throw Error("MPI_Init_thread failed: is this binary launched by a matching mpirun/srun --mpi=pmix?");
    owns_ = true;
  }
  // Errors come back as codes, so that SPMD_CHECK_MPI can name the call and the rank.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  // HDF5 would print its error stack on every rank; the checks report it once, with context.
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

Mpi::~Mpi() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owns_ && !finalized) MPI_Finalize();
}

}  // namespace spmd::runtime
