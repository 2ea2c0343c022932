#include "spmd/data/linked_files.hpp"

#include <cstdlib>
#include <filesystem>
#include <set>
#include <system_error>
#include <utility>
#include <vector>

#include "spmd/data/file_identity.hpp"
#include "spmd/data/h5_handle.hpp"
#include "spmd/runtime/check.hpp"
#include "spmd/runtime/error.hpp"

namespace spmd::data {
namespace {

namespace fs = std::filesystem;

bool g_outside_allowed = false;
std::vector<FileArgument> g_run_outputs;

constexpr int kMaxVirtualDepth = 8;  // sources of sources: deeper is refused as a probable loop

// The path with every symbolic link resolved, for the parts that exist.
fs::path resolved(const fs::path& p) {
  std::error_code ec;
  fs::path r = fs::weakly_canonical(fs::absolute(p, ec), ec);
  return ec ? fs::absolute(p).lexically_normal() : r;
}

bool inside(const fs::path& folder, const fs::path& p) {
  const fs::path r = resolved(p);
  auto f = folder.begin(), x = r.begin();
  for (; f != folder.end(); ++f, ++x)
    if (x == r.end() || *f != *x) return false;
  return x != r.end();
}

bool path_exists(const fs::path& p) {
  std::error_code ec;
  return fs::exists(p, ec);
}

// Where HDF5 finds a file named by a link or a virtual source: an absolute name as it is; a
// relative one beside the file that names it, else from the working directory.
fs::path located(const std::string& name, const fs::path& base_folder) {
  const fs::path n(name);
  if (n.is_absolute()) return n;
  if (path_exists(base_folder / n)) return base_folder / n;
  if (path_exists(n)) return fs::absolute(n);
  return base_folder / n;
}

struct Checker {
  fs::path folder;        // its folder, resolved
  std::string culprit;    // "'data.h5': features dataset 'X'"
  std::set<std::pair<std::string, haddr_t>> visiting;  // (file resolved, object address): the sources being followed

  [[noreturn]] void outside(const std::string& how, const fs::path& target) const {
    const std::string real = resolved(target).string();
    throw Error(culprit + " " + how + " '" + target.string() + "'" +
                (real != fs::absolute(target).lexically_normal().string() ? " (which is '" + real + "')" : "") +
                ", outside the data file's folder '" + folder.string() +
                "': spmd reads only the files it is given and what lies beside them; pass --allow-outside-files to "
                "read it");
  }

  // An output's final name, resolved, or the same file under another name (a hard link).
  void not_an_output(const std::string& how, const fs::path& target) const {
    const fs::path real = resolved(target);
    const FileIdentity target_id = file_identity(real.string());
    for (const auto& out : g_run_outputs) {
      const FileIdentity out_id = file_identity(out.path);
      const bool same = real == resolved(out.path) ||
                        (target_id.size >= 0 && out_id.size >= 0 && target_id.device == out_id.device && target_id.inode == out_id.inode);
      if (same)
        throw Error(culprit + " " + how + " '" + target.string() + "', which is --" + out.option + " '" + out.path +
                    "', an output of this run: the run would read what it writes (or an earlier run's output as data). "
                    "Give the output another name");
    }
  }

  void external_links(hid_t file, const std::string& name) const {
    std::string prefix;
    for (std::size_t at = 0; at != std::string::npos;) {
      const std::size_t next = name.find('/', at + 1);
      const std::string part = name.substr(at, next == std::string::npos ? std::string::npos : next - at);
      at = next;
      if (part.empty() || part == "/") continue;
      prefix += (part.front() == '/' ? "" : "/") + part;
      H5L_info_t info;
      if (H5Lget_info(file, prefix.c_str(), &info, H5P_DEFAULT) < 0) {
        H5Eclear2(H5E_DEFAULT);
        return;  // open_dataset names what is missing
      }
      if (info.type != H5L_TYPE_EXTERNAL) continue;
      std::vector<char> value(info.u.val_size + 1, '\0');
      const char* target_file = nullptr;
      const char* target_object = nullptr;
      if (H5Lget_val(file, prefix.c_str(), value.data(), value.size(), H5P_DEFAULT) < 0 ||
          H5Lunpack_elink_val(value.data(), value.size(), nullptr, &target_file, &target_object) < 0) {
        H5Eclear2(H5E_DEFAULT);
        throw Error(culprit + " is reached through an external link '" + prefix + "' that cannot be read");
      }
      const fs::path target = located(target_file, folder);
      not_an_output("is reached through an external link '" + prefix + "' into", target);
      if (!g_outside_allowed && !inside(folder, target))
        outside("is reached through an external link '" + prefix + "' (to '" + std::string(target_object) + "') in", target);
    }
  }

  void external_raw(const ExternalFiles& external) const {
    // HDF5_EXTFILE_PREFIX is the user's own word on where the raw files are: its folder counts.
    const char* prefix = std::getenv("HDF5_EXTFILE_PREFIX");
    const fs::path named = prefix != nullptr && *prefix ? resolved(prefix) : fs::path();
    for (const auto& f : external.files) {
      const fs::path p = f.path.empty() ? located(f.name, folder) : fs::path(f.path);
      not_an_output("keeps its values (HDF5 external storage) in the raw file", p);
      if (!g_outside_allowed && !inside(folder, p) && (named.empty() || !inside(named, p)))
        outside("keeps its values (HDF5 external storage) in the raw file", p);
    }
  }

  // A virtual dataset's sources, through sources that are virtual themselves.
  void virtual_sources(hid_t dataset, const fs::path& file, const std::string& name, int depth) {
    const char* hint = "reading a virtual dataset's sources";
    H5PropList dcpl(SPMD_CHECK_HDF5(H5Dget_create_plist(dataset), hint));
    if (H5Pget_layout(dcpl.get()) != H5D_VIRTUAL) return;
    H5O_info_t object;
    SPMD_CHECK_HDF5(H5Oget_info2(dataset, &object, H5O_INFO_BASIC), hint);
    const std::pair<std::string, haddr_t> here{resolved(file).string(), object.addr};
    if (!visiting.insert(here).second)
      throw Error(culprit + " is a virtual dataset that is its own source (through '" + name + "' of '" + file.string() +
                  "'): HDF5 would recurse until the stack overflows");
    if (depth > kMaxVirtualDepth)
      throw Error(culprit + " is a virtual dataset whose sources are virtual " + std::to_string(kMaxVirtualDepth) +
                  " levels deep: refused as a probable loop");
    std::size_t count = 0;
    SPMD_CHECK_HDF5(H5Pget_virtual_count(dcpl.get(), &count), hint);
    for (std::size_t i = 0; i < count; ++i) {
      const auto text = [&](ssize_t (*get)(hid_t, size_t, char*, size_t)) {
        const ssize_t n = get(dcpl.get(), i, nullptr, 0);
        if (n < 0) throw Error(culprit + ": cannot read source " + std::to_string(i) + " of the virtual dataset");
        std::string s(static_cast<std::size_t>(n) + 1, '\0');
        get(dcpl.get(), i, s.data(), s.size());
        s.resize(static_cast<std::size_t>(n));
        return s;
      };
      const std::string source_file = text(H5Pget_virtual_filename), source_name = text(H5Pget_virtual_dsetname);
      const std::string mapping = "source " + std::to_string(i) + " of virtual dataset '" + name + "' ('" + source_name +
                                  "' in '" + source_file + "')";
      const bool same_file = source_file == ".";
      const fs::path source = same_file ? file : located(source_file, file.parent_path());
      if (!same_file) not_an_output("reads its " + mapping + " from", source);
      if (!same_file && !g_outside_allowed && !inside(folder, source)) outside("reads its " + mapping + " from", source);
      if (!same_file && !path_exists(source))
        throw Error(culprit + ": the file of its " + mapping + " is not at '" + source.string() +
                    "': HDF5 would read the fill value for those rows, as if they were data");
      // The source dataset must exist (else fill values again); open its file only to look.
      H5File source_handle;
      if (same_file) {
        source_handle = H5File(SPMD_CHECK_HDF5(H5Iget_file_id(dataset), hint));
      } else {
        H5E_BEGIN_TRY { source_handle = H5File(H5Fopen(source.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)); }
        H5E_END_TRY;
        if (!source_handle.valid())
          throw Error(culprit + ": the file of its " + mapping + " at '" + source.string() + "' is not an HDF5 file it can open");
      }
      htri_t there = 0;
      H5E_BEGIN_TRY { there = H5Lexists(source_handle.get(), source_name.c_str(), H5P_DEFAULT); }
      H5E_END_TRY;
      H5Dataset source_dataset;
      if (there > 0) {
        H5E_BEGIN_TRY { source_dataset = H5Dataset(H5Dopen2(source_handle.get(), source_name.c_str(), H5P_DEFAULT)); }
        H5E_END_TRY;
      }
      if (!source_dataset.valid())
        throw Error(culprit + ": its " + mapping + " names no dataset there: HDF5 would read the fill value for those rows, "
                              "as if they were data");
      virtual_sources(source_dataset.get(), source, source_name, depth + 1);
    }
    visiting.erase(here);
  }
};

}  // namespace

void set_outside_files_allowed(bool allowed) { g_outside_allowed = allowed; }
bool outside_files_allowed() { return g_outside_allowed; }
void set_run_outputs(std::vector<FileArgument> outputs) { g_run_outputs = std::move(outputs); }

void check_linked_files(hid_t file, const std::string& file_path, const std::string& name, const std::string& role,
                        hid_t dataset, const ExternalFiles& external) {
  Checker c;
  // The folder, not the file: resolving the file would stat it on every rank (start-up touches
  // the input once per node), and HDF5 resolves relative links from the path as given.
  c.folder = resolved(fs::absolute(fs::path(file_path)).parent_path());
  c.culprit = "'" + file_path + "': " + role + " dataset '" + name + "'";
  c.external_links(file, name);
  c.external_raw(external);
  c.virtual_sources(dataset, fs::path(file_path), name, 0);
}

}  // namespace spmd::data
