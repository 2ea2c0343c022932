#pragma once
// How an HDF5 dataset is stored, as users' files have it (h5py: chunked, gzip, lzf, shuffle,
// fletcher32, compact, virtual datasets), and whether this program can read it. Checked up
// front, before any collective read, so that a filter the library lacks is named with its
// fix instead of surfacing as "H5Dread ... can't read data".
#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

namespace spmd::data {

struct FilterInfo {
  int id = 0;            // H5Z_filter_t: 1 deflate (gzip), 2 shuffle, 3 fletcher32, 32000 lzf, ...
  std::string name;      // the name stored in the file, or the registry name for known ids
  bool available = false;  // this HDF5 can decode it now (built in, or a plugin it found)
};

struct StorageInfo {
  std::string layout;               // "contiguous", "chunked", "compact" or "virtual"
  std::vector<std::int64_t> chunk;  // chunk dims when chunked, else {}
  std::vector<FilterInfo> filters;  // in pipeline order
  // Chunked only: chunks the extent spans, and those written (h5py leaves the others
  // unallocated when only part of a dataset was assigned). Reading an unwritten chunk gives
  // the fill value, which is defined unless the file says never to fill (fills_unwritten).
  std::int64_t chunks_total = 0;
  std::int64_t chunks_written = 0;
  bool fills_unwritten = true;
  double fill_value = 0;  // the value unwritten chunks read as (numeric types; 0 by default)
  bool is_virtual() const { return layout == "virtual"; }
  bool partly_written() const { return chunks_written < chunks_total; }
};

StorageInfo dataset_storage(hid_t dataset);

// Throws spmd::Error naming the file, the dataset (with its role: "features", "labels") and
// every filter this HDF5 cannot decode, with the two fixes: the filter's plugin on
// HDF5_PLUGIN_PATH, or a copy without it (h5repack).
void require_decodable(const StorageInfo& storage, const std::string& path, const std::string& role,
                       const std::string& name);

// Throws spmd::Error naming the file and the dataset when chunks were never written and the
// file does not define what reading them gives (fill time never, or no fill value).
void require_defined_values(const StorageInfo& storage, const std::string& path, const std::string& role,
                            const std::string& name);

}  // namespace spmd::data
