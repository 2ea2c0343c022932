#include "spmd/data/h5_file.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

#include "spmd/data/external_files.hpp"
#include "spmd/data/linked_files.hpp"
#include "spmd/runtime/agree.hpp"
#include "spmd/runtime/check.hpp"
#include "spmd/runtime/context.hpp"
#include "spmd/runtime/watchdog.hpp"
#include "spmd/runtime/time_account.hpp"
#include "spmd/runtime/io_deadline.hpp"
#include "row_read.hpp"

namespace spmd::data {

namespace fs = std::filesystem;

std::string special_file_kind(const std::string& path) {
  std::error_code ec;
  const runtime::IoDeadline deadline("stat", path);
  const auto st = fs::status(path, ec);
  if (ec) {
    if (ec == std::errc::too_many_symbolic_link_levels) return "symbolic link loop";
    return "";
  }
  switch (st.type()) {
    case fs::file_type::directory: return "directory";
    case fs::file_type::fifo: return "FIFO (named pipe)";
    case fs::file_type::socket: return "socket";
    case fs::file_type::character: return "character device";
    case fs::file_type::block: return "block device";
    default: return "";
  }
}

void require_readable_file(const std::string& option, const std::string& path) {
  // Looked at before it is opened: opening a FIFO blocks until a writer comes, forever.
  const std::string kind = data::special_file_kind(path);
  if (kind == "directory") throw Error("--" + option + " '" + path + "': is a directory, expected a file");
  if (kind == "symbolic link loop")
    throw Error("--" + option + " '" + path + "': is a symbolic link loop (its links lead back to themselves)");
  if (!kind.empty())
    throw Error("--" + option + " '" + path + "': is a " + kind + ", not a regular file; every rank reads its inputs " +
                "with random access, so copy it to a file first");
  const runtime::IoDeadline deadline("open", path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("--" + option + " '" + path + "': file does not exist or is not readable");
}

namespace {

void require_hdf5_file(const std::string& path, const std::string& what) {
  const std::string kind = special_file_kind(path);
  if (kind == "directory")
    throw Error("cannot read " + what + " from '" + path + "': it is a directory, not an HDF5 file");
  if (!kind.empty())  // opening a FIFO would block until a writer comes
    throw Error("cannot read " + what + " from '" + path + "': it is a " + kind + ", not a regular file");
  std::error_code ec;
  const runtime::IoDeadline deadline("open", path);
  const auto status = fs::status(path, ec);
  if (ec || !fs::exists(status))
    throw Error("cannot read " + what + " from '" + path + "': the file does not exist");
  if (::access(path.c_str(), R_OK) != 0)
    throw Error("cannot read " + what + " from '" + path + "': permission denied");
  const htri_t is_hdf5 = H5Fis_hdf5(path.c_str());
  H5Eclear2(H5E_DEFAULT);
  if (is_hdf5 <= 0)
    throw Error("cannot read " + what + " from '" + path + "': not an HDF5 file (no HDF5 signature" +
                (fs::file_size(path, ec) == 0 ? std::string(", the file is empty") : std::string()) + ")");
}

herr_t find_lock_errno(unsigned, const H5E_error2_t* err, void* client) {
  static const char kLock[] = "unable to lock file";
  if (!err || !err->desc) return 0;
  const std::string desc = err->desc;
  if (desc.find(kLock) == std::string::npos) return 0;
  auto* found = static_cast<int*>(client);
  *found = -1;  // a lock failure, errno unknown
  const auto at = desc.find("errno = ");
  if (at != std::string::npos) *found = std::atoi(desc.c_str() + at + 8);
  return 0;
}

// HDF5 (1.10 and later) takes a lock on every file it opens: a shared one to read, an
// exclusive one to write. Its "unable to lock file" says nothing of what to do.
[[noreturn]] void throw_lock_error(const std::string& path, const std::string& what, int error) {
  const bool held = error == EAGAIN || error == EWOULDBLOCK || error == -1;
  std::string text = "cannot read " + what + " from '" + path + "': HDF5 could not lock the file (" +
                     (error > 0 ? "errno " + std::to_string(error) + ", " + std::strerror(error) : std::string("lock refused")) +
                     "): ";
  if (held)
    text += "another process has it open for writing (h5py: a File opened with 'a', 'r+' or 'w' and not yet closed). "
            "Close it there, or wait for that writer to finish. HDF5_USE_FILE_LOCKING=FALSE in the environment makes "
            "HDF5 open files without these locks: use it only when nothing will write the file while this run reads "
            "it, since no lock then stops a writer, and a read racing a write gives wrong values or a failed read";
  else
    text += "the file system does not support the locks HDF5 takes (some NFS and Lustre mounts). Set "
            "HDF5_USE_FILE_LOCKING=FALSE in the environment to open files without locks; that is safe as long as no "
            "process writes the file while this run reads it";
  throw Error(text);
}

// After a failed H5Fopen: a lock failure is explained (throw_lock_error); anything else is
// thrown as HDF5 says it.
[[noreturn]] void throw_open_error(const std::string& path, const std::string& what, const char* call, int line,
                                   const std::string& hint) {
  int lock_errno = 0;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, find_lock_errno, &lock_errno);
  if (lock_errno != 0) {
    H5Eclear2(H5E_DEFAULT);
    throw_lock_error(path, what, lock_errno);
  }
  runtime::throw_hdf5_error(call, __FILE__, line, hint.c_str());
}

}  // namespace

H5File open_file_serial(const std::string& path, const std::string& what) {
  runtime::TimeScope io(runtime::TimeCategory::Io);
  require_hdf5_file(path, what);
  return open_checked_file_serial(path, what);
}

H5File open_checked_file_serial(const std::string& path, const std::string& what) {
  runtime::TimeScope io(runtime::TimeCategory::Io);
  const runtime::IoDeadline deadline("H5Fopen", path);
  const hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (id < 0)
    throw_open_error(path, what, "H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT)", __LINE__,
                     "reading " + what + " from '" + path + "'");
  return H5File(id);
}

H5File open_file_parallel(const runtime::Context& ctx, const std::string& path, const std::string& what) {
  runtime::TimeScope io(runtime::TimeCategory::Io);
  // Checked once per node: on a cluster the path may be visible on some nodes only, and
  // checking on every rank would make thousands of ranks stat one file at once.
  runtime::agree_on(ctx.comm(), [&] {
    if (ctx.local_rank() != 0) return;
    try {
      require_hdf5_file(path, what);
    } catch (const Error& e) {
      throw Error(rank_prefix(ctx) + e.what());
    }
  });
  H5File file;
  try {
    runtime::agree_on(ctx.comm(), [&] {
      const std::string hint = "opening '" + path + "' with MPI-IO to read " + what;
      H5PropList fapl = mpio_file_access(ctx, hint.c_str());
      runtime::Watchdog::Armed armed(ctx.watchdog(), "H5Fopen (MPI-IO, collective)");
      const hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get());
      if (id < 0) throw_open_error(path, what, "H5Fopen(path, H5F_ACC_RDONLY, fapl)", __LINE__, hint);
      file = H5File(id);
    });
  } catch (const CollectiveError&) {
    // Closing an MPI-IO file is collective; the ranks that failed to open will not join.
    file.release();
    throw;
  }
  return file;
}

H5PropList mpio_file_access(const runtime::Context& ctx, const char* hint) {
  H5PropList fapl(SPMD_CHECK_HDF5(H5Pcreate(H5P_FILE_ACCESS), hint));
  SPMD_CHECK_HDF5(H5Pset_fapl_mpio(fapl.get(), ctx.comm(), MPI_INFO_NULL), hint);
  // Metadata (superblock, object headers, B-trees) read by one rank and broadcast, not read
  // by every rank from the file system.
  SPMD_CHECK_HDF5(H5Pset_all_coll_metadata_ops(fapl.get(), true), hint);
  return fapl;
}

H5PropList collective_transfer(const char* hint) {
  H5PropList xfer(SPMD_CHECK_HDF5(H5Pcreate(H5P_DATASET_XFER), hint));
  SPMD_CHECK_HDF5(H5Pset_dxpl_mpio(xfer.get(), H5FD_MPIO_COLLECTIVE), hint);
  return xfer;
}

namespace {

// The datasets of a file as h5py users lay them out: every object reached by hard links
// (H5Ovisit, each once), then the soft and external links (h5py.SoftLink, ExternalLink: a
// "master" file over per-split files) that lead to a dataset, or to a group whose datasets,
// not reached already (an object is its file number and address).
struct DatasetWalk {
  hid_t file;
  std::string prefix;  // the group being walked, as reached ("" for the root)
  std::vector<std::string> names;
  std::set<std::pair<unsigned long, haddr_t>> seen;
};

herr_t collect_object(hid_t, const char* name, const H5O_info_t* info, void* out) {
  auto& walk = *static_cast<DatasetWalk*>(out);
  if (!walk.seen.insert({info->fileno, info->addr}).second) return 0;
  if (info->type == H5O_TYPE_DATASET) walk.names.push_back(walk.prefix + "/" + name);
  return 0;
}

herr_t follow_link(hid_t, const char* name, const H5L_info_t* link, void* out) {
  if (link->type != H5L_TYPE_SOFT && link->type != H5L_TYPE_EXTERNAL) return 0;
  auto& walk = *static_cast<DatasetWalk*>(out);
  const std::string path = "/" + std::string(name);
  H5O_info_t info;
  if (H5Oget_info_by_name2(walk.file, path.c_str(), &info, H5O_INFO_BASIC, H5P_DEFAULT) < 0) {
    H5Eclear2(H5E_DEFAULT);  // leads nowhere: broken_links names it
    return 0;
  }
  if (info.type == H5O_TYPE_DATASET) {
    if (walk.seen.insert({info.fileno, info.addr}).second) walk.names.push_back(path);
  } else if (info.type == H5O_TYPE_GROUP && !walk.seen.count({info.fileno, info.addr})) {
    const H5Group group(H5Gopen2(walk.file, path.c_str(), H5P_DEFAULT));
    const std::string outer = std::exchange(walk.prefix, path);
    // A linked group that cannot be walked adds nothing (its datasets are not the file's).
    if (!group.valid() || H5Ovisit2(group.get(), H5_INDEX_NAME, H5_ITER_INC, collect_object, &walk, H5O_INFO_BASIC) < 0)
      H5Eclear2(H5E_DEFAULT);
    walk.prefix = outer;
  }
  return 0;
}

herr_t collect_broken_link(hid_t, const char* name, const H5L_info_t* link, void* out) {
  if (link->type != H5L_TYPE_SOFT && link->type != H5L_TYPE_EXTERNAL) return 0;
  auto& broken = *static_cast<std::pair<hid_t, std::vector<BrokenLink>>*>(out);
  const std::string path = "/" + std::string(name);
  if (H5Oexists_by_name(broken.first, path.c_str(), H5P_DEFAULT) > 0) return 0;
  H5Eclear2(H5E_DEFAULT);
  std::vector<char> value(link->u.val_size + 1, '\0');
  std::string target = "?";
  if (H5Lget_val(broken.first, path.c_str(), value.data(), value.size(), H5P_DEFAULT) >= 0) {
    if (link->type == H5L_TYPE_SOFT) {
      target = "'" + std::string(value.data()) + "'";
    } else {
      const char* file_name = nullptr;
      const char* object = nullptr;
      if (H5Lunpack_elink_val(value.data(), value.size(), nullptr, &file_name, &object) >= 0)
        target = "'" + std::string(object) + "' in '" + file_name + "'";
    }
  }
  H5Eclear2(H5E_DEFAULT);
  broken.second.push_back({path, std::string(link->type == H5L_TYPE_SOFT ? "soft" : "external") + " link to " + target});
  return 0;
}

}  // namespace

std::vector<std::string> list_datasets(hid_t file) {
  DatasetWalk walk{file, "", {}, {}};
  SPMD_CHECK_HDF5(H5Ovisit2(file, H5_INDEX_NAME, H5_ITER_INC, collect_object, &walk, H5O_INFO_BASIC),
                  "listing the datasets of an HDF5 file");
  SPMD_CHECK_HDF5(H5Lvisit(file, H5_INDEX_NAME, H5_ITER_INC, follow_link, &walk),
                  "following the soft and external links of an HDF5 file");
  std::sort(walk.names.begin(), walk.names.end());
  return walk.names;
}

std::vector<BrokenLink> broken_links(hid_t file) {
  std::pair<hid_t, std::vector<BrokenLink>> broken{file, {}};
  SPMD_CHECK_HDF5(H5Lvisit(file, H5_INDEX_NAME, H5_ITER_INC, collect_broken_link, &broken),
                  "looking for links that lead nowhere in an HDF5 file");
  return broken.second;
}

bool dataset_exists(hid_t file, const std::string& name) {
  // H5Oget_info_by_name fails on a missing intermediate group, so walk the path first.
  std::string prefix;
  std::istringstream parts(name);
  for (std::string part; std::getline(parts, part, '/');) {
    if (part.empty()) continue;
    prefix += "/" + part;
    const htri_t exists = H5Lexists(file, prefix.c_str(), H5P_DEFAULT);
    if (exists <= 0) {
      H5Eclear2(H5E_DEFAULT);
      return false;
    }
  }
  if (prefix.empty()) return false;
  H5O_info_t info;
  if (H5Oget_info_by_name2(file, prefix.c_str(), &info, H5O_INFO_BASIC, H5P_DEFAULT) < 0) {
    H5Eclear2(H5E_DEFAULT);
    return false;
  }
  return info.type == H5O_TYPE_DATASET;
}

H5Dataset open_dataset(hid_t file, const std::string& file_path, const std::string& name, const std::string& role,
                       ExternalCheck check) {
  if (!dataset_exists(file, name)) {
    const auto existing = list_datasets(file);
    std::string listing;
    for (const auto& n : existing) listing += (listing.empty() ? "" : ", ") + n;
    std::string links;
    for (const auto& b : broken_links(file)) links += (links.empty() ? "'" : ", '") + b.name + "' (" + b.target + ")";
    throw Error("'" + file_path + "' has no dataset '" + name + "' (the " + role + "); datasets in the file: " +
                (listing.empty() ? std::string("none") : listing) +
                (links.empty() ? std::string() : "; links that lead nowhere (a file or object missing): " + links));
  }
  const std::string hint = "opening the " + role + " dataset '" + name + "' of '" + file_path + "'";
  H5Dataset dataset(SPMD_CHECK_HDF5(H5Dopen2(file, name.c_str(), H5P_DEFAULT), hint.c_str()));
  const ExternalFiles external = find_external_files(dataset.get(), file_path);
  if (check == ExternalCheck::require) check_linked_files(file, file_path, name, role, dataset.get(), external);
  if (external.files.empty()) return dataset;
  if (check == ExternalCheck::require && !external.complete())
    throw Error("'" + file_path + "': " + role + " dataset '" + name +
                "' keeps its values in raw files of its own (HDF5 external storage, h5py's external=), and " +
                external.problems() +
                ": put the raw files beside the HDF5 file (or where their names lead from the working directory), "
                "or set HDF5_EXTFILE_PREFIX to their folder");
  if (external.prefix.empty()) return dataset;
  // Found beside the HDF5 file, not where HDF5 looks by default: open it again to read them
  // there (HDF5 refuses a second open of a dataset with another prefix while the first is open).
  const H5PropList access = external_access(external);
  dataset = H5Dataset();
  return H5Dataset(SPMD_CHECK_HDF5(H5Dopen2(file, name.c_str(), access.get()), hint.c_str()));
}

std::vector<std::int64_t> dataset_dims(hid_t dataset) {
  H5Dataspace space(SPMD_CHECK_HDF5(H5Dget_space(dataset), "reading a dataset's shape"));
  const int rank = SPMD_CHECK_HDF5(H5Sget_simple_extent_ndims(space.get()), "reading a dataset's rank");
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  if (rank > 0) SPMD_CHECK_HDF5(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr), "reading a dataset's shape");
  return std::vector<std::int64_t>(dims.begin(), dims.end());
}

std::uint64_t element_count(const std::vector<std::int64_t>& dims) {
  std::uint64_t n = 1;
  for (auto d : dims) n *= static_cast<std::uint64_t>(d);
  return n;
}

std::optional<ElementType> label_type_of(hid_t hdf5_type, bool& is_enum) {
  is_enum = SPMD_CHECK_HDF5(H5Tget_class(hdf5_type), "reading a datatype's class") == H5T_ENUM;
  std::optional<ElementType> element;
  if (is_enum) {
    H5Datatype base(SPMD_CHECK_HDF5(H5Tget_super(hdf5_type), "reading an enum's base type"));
    element = element_type_of(base.get());
  } else {
    element = element_type_of(hdf5_type);
  }
  return element && is_integer(*element) ? element : std::nullopt;
}

bool is_column(const std::vector<std::int64_t>& dims) { return dims.size() == 1 || (dims.size() == 2 && dims[1] == 1); }

std::string format_shape(const std::vector<std::int64_t>& dims) {
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

}  // namespace spmd::data
