#include "row_read.hpp"

#include <vector>

#include "spmd/runtime/check.hpp"
#include "spmd/runtime/context.hpp"
#include "spmd/runtime/watchdog.hpp"

namespace spmd::data {

H5Dataspace select_rows(hid_t file_space, std::int64_t row0, std::int64_t rows, const char* hint) {
  if (rows <= 0) {
    SPMD_CHECK_HDF5(H5Sselect_none(file_space), hint);
    const hsize_t one = 1;
    H5Dataspace mem_space(SPMD_CHECK_HDF5(H5Screate_simple(1, &one, nullptr), hint));
    SPMD_CHECK_HDF5(H5Sselect_none(mem_space.get()), hint);
    return mem_space;
  }
  const int rank = SPMD_CHECK_HDF5(H5Sget_simple_extent_ndims(file_space), hint);
  std::vector<hsize_t> count(static_cast<std::size_t>(rank)), start(count.size(), 0);
  SPMD_CHECK_HDF5(H5Sget_simple_extent_dims(file_space, count.data(), nullptr), hint);
  start[0] = static_cast<hsize_t>(row0);
  count[0] = static_cast<hsize_t>(rows);
  SPMD_CHECK_HDF5(H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr), hint);
  return H5Dataspace(SPMD_CHECK_HDF5(H5Screate_simple(rank, count.data(), nullptr), hint));
}

std::string rank_prefix(const runtime::Context& ctx) { return "rank " + std::to_string(ctx.rank()) + ": "; }

std::string with_rank(const runtime::Context& ctx, const std::string& message) {
  const std::string prefix = rank_prefix(ctx);
  return message.rfind(prefix, 0) == 0 ? message : prefix + message;
}

void read_rows(const runtime::Context& ctx, hid_t dataset, hid_t mem_type, hid_t xfer, std::int64_t row0,
               std::int64_t rows, void* buffer) {
  const char* hint = "collective hyperslab read (every rank must reach this read)";
  H5Dataspace file_space(SPMD_CHECK_HDF5(H5Dget_space(dataset), hint));
  const H5Dataspace mem_space = select_rows(file_space.get(), row0, rows, hint);
  unsigned char nothing = 0;
  runtime::Watchdog::Armed armed(ctx.watchdog(), "H5Dread (MPI-IO, collective)");
  SPMD_CHECK_HDF5(H5Dread(dataset, mem_type, mem_space.get(), file_space.get(), xfer, rows > 0 ? buffer : &nothing),
                  hint);
}

}  // namespace spmd::data
