#include "spmd/data/serial_row_reader.hpp"

#include <vector>

#include "spmd/data/h5_file.hpp"
#include "spmd/runtime/check.hpp"
#include "spmd/runtime/time_account.hpp"
#include "row_read.hpp"

namespace spmd::data {

SerialRowReader::SerialRowReader(std::string path, std::string key, const DatasetShape& expected)
    : path_(std::move(path)), key_(std::move(key)), shape_(expected) {
  runtime::TimeScope io(runtime::TimeCategory::Io);
  const std::string where = "'" + path_ + "': features dataset '" + key_ + "'";
  // Its shape was read through open_file_parallel, which checked the file.
  file_ = open_checked_file_serial(path_, "features '" + key_ + "'");
  dataset_ = open_dataset(file_.get(), path_, key_, "features");
  std::vector<std::int64_t> expected_dims{shape_.rows};
  expected_dims.insert(expected_dims.end(), shape_.sample_shape.begin(), shape_.sample_shape.end());
  const auto dims = dataset_dims(dataset_.get());
  if (dims != expected_dims)
    throw Error(where + " now has shape " + format_shape(dims) + ", not the " + format_shape(expected_dims) +
                " read when the run started: was the file replaced while it was read?");
  H5Datatype type(SPMD_CHECK_HDF5(H5Dget_type(dataset_.get()), where.c_str()));
  const auto element = element_type_of(type.get());
  if (!element || *element != shape_.features_type)
    throw Error(where + " now has dtype " + describe_hdf5_type(type.get()) + ", not the " +
                to_string(shape_.features_type) +
                " read when the run started: was the file replaced while it was read?");
  row_bytes_ = shape_.sample_size * static_cast<std::int64_t>(size_of(shape_.features_type));
  file_space_ = H5Dataspace(SPMD_CHECK_HDF5(H5Dget_space(dataset_.get()), where.c_str()));
}

void SerialRowReader::read(std::int64_t first_row, std::int64_t count, std::byte* out) {
  runtime::TimeScope io(runtime::TimeCategory::Io);
  const std::string rows_text = "rows [" + std::to_string(first_row) + ", " + std::to_string(first_row + count) + ")";
  const std::string hint = "reading " + rows_text + " of features dataset '" + key_ + "' from '" + path_ + "'";
  if (first_row < 0 || count < 0 || first_row > shape_.rows || count > shape_.rows - first_row)
    throw Error("'" + path_ + "': cannot read " + rows_text + " of features dataset '" + key_ + "', which has " +
                std::to_string(shape_.rows) + " rows");
  if (count == 0) return;
  const H5Dataspace mem_space = select_rows(file_space_.get(), first_row, count, hint.c_str());
  SPMD_CHECK_HDF5(H5Dread(dataset_.get(), native_hdf5_type(shape_.features_type), mem_space.get(), file_space_.get(),
                          H5P_DEFAULT, out),
                  hint.c_str());
}

}  // namespace spmd::data
