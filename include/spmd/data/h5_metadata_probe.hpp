#pragma once
// A damaged or hostile HDF5 file can crash the HDF5 library itself (Debian's 1.10: a virtual
// dataset's selection overflowing a buffer, a global-heap string read past its end; found by
// tools/fuzz/fuzz_h5_file), which no check of spmd's can stop once the rank has called it. So
// before any rank opens an input, the node's first rank has a child process (fork, no MPI)
// walk what spmd may read of it: every object's header, every dataset's type, space and
// layout (a virtual dataset's mappings), every attribute's value, each dataset's first values
// (through its filters) and small string datasets whole. If the child dies or does not finish,
// the run is refused naming the file, and no rank has touched it.
#include <string>

namespace spmd::data {

// Returns when `path` is not an HDF5 file, or when the walk finished (whatever HDF5 errors it
// met: the run's own reads name those). Throws spmd::Error naming the file and the signal or
// exit status when the child did not survive, or when it ran past `seconds`.
void require_hdf5_walk_survives(const std::string& path, double seconds = 60);

}  // namespace spmd::data
