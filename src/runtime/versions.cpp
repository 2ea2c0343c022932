#include "spmd/runtime/versions.hpp"

#include <hdf5.h>
#include <mpi.h>

#include <nlohmann/json.hpp>


extern "C" char* openblas_get_config(void);

namespace spmd::runtime {

std::vector<std::pair<std::string, std::string>> library_versions() {
  std::vector<std::pair<std::string, std::string>> v;
  v.emplace_back("spmd", SPMD_VERSION);
  char mpi[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int len = 0;
  MPI_Get_library_version(mpi, &len);
  std::string mpi_text(mpi, static_cast<size_t>(len));
  if (auto nl = mpi_text.find_first_of(",\n"); nl != std::string::npos) mpi_text.resize(nl);
  v.emplace_back("mpi", mpi_text);
  unsigned maj = 0, min = 0, rel = 0;
  H5get_libversion(&maj, &min, &rel);
  v.emplace_back("hdf5", std::to_string(maj) + "." + std::to_string(min) + "." + std::to_string(rel) + " (parallel)");
  v.emplace_back("blas", openblas_get_config());
  v.emplace_back("json", std::to_string(NLOHMANN_JSON_VERSION_MAJOR) + "." + std::to_string(NLOHMANN_JSON_VERSION_MINOR) +
                             "." + std::to_string(NLOHMANN_JSON_VERSION_PATCH));
  return v;
}

}  // namespace spmd::runtime
