#include "spmd/data/output_targets.hpp"

#include <climits>
#include <cstring>
#include <filesystem>
#include <unistd.h>

#include "spmd/data/file_identity.hpp"
#include "spmd/data/h5_file.hpp"
#include "spmd/runtime/error.hpp"

namespace spmd::data {

namespace fs = std::filesystem;

namespace {

// What a temporary adds to the final name: "." + NAME + ".tmp." + PID (at most 10 digits);
// a lock: "." + NAME + ".lock".
constexpr std::size_t kTempExtra = 1 + 5 + 10;
constexpr std::size_t kLockExtra = 1 + 5;

std::size_t decimal_digits(long value) { return std::to_string(value).size(); }

// One file as the checks see it: its device and inode where it exists, else the absolute
// path it would be created at (symbolic links in its folders resolved).
struct Identity {
  FileIdentity file;  // size < 0: absent
  std::string resolved;
};

Identity identify(const std::string& path) {
  Identity id{file_identity(path), ""};
  std::error_code ec;
  const fs::path absolute = fs::absolute(path, ec);
  const fs::path resolved = fs::weakly_canonical(ec ? fs::path(path) : absolute, ec);
  id.resolved = (ec ? absolute : resolved).lexically_normal().string();
  return id;
}

bool same_file(const Identity& a, const Identity& b) {
  const bool a_exists = a.file.size >= 0, b_exists = b.file.size >= 0;
  if (a_exists && b_exists) return a.file.device == b.file.device && a.file.inode == b.file.inode;
  return !a_exists && !b_exists && a.resolved == b.resolved;
}

std::string quoted(const FileArgument& f) { return "--" + f.option + " '" + f.path + "'"; }

long name_max_of(const fs::path& folder) {
  const long limit = ::pathconf(folder.empty() ? "." : folder.c_str(), _PC_NAME_MAX);
  return limit > 0 ? limit : NAME_MAX;
}

void require_name_fits(const FileArgument& out, bool locked) {
  const fs::path path(out.path);
  const std::string name = path.filename().string();
  const std::size_t extra = std::max(kTempExtra, locked ? kLockExtra : 0);
  const long name_max = name_max_of(path.parent_path());
  if (name.size() + extra > static_cast<std::size_t>(name_max))
    throw Error(quoted(out) + ": the file name is " + std::to_string(name.size()) + " characters; this file system allows " +
                std::to_string(name_max) + " (NAME_MAX) and the temporary file written first, '." + name.substr(0, 12) +
                "....tmp.PID', adds " + std::to_string(extra) + ": use a name of at most " +
                std::to_string(name_max - static_cast<long>(extra)) + " characters");
  std::error_code ec;
  const std::string absolute = fs::absolute(path, ec).string();
  if (absolute.size() + extra >= PATH_MAX)
    throw Error(quoted(out) + ": the absolute path is " + std::to_string(absolute.size()) + " characters; Linux allows " +
                std::to_string(PATH_MAX - 1) + " (PATH_MAX) and the temporary file adds " + std::to_string(extra));
}

}  // namespace

std::size_t mpi_io_path_limit(int ranks) {
  constexpr std::size_t kBuffer = 256;  // sharedfp/lockedfile's char filename[256]
  constexpr std::size_t kSuffix = std::char_traits<char>::length(".locktest.");
  return kBuffer - 1 - kSuffix - decimal_digits(std::max(ranks - 1, 0));
}

namespace {

// The path handed to MPI-IO: for an output, its temporary (output_path::temp_path_for's form).
void require_mpi_io_fits(const FileArgument& f, bool output, int ranks) {
  const std::size_t limit = mpi_io_path_limit(ranks);
  const std::size_t extra = output ? kTempExtra + (fs::path(f.path).has_parent_path() ? 0 : 2) : 0;
  if (f.path.size() + extra <= limit) return;
  throw Error(quoted(f) + ": the path is " + std::to_string(f.path.size()) +
              " characters, too long for MPI-IO: Open MPI 4.1 opens names of at most " + std::to_string(limit) +
              " characters with " + std::to_string(ranks) + " ranks" +
              (output ? " and the temporary file written first adds " + std::to_string(extra) : std::string()) +
              ". Use a path of at most " + std::to_string(limit - extra) +
              " characters (a relative path, a shorter folder or name, or a symbolic link to the folder)");
}

}  // namespace

void require_safe_outputs(const std::vector<FileArgument>& inputs, const std::vector<FileArgument>& outputs, int ranks) {
  for (const auto& in : inputs)
    if (in.mpi_io) require_mpi_io_fits(in, false, ranks);
  std::vector<Identity> input_ids, output_ids;
  for (const auto& in : inputs) input_ids.push_back(identify(in.path));
  for (const auto& out : outputs) {
    if (out.path.empty()) throw Error("--" + out.option + ": the file name is empty");
    const std::string kind = special_file_kind(out.path);
    if (!kind.empty())
      throw Error(quoted(out) + ": is a " + kind + ", not a regular file; an output is written to a temporary file " +
                  "and renamed onto its name, which would replace it. Give the name of a file (absent or regular)");
    require_name_fits(out, true);
    if (out.mpi_io) require_mpi_io_fits(out, true, ranks);
    output_ids.push_back(identify(out.path));
  }
  for (std::size_t o = 0; o < outputs.size(); ++o) {
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].option == outputs[o].option || !same_file(output_ids[o], input_ids[i])) continue;
      throw Error(quoted(outputs[o]) + " is the same file as the input " + quoted(inputs[i]) +
                  ": writing it would destroy the input. Give the output another name");
    }
    for (std::size_t p = 0; p < o; ++p) {
      if (!same_file(output_ids[o], output_ids[p])) continue;
      throw Error(quoted(outputs[o]) + " and " + quoted(outputs[p]) +
                  " are the same file: one output would be lost under the other. Give them different names");
    }
  }
}

}  // namespace spmd::data
