#include "spmd/data/serial_csr_reader.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "spmd/data/h5_file.hpp"
#include "spmd/runtime/check.hpp"
#include "spmd/runtime/error.hpp"
#include "spmd/runtime/time_account.hpp"
#include "row_read.hpp"

namespace spmd::data {

namespace {

std::string part_of(const std::string& group, const char* part) {
  return group.empty() || group.back() == '/' ? group + part : group + "/" + part;
}

// One range [first, first + count) of a 1-D dataset into out (count values of mem_type).
void read_range(hid_t dataset, hid_t space, hid_t mem_type, hid_t xfer, std::int64_t first, std::int64_t count,
                void* out, const std::string& hint) {
  if (count == 0) return;
  const H5Dataspace mem_space = select_rows(space, first, count, hint.c_str());
  SPMD_CHECK_HDF5(H5Dread(dataset, mem_type, mem_space.get(), space, xfer, out), hint.c_str());
}

}  // namespace

SerialCsrReader::SerialCsrReader(std::string path, const SparseMatrixInfo& expected)
    : path_(std::move(path)),
      where_("'" + path_ + "': sparse matrix '" + expected.group + "'"),
      info_(expected),
      file_(path_, "the sparse matrix '" + expected.group + "'") {
  runtime::TimeScope io(runtime::TimeCategory::Io);
  const auto now = probe_sparse_matrix(file_, info_.group);
  if (!now || now->rows != info_.rows || now->columns != info_.columns || now->nonzeros != info_.nonzeros ||
      now->values_type != info_.values_type || now->indices_type != info_.indices_type ||
      now->indptr_type != info_.indptr_type)
    throw Error(where_ + " is now " + (now ? now->describe() : std::string("no sparse matrix")) + ", not the " +
                info_.describe() + " read when the run started: was the file replaced while it was read?");
  indptr_ = open_dataset(file_.file(), path_, part_of(info_.group, "indptr"), "sparse indptr");
  indices_ = open_dataset(file_.file(), path_, part_of(info_.group, "indices"), "sparse indices");
  values_ = open_dataset(file_.file(), path_, part_of(info_.group, "data"), "sparse data");
  indptr_space_ = H5Dataspace(SPMD_CHECK_HDF5(H5Dget_space(indptr_.get()), where_.c_str()));
  indices_space_ = H5Dataspace(SPMD_CHECK_HDF5(H5Dget_space(indices_.get()), where_.c_str()));
  values_space_ = H5Dataspace(SPMD_CHECK_HDF5(H5Dget_space(values_.get()), where_.c_str()));
  strict_ = H5PropList(SPMD_CHECK_HDF5(H5Pcreate(H5P_DATASET_XFER), where_.c_str()));
  refuse_lossy_conversions(strict_.get());
}

void SerialCsrReader::read_dense(std::int64_t first_row, std::int64_t count, float* out) {
  runtime::TimeScope io(runtime::TimeCategory::Io);
  const std::string rows_text = "rows [" + std::to_string(first_row) + ", " + std::to_string(first_row + count) + ")";
  if (first_row < 0 || count < 0 || first_row > info_.rows || count > info_.rows - first_row)
    throw Error(where_ + ": cannot read " + rows_text + " of " + std::to_string(info_.rows));
  if (count == 0) return;
  const std::string hint = "reading " + rows_text + " of " + where_;
  row_start_.resize(static_cast<std::size_t>(count + 1));
  read_range(indptr_.get(), indptr_space_.get(), H5T_NATIVE_INT64, strict_.get(), first_row, count + 1,
             row_start_.data(), hint + " (indptr)");
  const std::int64_t base = row_start_.front(), end = row_start_.back();
  if (base < 0 || end > info_.nonzeros)
    throw Error(where_ + ": indptr of " + rows_text + " points outside the " + std::to_string(info_.nonzeros) +
                " entries of data (" + std::to_string(base) + " .. " + std::to_string(end) + ")");
  for (std::int64_t r = 0; r < count; ++r)
    if (row_start_[static_cast<std::size_t>(r + 1)] < row_start_[static_cast<std::size_t>(r)])
      throw Error(where_ + ": indptr decreases at row " + std::to_string(first_row + r) + " (" +
                  std::to_string(row_start_[static_cast<std::size_t>(r)]) + " then " +
                  std::to_string(row_start_[static_cast<std::size_t>(r + 1)]) + ")");
  const std::int64_t entries = end - base;
  columns_.resize(static_cast<std::size_t>(entries));
  entries_.resize(static_cast<std::size_t>(entries));
  read_range(indices_.get(), indices_space_.get(), H5T_NATIVE_INT64, strict_.get(), base, entries, columns_.data(),
             hint + " (indices)");
  read_range(values_.get(), values_space_.get(), H5T_NATIVE_FLOAT, strict_.get(), base, entries, entries_.data(),
             hint + " (data, as float32)");
  const auto width = static_cast<std::size_t>(info_.columns);
  std::fill(out, out + static_cast<std::size_t>(count) * width, 0.0f);
  for (std::int64_t r = 0; r < count; ++r) {
    float* row = out + static_cast<std::size_t>(r) * width;
    for (std::int64_t k = row_start_[static_cast<std::size_t>(r)] - base; k < row_start_[static_cast<std::size_t>(r + 1)] - base;
         ++k) {
      const std::int64_t column = columns_[static_cast<std::size_t>(k)];
      const float value = entries_[static_cast<std::size_t>(k)];
      if (column < 0 || column >= info_.columns)
        throw Error(where_ + ": row " + std::to_string(first_row + r) + " has column index " + std::to_string(column) +
                    ", outside [0, " + std::to_string(info_.columns) + ")");
      if (!std::isfinite(value)) {
        char text[32];
        std::snprintf(text, sizeof text, "%g", static_cast<double>(value));
        throw Error(where_ + ": row " + std::to_string(first_row + r) + " has value " + text + " (column " +
                    std::to_string(column) + "); values must be finite as float32");
      }
      row[column] += value;  // a repeated column adds up, as scipy's toarray()
    }
  }
}

}  // namespace spmd::data
