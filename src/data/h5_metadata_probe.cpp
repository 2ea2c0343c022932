#include "spmd/data/h5_metadata_probe.hpp"

#include <hdf5.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "spmd/runtime/error.hpp"

namespace spmd::data {
namespace {

constexpr hsize_t kMaxBytesRead = 1 << 20;  // per attribute or dataset read by the walk

// Reads `count` elements of `type` from `read` into memory of the type's native form, and
// gives back what HDF5 allocated for variable-length values.
template <class Read>
void read_native(hid_t type, hid_t memory_space, hsize_t count, const Read& read) {
  const hid_t native = H5Tget_native_type(type, H5T_DIR_DEFAULT);
  if (native < 0) return;
  const std::size_t size = H5Tget_size(native);
  if (size > 0 && count <= kMaxBytesRead / size) {
    std::vector<unsigned char> buffer(std::max<std::size_t>(1, size * count));
    if (read(native, buffer.data()) >= 0 && (H5Tdetect_class(native, H5T_VLEN) > 0 || H5Tis_variable_str(native) > 0))
      H5Dvlen_reclaim(native, memory_space, H5P_DEFAULT, buffer.data());
  }
  H5Tclose(native);
}

herr_t visit_attribute(hid_t location, const char* name, const H5A_info_t*, void*) {
  const hid_t attribute = H5Aopen(location, name, H5P_DEFAULT);
  if (attribute < 0) return 0;
  const hid_t type = H5Aget_type(attribute), space = H5Aget_space(attribute);
  if (type >= 0 && space >= 0) {
    const hssize_t n = H5Sget_simple_extent_npoints(space);
    if (n >= 0) read_native(type, space, static_cast<hsize_t>(n), [&](hid_t t, void* b) { return H5Aread(attribute, t, b); });
  }
  if (space >= 0) H5Sclose(space);
  if (type >= 0) H5Tclose(type);
  H5Aclose(attribute);
  return 0;
}

// A virtual dataset's mappings: the selections HDF5 decodes from the layout message.
void walk_virtual(hid_t create) {
  std::size_t count = 0;
  if (H5Pget_virtual_count(create, &count) < 0) return;
  for (std::size_t i = 0; i < std::min<std::size_t>(count, 4096); ++i) {
    for (const hid_t s : {H5Pget_virtual_vspace(create, i), H5Pget_virtual_srcspace(create, i)})
      if (s >= 0) H5Sclose(s);
    char name[1024];
    (void)H5Pget_virtual_filename(create, i, name, sizeof name);
    (void)H5Pget_virtual_dsetname(create, i, name, sizeof name);
  }
}

// The dataset's first values (its first chunk, through its filters), or all of it when small.
void walk_dataset(hid_t dataset) {
  const hid_t type = H5Dget_type(dataset), space = H5Dget_space(dataset), create = H5Dget_create_plist(dataset);
  const bool is_virtual = create >= 0 && H5Pget_layout(create) == H5D_VIRTUAL;
  if (create >= 0 && is_virtual) walk_virtual(create);
  const int rank = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
  // Virtual sources are other files: the run checks and opens them (linked_files.hpp).
  if (type >= 0 && rank >= 0 && rank <= H5S_MAX_RANK && !is_virtual) {
    const auto r = static_cast<std::size_t>(rank);
    std::array<hsize_t, H5S_MAX_RANK> dims{}, start{}, count{};
    H5Sget_simple_extent_dims(space, dims.data(), nullptr);
    bool empty = false;
    // The first row: its first 64 along each inner dimension, 4096 along the last.
    hsize_t elements = 1;
    for (std::size_t k = 0; k < r; ++k) {
      empty = empty || dims[k] == 0;
      count[k] = k + 1 == r ? std::min<hsize_t>(dims[k], 4096) : (k == 0 ? 1 : std::min<hsize_t>(dims[k], 64));
      elements *= count[k];
    }
    if (!empty && H5Sselect_hyperslab(space, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr) >= 0) {
      const hid_t memory = H5Screate_simple(rank, count.data(), nullptr);
      if (memory >= 0) {
        read_native(type, memory, rank == 0 ? 1 : elements,
                    [&](hid_t t, void* b) { return H5Dread(dataset, t, memory, space, H5P_DEFAULT, b); });
        H5Sclose(memory);
      }
    }
  }
  if (create >= 0) H5Pclose(create);
  if (space >= 0) H5Sclose(space);
  if (type >= 0) H5Tclose(type);
}

herr_t visit_object(hid_t root, const char* name, const H5O_info_t* info, void*) {
  const hid_t object = H5Oopen(root, name, H5P_DEFAULT);
  if (object < 0) return 0;
  if (info->num_attrs > 0) H5Aiterate2(object, H5_INDEX_NAME, H5_ITER_NATIVE, nullptr, visit_attribute, nullptr);
  if (info->type == H5O_TYPE_DATASET) walk_dataset(object);
  H5Oclose(object);
  return 0;
}

[[noreturn]] void walk_in_child(const std::string& path) {
  // Die quietly: the parent says what happened (MPI's handlers would print a backtrace).
  for (const int sig : {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL}) ::signal(sig, SIG_DFL);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // errors are the run's to report, not the walk's
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file >= 0) {
    H5Ovisit2(file, H5_INDEX_NAME, H5_ITER_NATIVE, visit_object, nullptr, H5O_INFO_BASIC | H5O_INFO_NUM_ATTRS);
    H5Fclose(file);
  }
  ::_exit(0);  // nothing of the parent's (MPI, atexit handlers) runs in the child
}

// HDF5's signature, at 0 or after a user block of 512, 1024, 2048, ... bytes: read here, as
// the library's own check would parse the superblock in this process.
bool looks_like_hdf5(const std::string& path) {
  static constexpr unsigned char kSignature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;
  struct stat st {};
  bool found = false;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    for (off_t at = 0; !found && at + 8 <= st.st_size; at = at == 0 ? 512 : at * 2) {
      unsigned char head[8];
      found = ::pread(fd, head, sizeof head, at) == 8 && std::memcmp(head, kSignature, 8) == 0;
    }
  }
  ::close(fd);
  return found;
}

}  // namespace

void require_hdf5_walk_survives(const std::string& path, double seconds) {
  if (!looks_like_hdf5(path)) return;
  const pid_t child = ::fork();
  if (child < 0) return;  // no child to spare: the run reads the file as it would have
  if (child == 0) walk_in_child(path);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int status = 0;
  for (;;) {
    const pid_t done = ::waitpid(child, &status, WNOHANG);
    if (done == child) break;
    if (done < 0 && errno != EINTR) return;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(child, SIGKILL);
      ::waitpid(child, &status, 0);
      throw Error("'" + path + "': the HDF5 library did not finish reading its metadata in " +
                  std::to_string(static_cast<int>(seconds)) +
                  " s (a child process walked it before any rank opened it): the file is damaged or made to stall readers");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
  const std::string how = WIFSIGNALED(status) ? std::string("died of signal ") + std::to_string(WTERMSIG(status)) + " (SIG" +
                                                    (::sigabbrev_np(WTERMSIG(status)) ? ::sigabbrev_np(WTERMSIG(status)) : "?") + ")"
                                              : "exited with status " + std::to_string(WEXITSTATUS(status));
  throw Error("'" + path + "': the HDF5 library " + how +
              " reading its metadata (in a child process that walked the file before any rank opened it): the file is "
              "damaged or made to crash readers; no rank has read it");
}

}  // namespace spmd::data
