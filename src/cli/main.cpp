// spmd: the SPMD Kit command-line program. Every rank runs the same command.
//
// How errors end the job: a failure every rank agreed on (bad option, bad input found by
// a collective check) is a CollectiveError: rank 0 prints it and every rank exits 1
// cleanly. A failure on one rank only (an HDF5 read error, a crash in a device thread) is
// printed by that rank, which then calls MPI_Abort so no other rank waits forever.
#include <mpi.h>

#include <malloc.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>
#include <new>
#include <memory>
#include <string>

#include "commands.hpp"
#include "spmd/runtime/io_deadline.hpp"
#include "spmd/backends/backend.hpp"
#include "spmd/runtime/check.hpp"
#include "spmd/runtime/cpu_features.hpp"
#include "spmd/runtime/error.hpp"
#include "spmd/runtime/mpi.hpp"

namespace {

const char* kUsage =
    "usage: spmd <command> [options]   (spmd <command> --help for its options)\n"
    "       spmd --version             (version and the backends compiled in)\n"
    "\n"
    "commands:\n"
    "  info       start-up table: ranks, hosts, node-local ranks, devices, library versions\n"
    "  data       datasets: fashion-mnist (import), make-classification (generate), info FILE\n"
    "  eval       padded full-dataset evaluation, exact on any layout\n"
    "  logreg     data-parallel multiclass logistic regression with L-BFGS\n"
    "  ensemble   CNN ensemble training, one member per device\n"
    "  export     an ensemble checkpoint or logreg weights as an ONNX model\n"
    "  model      ONNX models: info MODEL.onnx (shapes, ops, parameters, FLOPs, what eval expects)\n"
    "\n"
    "Launch with mpirun -np N spmd ... or srun --mpi=pmix spmd ...; every rank runs the same command.\n";

// GNU's --version convention: the first line ends with the version, for scripts; the
// second says which backends this build has (SPMD_VERSION comes from CMake's project VERSION).
std::string version_text() {
  std::string backends;
  for (const auto& name : spmd::backends::compiled_backends()) backends += (backends.empty() ? "" : ", ") + name;
  return "spmd (SPMD Kit) " SPMD_VERSION "\nbackends compiled in: " + backends + "\n";
}

bool is_any_of(const char* arg, std::initializer_list<const char*> names) {
  for (const char* name : names)
    if (!std::strcmp(arg, name)) return true;
  return false;
}

}  // namespace

namespace spmd::cli {
// The first failure of a write to stdout, for the end-of-run check in main (errno is gone by then).
int g_stdout_errno = 0;

void print_root(const std::string& text) {
  if (runtime::world_rank_or_unknown() <= 0) {
    errno = 0;
    if ((std::fputs(text.c_str(), stdout) < 0 || std::fflush(stdout) != 0) && g_stdout_errno == 0)
      g_stdout_errno = errno != 0 ? errno : EIO;
  }
}
}  // namespace spmd::cli

// OpenBLAS (Debian's DYNAMIC_ARCH build) does not recognise every CPU and may fall back to
// its slowest kernels (seen here: "Prescott" SSE3 on a Zen 4 VM, 4-5x slower sgemm). It
// reads OPENBLAS_CORETYPE once, when the library loads, so the only way to set it for
// ourselves is to re-execute with it set, before MPI_Init. A user's own setting wins. Only
// the command that calls OpenBLAS does (make-classification's dgemm; the models run spmd's
// own kernels): a re-execution loads every library twice, ~0.1 s of each run's start.
void pick_blas_kernels(int argc, char** argv) {
  if (argc < 3 || std::strcmp(argv[1], "data") != 0 || std::strcmp(argv[2], "make-classification") != 0) return;
  if (std::getenv("OPENBLAS_CORETYPE") || std::getenv("SPMD_BLAS_REEXEC")) return;
  // SPMD_MAX_CPU_ISA caps OpenBLAS too, so that a capped run is an AVX2 host's run throughout.
  const auto level = spmd::runtime::cpu_level();
  if (level == spmd::runtime::CpuLevel::portable) return;
  const char* core = level == spmd::runtime::CpuLevel::avx512 ? "SkylakeX" : "Haswell";
  setenv("OPENBLAS_CORETYPE", core, 1);
  setenv("SPMD_BLAS_REEXEC", "1", 1);
  // The binary's own path, not /proc/self/exe: the process name (ps, top, pkill, Slurm's
  // accounting) comes from the path executed, and would read "exe".
  char self[4096];
  const ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) return;
  self[len] = '\0';
  execv(self, argv);
  // exec failed: carry on with whatever OpenBLAS chose.
}

int main(int argc, char** argv) {
  // A bad SPMD_MAX_CPU_ISA is refused here, on every rank alike, before any kernel is chosen.
  try {
    spmd::runtime::cpu_level();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "spmd: error: %s\n", e.what());
    return 2;
  }
  pick_blas_kernels(argc, argv);
  // Large buffers come from the heap and stay there when freed, so a buffer allocated
  // again (the next run of a benchmark, the next epoch) does not page-fault again: page
  // faults are expensive in the VMs this runs on.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  std::unique_ptr<spmd::runtime::Mpi> mpi;
  try {
    mpi = std::make_unique<spmd::runtime::Mpi>(&argc, &argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "spmd: error: %s\n", e.what());
    return 1;
  }
  const int rank = mpi->rank();
  // No command is a request for the list of commands (a first contact), not an error.
  if (argc < 2 || is_any_of(argv[1], {"--help", "-h"})) {
    if (rank == 0) std::fputs(kUsage, stdout);
    return 0;
  }
  if (is_any_of(argv[1], {"--version", "-V"})) {
    if (rank == 0) std::fputs(version_text().c_str(), stdout);
    return 0;
  }
  const std::string command = argv[1];
  const std::map<std::string, int (*)(const spmd::cli::Args&)> commands = {
      {"info", spmd::cli::cmd_info},     {"data", spmd::cli::cmd_data},
      {"eval", spmd::cli::cmd_eval},     {"logreg", spmd::cli::cmd_logreg},
      {"ensemble", spmd::cli::cmd_ensemble},  {"export", spmd::cli::cmd_export},
      {"model", spmd::cli::cmd_model}};
  const auto it = commands.find(command);
  if (it == commands.end()) {
    if (rank == 0) std::fprintf(stderr, "spmd: error: unknown command '%s'\n\n%s", command.c_str(), kUsage);
    return 2;
  }
  spmd::cli::Args args(argv + 2, argv + argc);
  try {
    const int rc = it->second(args);
    // The report on stdout is the run's result for a user or a script (`spmd eval > log`): a
    // stdout that could not take it (a full disk, /dev/full, a closed pipe) is a failed run.
    errno = 0;
    const bool flush_failed = std::fflush(stdout) != 0;
    const int err = spmd::cli::g_stdout_errno != 0 ? spmd::cli::g_stdout_errno : errno;
    if ((flush_failed || std::ferror(stdout)) && rc == 0) {
      std::fprintf(stderr, "spmd %s: error on rank %d: writing standard output failed (%s): its report is incomplete\n",
                   command.c_str(), rank, std::strerror(err != 0 ? err : EIO));
      return 1;
    }
    return rc;
  } catch (const spmd::CollectiveError& e) {
    if (rank == 0) std::fprintf(stderr, "spmd %s: error: %s\n", command.c_str(), e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    // Past the start-up estimate (memory taken by other jobs since, or a need it does not
    // model): say where, and what to change, instead of a bare std::bad_alloc.
    std::fprintf(stderr,
                 "spmd %s: error on rank %d: out of memory during '%s': an allocation failed although the start-up "
                 "estimate fitted (another process may have taken the memory since). Give each rank fewer rows (more "
                 "ranks or nodes), a smaller --per-device-batch / --batch-size, or a larger memory limit (ulimit -v, the "
                 "job's --mem); 'spmd eval --dry-run' prints the estimate\n",
                 command.c_str(), rank, spmd::runtime::io_phase().c_str());
    std::fflush(stderr);
    spmd::runtime::abort_job(1);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "spmd %s: error on rank %d: %s\n", command.c_str(), rank, e.what());
    std::fflush(stderr);
    spmd::runtime::abort_job(1);
  }
}
