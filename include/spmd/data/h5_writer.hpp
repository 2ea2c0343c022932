#pragma once
// Atomic HDF5 output: a file appears under its final name complete or not at all.
//
// The writer creates `<dir>/.<name>.tmp.<pid>` in the final file's folder (so the rename
// stays within one file system and is atomic), writes datasets and attributes there, and
// commit() flushes, closes, fsyncs and renames it onto the final name. If anything fails
// first, or the writer is destroyed without commit() (an exception unwinding), the
// temporary file is removed and an existing file under the final name is left untouched.
// A signal that ends the process mid-write removes it too (runtime::LiveFile); only a
// process killed outright (SIGKILL) leaves its `.NAME.tmp.PID` behind; the final name is safe.
//
// Writing is serial (HDF5's POSIX driver, one process). In an MPI job one rank writes:
// use write_on_root, which runs the writer on rank 0 and agrees on the outcome so every
// rank returns or throws together. The outputs (converted datasets, weights,
// checkpoints, reports) are small next to the inputs, so a parallel write would buy little.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "spmd/data/element_type.hpp"
#include "spmd/data/h5_handle.hpp"
#include "spmd/runtime/stop_request.hpp"

namespace spmd::runtime {
class Context;
}

namespace spmd::data {

class OutputSet;

class AtomicH5Writer {
 public:
  // Creates the temporary file. The folder of final_path must exist. Throws spmd::Error.
  explicit AtomicH5Writer(std::string final_path);
  // Without commit(): closes and removes the temporary file.
  ~AtomicH5Writer();
  AtomicH5Writer(const AtomicH5Writer&) = delete;
  AtomicH5Writer& operator=(const AtomicH5Writer&) = delete;

  const std::string& temp_path() const { return temp_path_; }

  // A dataset `name` (groups in the name are created: "model/w") of the given shape
  // (row-major; {} for a scalar) holding data, whose size must equal the shape's product.
  // T: int8 ... uint64, float, double (stored as the same type, little-endian native).
  template <class T>
  void write(const std::string& name, std::span<const T> data, const std::vector<std::int64_t>& shape) {
    write_raw(name, element_type_v<T>, data.data(), data.size(), shape);
  }
  template <class T>
  void write(const std::string& name, const std::vector<T>& data, const std::vector<std::int64_t>& shape) {
    write(name, std::span<const T>(data), shape);
  }
  void write_raw(const std::string& name, ElementType type, const void* data, std::size_t elements,
                 const std::vector<std::int64_t>& shape);

  // Attributes of `object`: "/" (or "") for the file itself, else a dataset or group
  // already written. An attribute written twice keeps the last value.
  void set_attribute_string(const std::string& object, const std::string& name, const std::string& value);
  void set_attribute_int(const std::string& object, const std::string& name, std::int64_t value);
  void set_attribute_double(const std::string& object, const std::string& name, double value);
  void set_attribute_ints(const std::string& object, const std::string& name, std::span<const std::int64_t> values);
  void set_attribute_doubles(const std::string& object, const std::string& name, std::span<const double> values);

  // Flush, close, fsync, rename onto final_path. After it the writer accepts nothing more.
  // With `outputs`, the finished temporary goes to that set instead (OutputSet::publish()
  // renames it with the run's other outputs).
  void commit(OutputSet* outputs = nullptr);

 private:
  void require_open(const char* operation) const;
  void write_attribute(const std::string& object, const std::string& name, hid_t type,
                       const std::vector<std::int64_t>& shape, const void* data);
  void discard() noexcept;

  std::string final_path_;
  std::string temp_path_;
  H5File file_;
  bool committed_ = false;
  runtime::LiveFile live_;  // the temporary file until it is renamed or removed
};

// Collective over ctx.comm(): rank 0 creates an AtomicH5Writer for path, calls fill on it
// and commits; the other ranks wait. Any failure on rank 0 is rethrown on every rank as
// spmd::CollectiveError.
void write_on_root(const runtime::Context& ctx, const std::string& path,
                   const std::function<void(AtomicH5Writer&)>& fill, OutputSet* outputs = nullptr);

}  // namespace spmd::data
