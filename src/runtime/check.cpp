#include "spmd/runtime/check.hpp"

#include <hdf5.h>

#include <cstring>
#include <sstream>

namespace spmd::runtime {

int world_rank_or_unknown() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return -1;
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

std::string rank_tag() {
  const int r = world_rank_or_unknown();
  return r < 0 ? std::string("rank ?") : "rank " + std::to_string(r);
}

void throw_call_error(const char* domain, const char* call, const char* file, int line,
                      const std::string& detail, const char* hint) {
  // Keep the path short: the part from src/ or include/ on.
  const char* shown = file;
  for (const char* key : {"/src/", "/include/", "/tests/", "/tools/"})
    if (const char* p = std::strstr(file, key)) {
      shown = p + 1;
      break;
    }
  std::ostringstream os;
  os << rank_tag() << ": " << domain << " call failed: " << call << " at " << shown << ":" << line;
  if (!detail.empty()) os << ": " << detail;
  if (hint && *hint) os << "\n  hint: " << hint;
  throw Error(os.str());
}

void throw_mpi_error(int code, const char* call, const char* file, int line, const char* hint) {
  char text[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) std::snprintf(text, sizeof text, "MPI error %d", code);
  throw_call_error("MPI", call, file, line, text, hint);
}

namespace {
herr_t collect_hdf5_message(unsigned n, const H5E_error2_t* err, void* client) {
  auto* out = static_cast<std::string*>(client);
  // The innermost entry (n == 0) says what went wrong; the next one says where.
  if (n < 2 && err && err->desc) {
    if (!out->empty()) out->append("; ");
    out->append(err->desc);
  }
  return 0;
}
}  // namespace

void throw_hdf5_error(const char* call, const char* file, int line, const char* hint) {
  std::string detail;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect_hdf5_message, &detail);
  H5Eclear2(H5E_DEFAULT);
  throw_call_error("HDF5", call, file, line, detail, hint);
}

}  // namespace spmd::runtime
