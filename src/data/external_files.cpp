#include "spmd/data/external_files.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "spmd/runtime/check.hpp"

namespace spmd::data {
namespace {

namespace fs = std::filesystem;
constexpr const char* kOrigin = "${ORIGIN}";

// What HDF5 1.10 opens for `name` under `prefix` (H5_combine_path): an absolute name as it
// is, else prefix/name, with ${ORIGIN} at the prefix's start standing for the file's folder.
std::string combined(const std::string& prefix, const std::string& name, const std::string& file_path) {
  if (prefix.empty() || fs::path(name).is_absolute()) return name;
  std::string p = prefix;
  if (p.rfind(kOrigin, 0) == 0) {
    const std::string folder = fs::path(file_path).parent_path().string();
    p = (folder.empty() ? std::string(".") : folder) + p.substr(std::string(kOrigin).size());
  }
  return (fs::path(p) / name).string();
}

// Looks for every file under prefix; true when each holds its bytes.
bool look_under(ExternalFiles& found, const std::string& prefix, const std::string& where,
                const std::string& file_path) {
  found.prefix = prefix;
  found.where = where;
  for (auto& f : found.files) {
    f.path = combined(prefix, f.name, file_path);
    std::error_code ec;
    const auto size = fs::file_size(f.path, ec);
    f.bytes = ec ? -1 : static_cast<std::int64_t>(size);
  }
  return found.complete();
}

std::string working_directory() {
  std::error_code ec;
  const auto cwd = fs::current_path(ec);
  return ec ? std::string("?") : cwd.string();
}

}  // namespace

bool ExternalFiles::complete() const {
  return std::all_of(files.begin(), files.end(), [](const ExternalFile& f) { return f.complete(); });
}

std::string ExternalFiles::problems() const {
  std::string text;
  for (const auto& f : files) {
    if (f.complete()) continue;
    if (!text.empty()) text += "; ";
    text += "'" + f.name + "' ";
    if (f.bytes < 0)
      text += "is not at '" + f.path + "'";
    else
      text += "at '" + f.path + "' holds " + std::to_string(f.bytes) + " bytes, the dataset needs bytes up to " +
              std::to_string(f.offset + f.needed) + " of it (HDF5 would read the rest as zeros)";
  }
  return text.empty() ? text : text + "; looked for " + where;
}

ExternalFiles find_external_files(hid_t dataset, const std::string& file_path) {
  const char* hint = "reading a dataset's external storage";
  H5PropList dcpl(SPMD_CHECK_HDF5(H5Dget_create_plist(dataset), hint));
  ExternalFiles found;
  const int count = SPMD_CHECK_HDF5(H5Pget_external_count(dcpl.get()), hint);
  if (count <= 0) return found;
  H5Dataspace space(SPMD_CHECK_HDF5(H5Dget_space(dataset), hint));
  H5Datatype type(SPMD_CHECK_HDF5(H5Dget_type(dataset), hint));
  const auto elements = SPMD_CHECK_HDF5(H5Sget_simple_extent_npoints(space.get()), hint);
  std::int64_t remaining = static_cast<std::int64_t>(elements) * static_cast<std::int64_t>(H5Tget_size(type.get()));
  for (int i = 0; i < count; ++i) {
    char name[4096] = {0};
    off_t offset = 0;
    hsize_t size = 0;
    SPMD_CHECK_HDF5(H5Pget_external(dcpl.get(), static_cast<unsigned>(i), sizeof name, name, &offset, &size), hint);
    ExternalFile f;
    f.name = name;
    f.offset = static_cast<std::int64_t>(offset);
    f.needed = size == H5F_UNLIMITED ? remaining : std::min(remaining, static_cast<std::int64_t>(size));
    remaining -= f.needed;
    found.files.push_back(std::move(f));
  }
  // HDF5 takes HDF5_EXTFILE_PREFIX over any access property: then that is the only rule.
  if (const char* env = std::getenv("HDF5_EXTFILE_PREFIX"); env && *env) {
    look_under(found, env, std::string("under HDF5_EXTFILE_PREFIX=") + env, file_path);
    found.prefix = "";  // HDF5 applies it itself
    return found;
  }
  if (look_under(found, "", "in the working directory " + working_directory() + ", HDF5's rule", file_path))
    return found;
  const ExternalFiles in_cwd = found;
  if (look_under(found, kOrigin, "beside the HDF5 file", file_path)) return found;
  found.prefix = "";  // HDF5's own rule, which describes what a read would meet
  found.where = "in the working directory " + working_directory() + " (HDF5's rule) and beside the HDF5 file";
  // Report the files as the rule that found more of them sees them.
  const auto present = [](const ExternalFiles& e) {
    return std::count_if(e.files.begin(), e.files.end(), [](const ExternalFile& f) { return f.bytes >= 0; });
  };
  if (present(in_cwd) > present(found)) {
    const std::string where = found.where;
    found = in_cwd;
    found.where = where;
    found.prefix = "";
  }
  return found;
}

H5PropList external_access(const ExternalFiles& files) {
  const char* hint = "making a dataset access property list for its external files";
  H5PropList dapl(SPMD_CHECK_HDF5(H5Pcreate(H5P_DATASET_ACCESS), hint));
  if (!files.prefix.empty()) SPMD_CHECK_HDF5(H5Pset_efile_prefix(dapl.get(), files.prefix.c_str()), hint);
  return dapl;
}

}  // namespace spmd::data
