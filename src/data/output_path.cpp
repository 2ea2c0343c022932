#include "output_path.hpp"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "spmd/data/h5_file.hpp"
#include "spmd/data/output_set.hpp"
#include "spmd/runtime/check.hpp"
#include "spmd/runtime/error.hpp"
#include "spmd/runtime/io_deadline.hpp"

namespace spmd::data::output_path {

namespace fs = std::filesystem;

void require_writable_target(const std::string& final_path) {
  if (final_path.empty()) throw Error("cannot write an HDF5 file: no output path given");
  const fs::path target(final_path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw Error("cannot write '" + final_path + "': the folder '" + dir.string() + "' does not exist");
  if (fs::is_directory(target, ec)) throw Error("cannot write '" + final_path + "': it is a directory");
}

std::string temp_path_for(const std::string& final_path, long pid) {
  const fs::path target(final_path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  // Built by appending: GCC 12 warns falsely (-Wrestrict) on "." + std::string.
  std::string name(".");
  name += target.filename().string();
  name += ".tmp.";
  name += std::to_string(pid);
  return (dir / name).string();
}

void fsync_path(const std::string& path, bool directory) {
  const runtime::IoDeadline deadline("fsync", path);
  const int fd = ::open(path.c_str(), directory ? O_RDONLY | O_DIRECTORY : O_RDONLY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

void publish(const std::string& temp_path, const std::string& final_path) {
  fsync_path(temp_path, false);
  std::error_code ec;
  fs::rename(temp_path, final_path, ec);
  if (ec) throw Error("cannot rename '" + temp_path + "' to '" + final_path + "': " + ec.message());
  const fs::path parent = fs::path(final_path).parent_path();
  fsync_path(parent.empty() ? std::string(".") : parent.string(), true);
}

}  // namespace spmd::data::output_path

namespace spmd::data {

namespace fs = std::filesystem;

std::string space_shortage(const std::string& final_path, std::uint64_t bytes, const std::string& what) {
  const fs::path target(final_path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  struct statvfs st {};
  const runtime::IoDeadline deadline("statvfs", dir.string());
  if (::statvfs(dir.c_str(), &st) != 0) return "";  // cannot tell: let the write say
  const std::uint64_t free_bytes = static_cast<std::uint64_t>(st.f_bavail) * st.f_frsize;
  if (free_bytes >= bytes) return "";
  return "No space left on device: '" + dir.string() + "' has " + std::to_string(free_bytes) + " bytes free, " + what +
         " needs " + std::to_string(bytes) + " bytes";
}

H5Dataspace make_space(const std::vector<std::int64_t>& shape, const char* hint) {
  if (shape.empty()) return H5Dataspace(SPMD_CHECK_HDF5(H5Screate(H5S_SCALAR), hint));
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  return H5Dataspace(SPMD_CHECK_HDF5(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), hint));
}

H5Dataset create_dataset(hid_t file, const std::string& name, ElementType type, hid_t space, hid_t create_props,
                         const char* hint) {
  H5PropList link_props(SPMD_CHECK_HDF5(H5Pcreate(H5P_LINK_CREATE), hint));
  SPMD_CHECK_HDF5(H5Pset_create_intermediate_group(link_props.get(), 1), hint);
  return H5Dataset(SPMD_CHECK_HDF5(
      H5Dcreate2(file, name.c_str(), native_hdf5_type(type), space, link_props.get(), create_props, H5P_DEFAULT), hint));
}

void write_attribute(hid_t file, const std::string& object, const std::string& name, hid_t type,
                     const std::vector<std::int64_t>& shape, const void* data, const std::string& final_path) {
  const std::string target = object.empty() ? "/" : object;
  const std::string hint = "writing attribute '" + name + "' of '" + target + "' in '" + final_path + "'";
  const htri_t exists = SPMD_CHECK_HDF5(H5Aexists_by_name(file, target.c_str(), name.c_str(), H5P_DEFAULT), hint.c_str());
  if (exists > 0) SPMD_CHECK_HDF5(H5Adelete_by_name(file, target.c_str(), name.c_str(), H5P_DEFAULT), hint.c_str());
  H5Dataspace space = make_space(shape, hint.c_str());
  H5Attribute attr(SPMD_CHECK_HDF5(
      H5Acreate_by_name(file, target.c_str(), name.c_str(), type, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
      hint.c_str()));
  if (element_count(shape) > 0) SPMD_CHECK_HDF5(H5Awrite(attr.get(), type, data), hint.c_str());
}

void write_attribute(hid_t file, const std::string& object, const std::string& name, const std::string& text,
                     const std::string& final_path) {
  H5Datatype type(SPMD_CHECK_HDF5(H5Tcopy(H5T_C_S1), "creating a string type"));
  SPMD_CHECK_HDF5(H5Tset_size(type.get(), std::max<std::size_t>(text.size(), 1)), "sizing a string type");
  SPMD_CHECK_HDF5(H5Tset_strpad(type.get(), H5T_STR_NULLPAD), "padding a string type");
  SPMD_CHECK_HDF5(H5Tset_cset(type.get(), H5T_CSET_UTF8), "marking a string type UTF-8");
  const std::string padded = text.empty() ? std::string(1, '\0') : text;
  write_attribute(file, object, name, type.get(), {}, padded.data(), final_path);
}

}  // namespace spmd::data
