#include "spmd/data/storage.hpp"

#include <algorithm>

#include "spmd/data/h5_file.hpp"
#include "spmd/data/h5_handle.hpp"
#include "spmd/runtime/check.hpp"

namespace spmd::data {
namespace {

// The registered ids users meet most (The HDF Group's filter registry) and what installs
// each on Debian 12.
struct KnownFilter {
  int id;
  const char* name;
  const char* plugin;  // Debian package providing the plugin, or nullptr
};
constexpr KnownFilter kKnownFilters[] = {
    {1, "gzip", nullptr},        {2, "shuffle", nullptr},  {3, "fletcher32", nullptr},
    {4, "szip", nullptr},        {5, "nbit", nullptr},     {6, "scaleoffset", nullptr},
    {307, "bzip2", "hdf5-filter-plugin"},
    {32000, "lzf", "hdf5-plugin-lzf"},
    {32001, "blosc", "hdf5-filter-plugin-blosc-serial"},
    {32004, "lz4", "hdf5-filter-plugin"},
    {32008, "bitshuffle", "hdf5-filter-plugin"},
    {32015, "zstd", nullptr},
};

const KnownFilter* known_filter(int id) {
  const auto it = std::find_if(std::begin(kKnownFilters), std::end(kKnownFilters), [&](const auto& f) { return f.id == id; });
  return it == std::end(kKnownFilters) ? nullptr : it;
}

// Chunks spanned by the extent and chunks written, and whether reading the others is defined.
void count_chunks(hid_t dataset, hid_t dcpl, StorageInfo& info) {
  const char* hint = "counting a chunked dataset's written chunks";
  H5Dataspace space(SPMD_CHECK_HDF5(H5Dget_space(dataset), hint));
  hsize_t extent[H5S_MAX_RANK];
  const int rank = SPMD_CHECK_HDF5(H5Sget_simple_extent_dims(space.get(), extent, nullptr), hint);
  info.chunks_total = 1;
  for (int i = 0; i < rank && i < static_cast<int>(info.chunk.size()); ++i) {
    const auto c = static_cast<hsize_t>(info.chunk[static_cast<std::size_t>(i)]);
    info.chunks_total *= static_cast<std::int64_t>((extent[i] + c - 1) / c);
  }
  hsize_t written = 0;
  SPMD_CHECK_HDF5(H5Dget_num_chunks(dataset, space.get(), &written), hint);
  info.chunks_written = static_cast<std::int64_t>(written);
  // HDF5 skips unwritten chunks on a read (the buffer keeps whatever it held) when it is
  // told never to fill, or has no fill value to fill with.
  H5D_fill_time_t when = H5D_FILL_TIME_IFSET;
  H5D_fill_value_t value = H5D_FILL_VALUE_DEFAULT;
  SPMD_CHECK_HDF5(H5Pget_fill_time(dcpl, &when), hint);
  SPMD_CHECK_HDF5(H5Pfill_value_defined(dcpl, &value), hint);
  info.fills_unwritten = when != H5D_FILL_TIME_NEVER && value != H5D_FILL_VALUE_UNDEFINED;
  if (info.fills_unwritten && H5Pget_fill_value(dcpl, H5T_NATIVE_DOUBLE, &info.fill_value) < 0) {
    H5Eclear2(H5E_DEFAULT);  // not a number (strings, compounds): nothing to show
    info.fill_value = 0;
  }
}

}  // namespace

StorageInfo dataset_storage(hid_t dataset) {
  const char* hint = "reading a dataset's storage properties";
  H5PropList dcpl(SPMD_CHECK_HDF5(H5Dget_create_plist(dataset), hint));
  StorageInfo info;
  switch (H5Pget_layout(dcpl.get())) {
    case H5D_COMPACT: info.layout = "compact"; break;
    case H5D_CONTIGUOUS: info.layout = "contiguous"; break;
    case H5D_CHUNKED: info.layout = "chunked"; break;
    case H5D_VIRTUAL: info.layout = "virtual"; break;
    default: info.layout = "unknown"; break;
  }
  if (info.layout == "chunked") {
    hsize_t dims[H5S_MAX_RANK];
    const int rank = SPMD_CHECK_HDF5(H5Pget_chunk(dcpl.get(), H5S_MAX_RANK, dims), hint);
    for (int i = 0; i < rank; ++i) info.chunk.push_back(static_cast<std::int64_t>(dims[i]));
    count_chunks(dataset, dcpl.get(), info);
  }
  const int n = SPMD_CHECK_HDF5(H5Pget_nfilters(dcpl.get()), hint);
  for (int i = 0; i < n; ++i) {
    unsigned flags = 0, config = 0;
    std::size_t cd_count = 0;
    char name[256] = {0};
    const H5Z_filter_t id =
        SPMD_CHECK_HDF5(H5Pget_filter2(dcpl.get(), static_cast<unsigned>(i), &flags, &cd_count, nullptr, sizeof name,
                                       name, &config),
                        hint);
    FilterInfo f;
    f.id = static_cast<int>(id);
    const KnownFilter* known = known_filter(f.id);
    f.name = known ? known->name : (name[0] ? name : "filter " + std::to_string(f.id));
    // H5Zfilter_avail also tries to load a plugin from HDF5_PLUGIN_PATH (or the default
    // plugin folder): true here means the read will find the filter.
    const htri_t avail = H5Zfilter_avail(id);
    f.available = avail > 0;
    info.filters.push_back(std::move(f));
  }
  return info;
}

void require_decodable(const StorageInfo& storage, const std::string& path, const std::string& role,
                       const std::string& name) {
  for (const auto& f : storage.filters) {
    if (f.available) continue;
    const KnownFilter* known = known_filter(f.id);
    std::string fix = "either install the filter's plugin (";
    fix += known && known->plugin ? std::string("Debian: apt-get install ") + known->plugin + ", which puts it in " : "into ";
    fix += "HDF5's plugin folder /usr/lib/x86_64-linux-gnu/hdf5/openmpi/plugins, or anywhere with HDF5_PLUGIN_PATH "
           "set to that folder), or rewrite the file without the filter: h5repack -f NONE " + path +
           " copy.h5 (or -f GZIP=4, which every HDF5 reads; h5py: compression='gzip')";
    throw Error("'" + path + "': " + role + " dataset '" + name + "' is compressed with the HDF5 filter '" + f.name +
                "' (id " + std::to_string(f.id) + "), which this HDF5 library cannot decode: " + fix);
  }
}

void require_defined_values(const StorageInfo& storage, const std::string& path, const std::string& role,
                            const std::string& name) {
  if (!storage.partly_written() || storage.fills_unwritten) return;
  throw Error("'" + path + "': " + role + " dataset '" + name + "' has " +
              std::to_string(storage.chunks_total - storage.chunks_written) + " of its " +
              std::to_string(storage.chunks_total) +
              " chunks never written, and the file says not to fill them (fill time never, or no fill value), so "
              "HDF5 gives no values for those rows: write every row, or recreate the dataset with a fill value "
              "(h5py: create_dataset(..., fillvalue=0), the default)");
}

}  // namespace spmd::data
