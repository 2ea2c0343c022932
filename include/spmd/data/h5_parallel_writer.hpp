#pragma once
// Atomic HDF5 output written by every rank at once: each rank writes its own rows of each
// dataset (a hyperslab of the first dimension) with collective MPI-IO transfers, so no rank
// gathers the whole output. Atomic as AtomicH5Writer (h5_writer.hpp), its temporary named
// by rank 0's pid; a signal that ends any rank removes it (runtime::LiveFile, on every rank:
// they share the folder).
//
// Every member is collective over ctx.comm(): all ranks call it in the same order with the
// same names, shapes and attribute values (HDF5's rule for metadata in parallel). Failures
// are agreed: every rank throws the same spmd::CollectiveError.
//
// The bytes of the file depend only on what is written, never on how many ranks wrote it
// (no timestamps; the same metadata operations in the same order), so an output can be
// compared byte for byte across layouts.
#include <cstdint>
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

class ParallelH5Writer {
 public:
  // Creates the temporary file. The folder of final_path must exist (on every rank) and have
  // room for expected_bytes (the datasets' bytes; 64 KiB more are asked for the metadata):
  // checked before anything is written, because a disk that fills inside HDF5's collective
  // calls can leave ranks waiting on the one that failed (the hang watchdog then ends the
  // job, but with a poorer message).
  ParallelH5Writer(const runtime::Context& ctx, std::string final_path, std::uint64_t expected_bytes);
  // Without commit(): closes (collectively) and removes the temporary file.
  ~ParallelH5Writer();
  ParallelH5Writer(const ParallelH5Writer&) = delete;
  ParallelH5Writer& operator=(const ParallelH5Writer&) = delete;

  // Creates dataset `name` of `shape` (shape[0] rows; groups in the name are created) and
  // writes this rank's rows [first_row, first_row + rows) from data (rows * the product of
  // shape[1:] values, row-major). The ranks' row ranges must not overlap; rows no rank
  // writes read as zero. rows may be 0.
  template <class T>
  void write_rows(const std::string& name, const std::vector<std::int64_t>& shape, std::int64_t first_row,
                  std::int64_t rows, std::span<const T> data) {
    write_rows_raw(name, element_type_v<T>, shape, first_row, rows, data.data(), data.size());
  }
  void write_rows_raw(const std::string& name, ElementType type, const std::vector<std::int64_t>& shape,
                      std::int64_t first_row, std::int64_t rows, const void* data, std::size_t elements);

  // Attributes of "/" or of a dataset already written; the same value on every rank.
  void set_attribute_string(const std::string& object, const std::string& name, const std::string& value);
  void set_attribute_int(const std::string& object, const std::string& name, std::int64_t value);
  void set_attribute_double(const std::string& object, const std::string& name, double value);

  // Flush, close, fsync, rename onto final_path (rank 0), agreed. Nothing more afterwards.
  // With `outputs`, the finished temporary is handed to that set instead of renamed: it
  // appears with the run's other outputs at OutputSet::publish().
  void commit(OutputSet* outputs = nullptr);

 private:
  void require_open(const char* operation) const;
  void write_dataset(const std::string& name, ElementType type, const std::vector<std::int64_t>& shape,
                     std::int64_t first_row, std::int64_t rows, const void* data, std::size_t elements);
  void discard() noexcept;

  const runtime::Context& ctx_;
  std::string final_path_;
  std::string temp_path_;
  H5File file_;
  H5PropList collective_xfer_;
  bool committed_ = false;
  runtime::LiveFile live_;
};

}  // namespace spmd::data
