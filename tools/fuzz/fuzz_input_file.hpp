#pragma once
// The readers under test take a path, so each fuzz input is written to a file of this
// process's own (fork mode runs many processes at once) under $TMPDIR first.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace spmd::fuzz {

// "$TMPDIR/spmd-fuzz-<stem>.<pid><suffix>", the same for the process's life.
inline std::string input_file_path(const char* stem, const char* suffix) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/spmd-fuzz-" + stem + "." + std::to_string(::getpid()) + suffix;
}

inline void write_input_file(const std::string& path, const std::uint8_t* data, std::size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) __builtin_trap();  // the harness itself is broken, not the code under test
  if (size && std::fwrite(data, 1, size, f) != size) __builtin_trap();
  std::fclose(f);
}

}  // namespace spmd::fuzz
