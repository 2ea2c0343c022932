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

namespace {
// Started without a launcher (no mpirun, srun or PMI in the environment), one process has
// no peer to reach, yet Open MPI probes UCX for its point-to-point layer: 0.2 s of every such
// run on the 2-vCPU VMs (MPI_Init 0.29 s -> 0.10 s on ob1). A user's own setting wins. (Its
// isolated singleton mode would also skip the helper daemon, but concurrent isolated
// singletons share one session directory and break each other's MPI-IO files: seen here.)
void singleton_on_ob1() {
  for (const char* launcher : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "SLURM_PROCID"})
    if (std::getenv(launcher) != nullptr) return;
  setenv("OMPI_MCA_pml", "ob1", 0);
}
}  // namespace

Mpi::Mpi(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    singleton_on_ob1();
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
