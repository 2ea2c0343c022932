// libFuzzer target: the Fashion-MNIST IDX importer (spmd::data::read_idx_images and
// read_idx_labels). The importer reads from a path, so each input is written to this
// process's own temporary file first. zlib reads a plain file through the same gzip
// interface, so both raw and gzip-compressed IDX inputs reach the parser.
//
// A finding is anything other than a clean spmd::Error: a crash, a sanitizer report, an
// exception of another type, or an allocation above libFuzzer's -malloc_limit_mb (an
// importer must not reserve memory a damaged header merely claims).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "fuzz_input_file.hpp"
#include "spmd/data/fashion_mnist.hpp"
#include "spmd/runtime/error.hpp"

namespace {

const std::string& input_path() {
  static const std::string path = spmd::fuzz::input_file_path("idx", ".gz");
  return path;
}

void write_input(const std::uint8_t* data, std::size_t size) { spmd::fuzz::write_input_file(input_path(), data, size); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  write_input(data, size);
  try {
    const auto images = spmd::data::read_idx_images(input_path());
    // A successful decode must be self-consistent.
    if (images.pixels.size() != static_cast<std::size_t>(images.count) * images.rows * images.cols) __builtin_trap();
  } catch (const spmd::Error&) {
  }
  try {
    (void)spmd::data::read_idx_labels(input_path());
  } catch (const spmd::Error&) {
  }
  return 0;
}
