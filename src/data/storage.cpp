#include "spmd/data/storage.hpp"

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
  for (const auto& f : kKnownFilters)
    if (f.id == id) return &f;
  return nullptr;
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

std::string describe_filters(const std::vector<FilterInfo>& filters) {
  if (filters.empty()) return "none";
  std::string text;
  for (const auto& f : filters) {
    if (!text.empty()) text += ", ";
    text += f.name;
    if (!f.available) text += " (not available)";
  }
  return text;
}

}  // namespace spmd::data
