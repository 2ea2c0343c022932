#pragma once
// Reading small HDF5 files whole, on one process: weights, checkpoints, the files
// AtomicH5Writer makes, `spmd data info`. Large inputs are read per rank with
// dataset.hpp's ShardReader instead.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "spmd/data/element_type.hpp"
#include "spmd/data/h5_handle.hpp"

namespace spmd::data {

// An attribute's value in one of three forms, with its shape ({} for a scalar).
struct AttributeValue {
  enum class Kind { Text, Integers, Floats, Other };
  Kind kind = Kind::Other;
  std::vector<std::int64_t> shape;
  std::string text;                   // Kind::Text (a scalar string; arrays are joined by ", ")
  std::vector<std::int64_t> integers; // Kind::Integers (unsigned values above 2^63-1 are rejected)
  std::vector<double> floats;         // Kind::Floats
  std::string type_name;              // describe_hdf5_type of the stored type
};

class H5Reader {
 public:
  // Serial read-only open (see h5_file.hpp). Throws spmd::Error naming the file.
  // what: what the file is to the caller, for messages ("the checkpoint (--checkpoint)").
  explicit H5Reader(std::string path, const std::string& what = "its datasets");

  const std::string& path() const { return path_; }
  hid_t file() const { return file_.get(); }

  std::vector<std::string> datasets() const;  // absolute names, sorted
  bool has_dataset(const std::string& name) const;
  std::vector<std::int64_t> shape(const std::string& name) const;
  ElementType element_type(const std::string& name) const;

  // The whole dataset, row-major, converted to T (T: int8 ... uint64, float, double).
  // A value that does not fit T (out of range, or a fraction read as an integer) is an
  // error, not a silent clamp. Throws spmd::Error naming the file and dataset.
  template <class T>
  std::vector<T> read(const std::string& name) const;
  // As read<T>, and checks the shape first.
  template <class T>
  std::vector<T> read(const std::string& name, const std::vector<std::int64_t>& expected_shape) const;

  // A 1-D dataset as int64 in pieces of at most piece_rows values, handed to consume in
  // order: memory bounded whatever the rows (a label column of 2^31 rows and more). The
  // conversion is strict, as read<T>'s.
  void read_int64_pieces(const std::string& name, std::int64_t piece_rows,
                         const std::function<void(std::span<const std::int64_t>)>& consume) const;

  bool has_group(const std::string& name) const;  // a group (not a dataset) of that name
  // Element `index` of a 1-D dataset, strictly as int64 (as read<T>).
  std::int64_t read_int64_at(const std::string& name, std::int64_t index) const;
  // A 1-D dataset of strings (variable or fixed length, as h5py and AnnData write them).
  std::vector<std::string> read_strings(const std::string& name) const;

  // Attributes of `object` ("/" or "" for the file, else a dataset or group name).
  std::vector<std::string> attribute_names(const std::string& object) const;
  bool has_attribute(const std::string& object, const std::string& name) const;
  AttributeValue attribute(const std::string& object, const std::string& name) const;
  // Typed shortcuts for scalars; throw spmd::Error when missing or of another kind.
  std::string attribute_string(const std::string& object, const std::string& name) const;
  std::int64_t attribute_int(const std::string& object, const std::string& name) const;
  double attribute_double(const std::string& object, const std::string& name) const;  // integers convert

 private:
  void read_into(const std::string& name, ElementType type, void* out, std::size_t elements) const;

  std::string path_;
  H5File file_;
};

}  // namespace spmd::data
