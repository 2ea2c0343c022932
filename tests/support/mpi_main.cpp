// GoogleTest main for every SPMD Kit test binary. MPI is initialised here (a singleton
// MPI_Init when the binary is started without mpiexec). Rank 0 prints the usual gtest
// report; other ranks print only their failures, prefixed with the rank, so that a failing
// rank is named. The exit code is the maximum over ranks.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <iostream>

#include "spmd/runtime/mpi.hpp"

namespace {

class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_,
                 result.file_name() ? result.file_name() : "?", result.line_number(),
                 result.summary());
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (info.result()->Failed())
      std::fprintf(stderr, "[rank %d] FAILED %s.%s\n", rank_, info.test_suite_name(), info.name());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  spmd::runtime::Mpi mpi(&argc, &argv);
  const int rank = mpi.rank();
  if (rank != 0) {
    std::freopen("/dev/null", "w", stdout);
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(rank));
  }
  int result = RUN_ALL_TESTS();
  int any = 0;
  MPI_Allreduce(&result, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return any;
}
