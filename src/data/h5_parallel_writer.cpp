#include "spmd/data/h5_parallel_writer.hpp"

#include <unistd.h>

#include <filesystem>

#include "output_path.hpp"
#include "row_read.hpp"
#include "spmd/data/h5_file.hpp"
#include "spmd/data/output_set.hpp"
#include "spmd/runtime/agree.hpp"
#include "spmd/runtime/check.hpp"
#include "spmd/runtime/collectives.hpp"
#include "spmd/runtime/context.hpp"
#include "spmd/runtime/watchdog.hpp"
#include "spmd/runtime/time_account.hpp"

namespace spmd::data {

ParallelH5Writer::ParallelH5Writer(const runtime::Context& ctx, std::string final_path, std::uint64_t expected_bytes)
    : ctx_(ctx), final_path_(std::move(final_path)) {
  runtime::TimeScope io(runtime::TimeCategory::Io);
  // Rank 0 names the temporary file (its pid) and renames it at the end; every rank must
  // see the folder, or MPI-IO cannot open the file there.
  long pid = static_cast<long>(::getpid());
  runtime::broadcast(ctx_, std::span<long>(&pid, 1));
  runtime::agree_on(ctx_.comm(), [&] {
    try {
      output_path::require_writable_target(final_path_);
      if (ctx_.is_root()) {
        const std::string shortage = space_shortage(final_path_, expected_bytes + (std::uint64_t{1} << 16), "the file");
        if (!shortage.empty()) throw Error("cannot write '" + final_path_ + "': " + shortage);
      }
    } catch (const Error& e) {
      throw Error(rank_prefix(ctx_) + e.what());
    }
  });
  temp_path_ = output_path::temp_path_for(final_path_, pid);
  live_ = runtime::LiveFile(temp_path_);
  try {
    runtime::agree_on(ctx_.comm(), [&] {
      const std::string hint = "creating '" + temp_path_ + "' with MPI-IO for '" + final_path_ +
                               "' (is the folder writable by every rank and not full?)";
      // Metadata written collectively too.
      H5PropList fapl = mpio_file_access(ctx_, hint.c_str());
      SPMD_CHECK_HDF5(H5Pset_coll_metadata_write(fapl.get(), true), hint.c_str());
      runtime::Watchdog::Armed armed(ctx_.watchdog(), "H5Fcreate (MPI-IO, collective)");
      file_ = H5File(SPMD_CHECK_HDF5(H5Fcreate(temp_path_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), hint.c_str()));
      collective_xfer_ = collective_transfer(hint.c_str());
    });
  } catch (const CollectiveError&) {
    // Closing an MPI-IO file is collective; ranks whose create failed would not join.
    file_.release();
    discard();
    throw;
  }
}

ParallelH5Writer::~ParallelH5Writer() {
  runtime::TimeScope io(runtime::TimeCategory::Io);
  if (!committed_) discard();
}

void ParallelH5Writer::discard() noexcept {
  file_.reset();  // collective: every rank unwinds here together (errors are agreed)
  if (ctx_.is_root() && !temp_path_.empty()) {
    std::error_code ec;
    std::filesystem::remove(temp_path_, ec);
  }
  live_.release();
}

void ParallelH5Writer::require_open(const char* operation) const {
  if (committed_ || !file_.valid())
    throw Error(std::string("cannot ") + operation + " '" + final_path_ + "': the file was already committed");
}

void ParallelH5Writer::write_rows_raw(const std::string& name, ElementType type, const std::vector<std::int64_t>& shape,
                                      std::int64_t first_row, std::int64_t rows, const void* data,
                                      std::size_t elements) {
  require_open("write to");
  runtime::agree_on(ctx_.comm(), [&] {
    const std::string where = "dataset '" + name + "' of '" + final_path_ + "'";
    if (shape.empty()) throw Error(rank_prefix(ctx_) + "cannot write " + where + " by rows: it has no rows (a scalar)");
    std::uint64_t row_elements = 1;
    for (std::size_t k = 0; k < shape.size(); ++k) {
      if (shape[k] < 0) throw Error(rank_prefix(ctx_) + where + ": negative dimension in shape " + format_shape(shape));
      if (k > 0) row_elements *= static_cast<std::uint64_t>(shape[k]);
    }
    if (first_row < 0 || rows < 0 || first_row > shape[0] || rows > shape[0] - first_row)
      throw Error(rank_prefix(ctx_) + "rows [" + std::to_string(first_row) + ", " + std::to_string(first_row + rows) +
                  ") are outside " + where + ", which has " + std::to_string(shape[0]) + " rows");
    if (static_cast<std::uint64_t>(rows) * row_elements != elements)
      throw Error(rank_prefix(ctx_) + std::to_string(rows) + " rows of " + where + " hold " +
                  std::to_string(static_cast<std::uint64_t>(rows) * row_elements) + " values but " +
                  std::to_string(elements) + " were given");
    // Checked before writing (by the rank that renames the file): MPI-IO reports a full
    // disk as a bare "can't write data", and only once the job has done its work.
    if (ctx_.is_root()) {
      const std::string shortage = space_shortage(final_path_, element_count(shape) * size_of(type), where);
      if (!shortage.empty()) throw Error(rank_prefix(ctx_) + "cannot write '" + final_path_ + "': " + shortage);
    }
  });
  runtime::agree_on(ctx_.comm(), [&] {
    try {
      write_dataset(name, type, shape, first_row, rows, data, elements);
    } catch (const Error& e) {
      // The disk may have filled meanwhile (another job): say so, it is what to fix.
      const std::string shortage = space_shortage(final_path_, element_count(shape) * size_of(type), "dataset '" + name + "'");
      throw Error(shortage.empty() ? std::string(e.what()) : std::string(e.what()) + "; " + shortage);
    }
  });
}

void ParallelH5Writer::write_dataset(const std::string& name, ElementType type, const std::vector<std::int64_t>& shape,
                                     std::int64_t first_row, std::int64_t rows, const void* data, std::size_t elements) {
  runtime::TimeScope io(runtime::TimeCategory::Io);
  const std::string hint = "writing dataset '" + name + "' to '" + temp_path_ + "' (for '" + final_path_ + "')";
  H5Dataspace file_space = make_space(shape, hint.c_str());
  // No timestamps in the object header: the bytes must not depend on when it was written.
  H5PropList create_props(SPMD_CHECK_HDF5(H5Pcreate(H5P_DATASET_CREATE), hint.c_str()));
  SPMD_CHECK_HDF5(H5Pset_obj_track_times(create_props.get(), 0), hint.c_str());
  H5Dataset dataset = create_dataset(file_.get(), name, type, file_space.get(), create_props.get(), hint.c_str());
  // Each rank selects its rows (or nothing) in the file and a matching flat buffer.
  std::vector<hsize_t> start(shape.size(), 0), count(shape.begin(), shape.end());
  start[0] = static_cast<hsize_t>(first_row);
  count[0] = static_cast<hsize_t>(rows);
  const hsize_t flat = static_cast<hsize_t>(elements);
  H5Dataspace mem_space(SPMD_CHECK_HDF5(H5Screate_simple(1, &flat, nullptr), hint.c_str()));
  if (elements > 0) {
    SPMD_CHECK_HDF5(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr),
                    hint.c_str());
  } else {
    SPMD_CHECK_HDF5(H5Sselect_none(file_space.get()), hint.c_str());
    SPMD_CHECK_HDF5(H5Sselect_none(mem_space.get()), hint.c_str());
  }
  static const char kNothing = 0;  // HDF5 wants a non-null buffer even for no elements
  runtime::Watchdog::Armed armed(ctx_.watchdog(), "H5Dwrite (MPI-IO, collective)");
  SPMD_CHECK_HDF5(H5Dwrite(dataset.get(), native_hdf5_type(type), mem_space.get(), file_space.get(),
                           collective_xfer_.get(), elements > 0 ? data : &kNothing),
                  hint.c_str());
}

void ParallelH5Writer::set_attribute_string(const std::string& object, const std::string& name, const std::string& value) {
  runtime::TimeScope io(runtime::TimeCategory::Io);
  require_open("write an attribute to");
  runtime::agree_on(ctx_.comm(), [&] { write_attribute(file_.get(), object, name, value, final_path_); });
}

void ParallelH5Writer::set_attribute_int(const std::string& object, const std::string& name, std::int64_t value) {
  runtime::TimeScope io(runtime::TimeCategory::Io);
  require_open("write an attribute to");
  runtime::agree_on(ctx_.comm(), [&] { write_attribute(file_.get(), object, name, H5T_NATIVE_INT64, {}, &value, final_path_); });
}

void ParallelH5Writer::set_attribute_double(const std::string& object, const std::string& name, double value) {
  runtime::TimeScope io(runtime::TimeCategory::Io);
  require_open("write an attribute to");
  runtime::agree_on(ctx_.comm(), [&] { write_attribute(file_.get(), object, name, H5T_NATIVE_DOUBLE, {}, &value, final_path_); });
}

void ParallelH5Writer::commit(OutputSet* outputs) {
  runtime::TimeScope io(runtime::TimeCategory::Io);
  require_open("commit");
  runtime::agree_on(ctx_.comm(), [&] {
    const std::string hint = "finishing '" + temp_path_ + "' (for '" + final_path_ + "'; is the disk full?)";
    runtime::Watchdog::Armed armed(ctx_.watchdog(), "H5Fflush/H5Fclose (MPI-IO, collective)");
    SPMD_CHECK_HDF5(H5Fflush(file_.get(), H5F_SCOPE_GLOBAL), hint.c_str());
    if (file_.close() < 0) runtime::throw_hdf5_error("H5Fclose(file)", __FILE__, __LINE__, hint.c_str());
  });
  if (outputs) {
    outputs->stage(temp_path_, final_path_);
  } else {
    runtime::agree_on(ctx_.comm(), [&] {
      if (ctx_.is_root()) output_path::publish(temp_path_, final_path_);
    });
  }
  live_.release();
  committed_ = true;
}

}  // namespace spmd::data
