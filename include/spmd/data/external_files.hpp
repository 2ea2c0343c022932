#pragma once
// Datasets whose values live in raw files of their own (HDF5's external storage; h5py's
// create_dataset(..., external=[("x.bin", 0, h5py.h5f.UNLIMITED)])). The names are usually
// relative, and HDF5 1.10 looks for them relative to the working directory: run from another
// folder, a read fails with "can't read data"; a raw file shorter than the dataset reads
// its missing bytes as zeros, without an error. Both are found here, before any read.
#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "spmd/data/h5_handle.hpp"

namespace spmd::data {

struct ExternalFile {
  std::string name;         // as the dataset stores it
  std::int64_t offset = 0;  // where its bytes start in the raw file
  std::int64_t needed = 0;  // bytes of the dataset it holds (0: none, it comes after the end)
  std::string path;         // where it was looked for under the rule taken
  std::int64_t bytes = -1;  // the raw file's size there; -1 when it is not there
  bool complete() const { return needed == 0 || bytes >= offset + needed; }
};

struct ExternalFiles {
  std::vector<ExternalFile> files;  // empty: the values are in the HDF5 file
  // The rule the files were found (or last looked for) under: "" is HDF5's own (the working
  // directory, or HDF5_EXTFILE_PREFIX when set), "${ORIGIN}" the HDF5 file's folder.
  std::string prefix;
  std::string where;  // that rule in words, for messages
  bool complete() const;
  // Every missing or short file with where it was looked for; "" when complete.
  std::string problems() const;
};

// The dataset's external files, looked for as HDF5 does (HDF5_EXTFILE_PREFIX when set, else
// the working directory) and, when some are not all there, beside the HDF5 file: the first
// rule under which every file holds its bytes is taken (open the dataset with its prefix:
// external_access). file_path is the HDF5 file as it was opened.
ExternalFiles find_external_files(hid_t dataset, const std::string& file_path);

// The dataset access property list that finds the files under files.prefix.
H5PropList external_access(const ExternalFiles& files);

}  // namespace spmd::data
