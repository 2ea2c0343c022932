#pragma once
// What a run may write to, checked before any work. A run destroys a user's file when an
// output is one of its inputs (--predictions x.h5 --data x.h5: exit 0, data gone), when two
// of its outputs are one file (one lost under the other), or when the rename that publishes
// an output replaces a device or FIFO with a regular file (as root, --json /dev/null would
// replace the node's /dev/null). And a name that is too long for a layer below fails only
// after the work (the temporary's name over NAME_MAX), or crashes (Open MPI 4.1's MPI-IO
// copies NAME".locktest."RANK into a 256-byte buffer: `*** buffer overflow detected ***`).
//
// Files are compared by device and inode where they exist (symbolic links, hard links,
// "./x" and "x" are all one file), by their resolved absolute path otherwise.
// No MPI: the caller agrees on the outcome.
#include <cstddef>
#include <string>
#include <vector>

namespace spmd::data {

struct FileArgument {
  std::string option;  // the option's name, without "--"
  std::string path;
  // Opened through MPI-IO by every rank (collective HDF5 outputs, parallel reads), whose
  // name limit is below the file system's.
  bool mpi_io = false;
};

// The longest name MPI-IO may be given when `ranks` processes open it: Open MPI 4.1's
// sharedfp/lockedfile formats NAME".locktest."RANK into char[256] at every open.
std::size_t mpi_io_path_limit(int ranks);

// Throws spmd::Error, naming the option(s) and the file, when an output:
//  - is a directory, a device, a FIFO or a socket (also through a symbolic link);
//  - is the same file as an input of another option (an option that is both, such as
//    ensemble --checkpoint with --resume, is listed in both and not compared with itself);
//  - is the same file as another output;
//  - has a name too long for what will be made of it: its temporary `.NAME.tmp.PID` and
//    lock `.NAME.lock` within NAME_MAX, its absolute path within PATH_MAX, and, for
//    mpi_io files, the temporary's path within mpi_io_path_limit(ranks).
// Inputs with mpi_io are held to mpi_io_path_limit(ranks) too.
void require_safe_outputs(const std::vector<FileArgument>& inputs, const std::vector<FileArgument>& outputs, int ranks);

}  // namespace spmd::data
