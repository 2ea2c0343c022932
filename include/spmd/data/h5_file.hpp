#pragma once
// Opening HDF5 files for reading, and looking at what they hold.
//
// Two ways to open:
//  - parallel (open_file_parallel): MPI-IO over the context's communicator, for the
//    workloads; every rank then reads its own hyperslab with collective transfers.
//  - serial (open_file_serial): one process, HDF5's POSIX driver. No communicator is
//    involved, so tools (`spmd data info`, the converters, checkpoint readers) can use it
//    on any single rank; it is what a one-process MPI_COMM_SELF open would give, without
//    the MPI-IO layer in between.
//
// Messages name the file and what the caller wanted from it (`what`, e.g.
// "features 'images' and labels 'labels'"), so that an error says which input was wrong.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "spmd/data/element_type.hpp"
#include "spmd/data/h5_handle.hpp"

namespace spmd::runtime {
class Context;
}

namespace spmd::data {

// What path is when it is not a regular file nor missing: "directory", "FIFO (named pipe)",
// "socket", "character device", "block device", "symbolic link loop"; "" otherwise. Never
// opens the path (opening a FIFO blocks until a writer comes).
std::string special_file_kind(const std::string& path);

// The input of --option: throws spmd::Error naming it unless path is a regular file this
// process can open (a FIFO or device is refused without being opened: that would block).
void require_readable_file(const std::string& option, const std::string& path);

// Read-only, this process only. Throws spmd::Error unless path is an existing, readable,
// regular HDF5 file.
H5File open_file_serial(const std::string& path, const std::string& what);

// The same for a file this run has already checked (open_file_parallel checks once per
// node): opens without checking again, so that the ranks of a node reading it each on its
// own (streamed rows, virtual datasets) do not all stat it again. A failed open still
// throws spmd::Error naming the file.
H5File open_checked_file_serial(const std::string& path, const std::string& what);

// Read-only with MPI-IO over ctx.comm(). Collective: every rank checks the file first,
// and if any rank cannot use it, every rank throws the same spmd::CollectiveError.
H5File open_file_parallel(const runtime::Context& ctx, const std::string& path, const std::string& what);

// File access through MPI-IO over ctx.comm(), its metadata read by one rank and broadcast
// (every rank makes the same metadata calls on the file, which the callers here do).
H5PropList mpio_file_access(const runtime::Context& ctx, const char* hint);

// A transfer property list asking for collective MPI-IO transfers.
H5PropList collective_transfer(const char* hint);

// Every dataset in the file, recursively, as absolute names ("/images", "/g/x"), sorted:
// those reached by hard links, and those that soft and external links lead to (a dataset, or
// a group's datasets) not reached already, under the link's name.
std::vector<std::string> list_datasets(hid_t file);

// The soft and external links that lead to no object (the file or the object is missing).
struct BrokenLink {
  std::string name;    // "/x"
  std::string target;  // "external link to '/raw/x' in 'gone.h5'"
};
std::vector<BrokenLink> broken_links(hid_t file);

// True when `name` (absolute or relative to the root, may contain groups) is a dataset.
bool dataset_exists(hid_t file, const std::string& name);

// Opens dataset `name`. When it is missing, throws spmd::Error naming the file, the
// dataset and its role ("features", "labels", ...) and listing the datasets that exist.
// A dataset whose values are in external raw files is opened to read them where they are
// (external_files.hpp: the working directory, else beside the file); with
// ExternalCheck::require, one of them missing or shorter than its part of the values throws
// spmd::Error naming each and where it was looked for.
enum class ExternalCheck { require, describe_only };
H5Dataset open_dataset(hid_t file, const std::string& file_path, const std::string& name, const std::string& role,
                       ExternalCheck check = ExternalCheck::require);

// The dataset's dimensions (its dataspace extent); {} for a scalar.
std::vector<std::int64_t> dataset_dims(hid_t dataset);

// Elements of a dataset of dims (1 for a scalar).
std::uint64_t element_count(const std::vector<std::int64_t>& dims);

// The integer type of a label column's values: an integer type, or an HDF5 enum over one
// (h5py stores numpy bools as {FALSE = 0, TRUE = 1} over int8, and categorical labels as
// enums too), read as its base integers; nullopt for anything else. is_enum: whether
// hdf5_type is an enum, whatever its base.
std::optional<ElementType> label_type_of(hid_t hdf5_type, bool& is_enum);

// [N] or [N, 1]: a label column (sklearn and pandas often leave labels as [N, 1]).
bool is_column(const std::vector<std::int64_t>& dims);

// "[60000, 28, 28, 1]"
std::string format_shape(const std::vector<std::int64_t>& dims);

}  // namespace spmd::data
