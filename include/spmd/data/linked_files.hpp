#pragma once
// The files other than itself that an HDF5 dataset makes HDF5 read: the targets of external
// links on the way to it, its external raw files (h5py's external=), and the sources of a
// virtual dataset (h5py's VirtualLayout). A data file is untrusted input: one made elsewhere
// can point at /etc/passwd as "image bytes", at a file missing here (HDF5 then reads the
// fill value and the run reports an accuracy over zeros), or at itself (HDF5 recurses until
// the stack overflows). So before a read, every such file is resolved (symbolic links too)
// and must lie inside the data file's own folder (raw files: or under HDF5_EXTFILE_PREFIX,
// where the user said they are), unless --allow-outside-files; a missing
// virtual source, or a virtual dataset that is (through others) its own source, is refused;
// so is a linked file that is an output of the run (with or without the option): the run
// would replace what it reads, or read what an earlier run wrote as if it were data.
#include <hdf5.h>

#include <string>
#include <vector>

#include "spmd/data/external_files.hpp"
#include "spmd/data/output_targets.hpp"

namespace spmd::data {

// Set once per process from --allow-outside-files (every command's common option).
void set_outside_files_allowed(bool allowed);
bool outside_files_allowed();
// Set once per process from the command's outputs (every --predictions, --json, ...).
void set_run_outputs(std::vector<FileArgument> outputs);

// Throws spmd::Error naming the data file, the dataset and its role, the file it leads to and
// why it is refused. file_path: the data file as it was opened; name: the dataset as reached
// from its root; external: find_external_files' answer for it.
void check_linked_files(hid_t file, const std::string& file_path, const std::string& name, const std::string& role,
                        hid_t dataset, const ExternalFiles& external);

}  // namespace spmd::data
