#pragma once
// MPI lifetime. One Mpi object per process, created first in main (the CLI and the test
// main). It asks for MPI_THREAD_MULTIPLE because the hang watchdog's thread talks MPI while
// the main thread may be blocked in a collective; device worker threads never call MPI.
#include <mpi.h>

namespace spmd::runtime {

class Mpi {
 public:
  Mpi(int* argc, char*** argv);
  ~Mpi();
  Mpi(const Mpi&) = delete;
  Mpi& operator=(const Mpi&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  bool owns_ = false;
  int rank_ = 0;
  int size_ = 1;
};

// The ranks of comm on this node (MPI_COMM_TYPE_SHARED), for the life of the object.
// Collective over comm when made and when destroyed. Checks that touch the file system run
// on the node's rank 0 only: once per node rather than once per rank (thousands of ranks
// stat-ing one path at once load a parallel file system's metadata server for nothing), yet
// still on every node, where a path may be visible on some nodes only.
class NodeComm {
 public:
  explicit NodeComm(MPI_Comm comm);
  ~NodeComm();
  NodeComm(const NodeComm&) = delete;
  NodeComm& operator=(const NodeComm&) = delete;
  MPI_Comm comm() const { return node_; }
  int rank() const { return rank_; }

 private:
  MPI_Comm node_ = MPI_COMM_NULL;
  int rank_ = 0;
};

// Ends the whole job: MPI_Abort on MPI_COMM_WORLD with `code`, and this process's own exit
// (std::_Exit(code)) no later than 10 s after, even when the abort never completes. It may
// not: with a node lost, mpirun's teardown waits on that node's daemon and Slurm's on its
// slurmstepd, and a rank that lingered there would hold its node's resources.
[[noreturn]] void abort_job(int code);

}  // namespace spmd::runtime
