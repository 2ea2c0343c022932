#pragma once
// A folder for the output tests, removed with everything in it at the end, and what they
// look at: the names it holds and a file's bytes.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace spmd::test {

// The names in `folder`, sorted (hidden temporaries included).
inline std::vector<std::string> folder_entries(const std::filesystem::path& folder) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(folder)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

inline std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

class TestFolder {
 public:
  // A new folder under the system's temporary one, named after `prefix`, this process and a
  // counter; or, with `owner` false, the name only (another process makes and removes it).
  explicit TestFolder(const std::string& prefix, bool owner = true) : owner_(owner) {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            (prefix + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    if (owner_) std::filesystem::create_directories(path_);
  }
  explicit TestFolder(std::filesystem::path path, bool owner) : path_(std::move(path)), owner_(owner) {
    if (owner_) std::filesystem::create_directories(path_);
  }
  ~TestFolder() {
    std::error_code ec;
    if (owner_) std::filesystem::remove_all(path_, ec);
  }
  TestFolder(const TestFolder&) = delete;
  TestFolder& operator=(const TestFolder&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::vector<std::string> entries() const { return folder_entries(path_); }

 private:
  std::filesystem::path path_;
  bool owner_;
};

}  // namespace spmd::test
