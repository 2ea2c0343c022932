#include "spmd/data/h5_writer.hpp"

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "output_path.hpp"
#include "spmd/data/output_set.hpp"
#include "spmd/data/h5_file.hpp"
#include "spmd/runtime/agree.hpp"
#include "spmd/runtime/check.hpp"
#include "spmd/runtime/context.hpp"
#include "spmd/runtime/time_account.hpp"
#include "spmd/runtime/io_deadline.hpp"

namespace spmd::data {

namespace fs = std::filesystem;

H5Dataspace make_space(const std::vector<std::int64_t>& shape, const char* hint) {
  if (shape.empty()) return H5Dataspace(SPMD_CHECK_HDF5(H5Screate(H5S_SCALAR), hint));
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  return H5Dataspace(SPMD_CHECK_HDF5(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), hint));
}

H5Dataset create_dataset(hid_t file, const std::string& name, ElementType type, hid_t space, hid_t create_props,
                         const char* hint) {
  H5PropList link_props(SPMD_CHECK_HDF5(H5Pcreate(H5P_LINK_CREATE), hint));
  SPMD_CHECK_HDF5(H5Pset_create_intermediate_group(link_props.get(), 1), hint);
  return H5Dataset(SPMD_CHECK_HDF5(
      H5Dcreate2(file, name.c_str(), native_hdf5_type(type), space, link_props.get(), create_props, H5P_DEFAULT), hint));
}

void write_attribute(hid_t file, const std::string& object, const std::string& name, hid_t type,
                     const std::vector<std::int64_t>& shape, const void* data, const std::string& final_path) {
  const std::string target = object.empty() ? "/" : object;
  const std::string hint = "writing attribute '" + name + "' of '" + target + "' in '" + final_path + "'";
  const htri_t exists = SPMD_CHECK_HDF5(H5Aexists_by_name(file, target.c_str(), name.c_str(), H5P_DEFAULT), hint.c_str());
  if (exists > 0) SPMD_CHECK_HDF5(H5Adelete_by_name(file, target.c_str(), name.c_str(), H5P_DEFAULT), hint.c_str());
  H5Dataspace space = make_space(shape, hint.c_str());
  H5Attribute attr(SPMD_CHECK_HDF5(
      H5Acreate_by_name(file, target.c_str(), name.c_str(), type, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
      hint.c_str()));
  if (element_count(shape) > 0) SPMD_CHECK_HDF5(H5Awrite(attr.get(), type, data), hint.c_str());
}

void write_attribute(hid_t file, const std::string& object, const std::string& name, const std::string& text,
                     const std::string& final_path) {
  H5Datatype type(SPMD_CHECK_HDF5(H5Tcopy(H5T_C_S1), "creating a string type"));
  SPMD_CHECK_HDF5(H5Tset_size(type.get(), std::max<std::size_t>(text.size(), 1)), "sizing a string type");
  SPMD_CHECK_HDF5(H5Tset_strpad(type.get(), H5T_STR_NULLPAD), "padding a string type");
  SPMD_CHECK_HDF5(H5Tset_cset(type.get(), H5T_CSET_UTF8), "marking a string type UTF-8");
  const std::string padded = text.empty() ? std::string(1, '\0') : text;
  write_attribute(file, object, name, type.get(), {}, padded.data(), final_path);
}

AtomicH5Writer::AtomicH5Writer(std::string final_path) : final_path_(std::move(final_path)) {
  runtime::TimeScope io(runtime::TimeCategory::Io);
  output_path::require_writable_target(final_path_);
  temp_path_ = output_path::temp_path_for(final_path_, static_cast<long>(::getpid()));
  live_ = runtime::LiveFile(temp_path_);
  const std::string hint = "creating the temporary file '" + temp_path_ + "' for '" + final_path_ +
                           "' (is the folder writable and not full?)";
  try {
    const runtime::IoDeadline deadline("H5Fcreate", temp_path_);
    file_ = H5File(SPMD_CHECK_HDF5(H5Fcreate(temp_path_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), hint.c_str()));
  } catch (const Error& e) {
    // Asked before the partial file goes (which frees what it held).
    const std::string shortage = space_shortage(final_path_, 4096, "a new HDF5 file");
    discard();  // H5Fcreate may have made the file before failing (a full disk)
    throw Error(shortage.empty() ? std::string(e.what()) : std::string(e.what()) + "; " + shortage);
  }
}

AtomicH5Writer::~AtomicH5Writer() {
  runtime::TimeScope io(runtime::TimeCategory::Io);
  if (!committed_) discard();
}

void AtomicH5Writer::discard() noexcept {
  file_.reset();
  std::error_code ec;
  if (!temp_path_.empty()) fs::remove(temp_path_, ec);
  live_.release();
}

void AtomicH5Writer::require_open(const char* operation) const {
  if (committed_ || !file_.valid())
    throw Error(std::string("cannot ") + operation + " '" + final_path_ + "': the file was already committed");
}

void AtomicH5Writer::write_raw(const std::string& name, ElementType type, const void* data, std::size_t elements,
                               const std::vector<std::int64_t>& shape) {
  runtime::TimeScope io(runtime::TimeCategory::Io);
  require_open("write to");
  for (auto d : shape)
    if (d < 0) throw Error("cannot write dataset '" + name + "' to '" + final_path_ + "': negative dimension in shape " + format_shape(shape));
  if (element_count(shape) != elements)
    throw Error("cannot write dataset '" + name + "' to '" + final_path_ + "': shape " + format_shape(shape) + " holds " +
                std::to_string(element_count(shape)) + " values but " + std::to_string(elements) + " were given");
  const std::string shortage =
      space_shortage(final_path_, static_cast<std::uint64_t>(elements) * size_of(type), "dataset '" + name + "'");
  if (!shortage.empty()) throw Error("cannot write '" + final_path_ + "': " + shortage);
  const std::string hint = "writing dataset '" + name + "' to '" + temp_path_ + "' (for '" + final_path_ + "')";
  H5Dataspace space = make_space(shape, hint.c_str());
  H5Dataset dataset = create_dataset(file_.get(), name, type, space.get(), H5P_DEFAULT, hint.c_str());
  // Nothing to transfer for an empty dataset (and HDF5 rejects a null buffer).
  if (elements > 0)
    SPMD_CHECK_HDF5(H5Dwrite(dataset.get(), native_hdf5_type(type), H5S_ALL, H5S_ALL, H5P_DEFAULT, data), hint.c_str());
}

void AtomicH5Writer::write_attribute(const std::string& object, const std::string& name, hid_t type,
                                     const std::vector<std::int64_t>& shape, const void* data) {
  runtime::TimeScope io(runtime::TimeCategory::Io);
  require_open("write an attribute to");
  data::write_attribute(file_.get(), object, name, type, shape, data, final_path_);
}

void AtomicH5Writer::set_attribute_string(const std::string& object, const std::string& name, const std::string& value) {
  runtime::TimeScope io(runtime::TimeCategory::Io);
  require_open("write an attribute to");
  data::write_attribute(file_.get(), object, name, value, final_path_);
}

void AtomicH5Writer::set_attribute_int(const std::string& object, const std::string& name, std::int64_t value) {
  write_attribute(object, name, H5T_NATIVE_INT64, {}, &value);
}

void AtomicH5Writer::set_attribute_double(const std::string& object, const std::string& name, double value) {
  write_attribute(object, name, H5T_NATIVE_DOUBLE, {}, &value);
}

void AtomicH5Writer::set_attribute_ints(const std::string& object, const std::string& name,
                                        std::span<const std::int64_t> values) {
  write_attribute(object, name, H5T_NATIVE_INT64, {static_cast<std::int64_t>(values.size())}, values.data());
}

void AtomicH5Writer::set_attribute_doubles(const std::string& object, const std::string& name,
                                           std::span<const double> values) {
  write_attribute(object, name, H5T_NATIVE_DOUBLE, {static_cast<std::int64_t>(values.size())}, values.data());
}

void AtomicH5Writer::commit(OutputSet* outputs) {
  runtime::TimeScope io(runtime::TimeCategory::Io);
  require_open("commit");
  try {
    const std::string hint = "finishing '" + temp_path_ + "' (for '" + final_path_ + "'; is the disk full?)";
    SPMD_CHECK_HDF5(H5Fflush(file_.get(), H5F_SCOPE_GLOBAL), hint.c_str());
    if (file_.close() < 0) runtime::throw_hdf5_error("H5Fclose(file)", __FILE__, __LINE__, hint.c_str());
    if (outputs)
      outputs->stage(temp_path_, final_path_);
    else
      output_path::publish(temp_path_, final_path_);
  } catch (...) {
    discard();
    throw;
  }
  live_.release();
  committed_ = true;
}

void write_on_root(const runtime::Context& ctx, const std::string& path,
                   const std::function<void(AtomicH5Writer&)>& fill, OutputSet* outputs) {
  runtime::agree_on(ctx.comm(), [&] {
    if (!ctx.is_root()) return;
    try {
      AtomicH5Writer writer(path);
      fill(writer);
      writer.commit(outputs);
    } catch (const std::exception& e) {
      // The check macros already name the rank: say it once.
      const std::string what = e.what(), rank = "rank " + std::to_string(ctx.rank()) + ": ";
      throw Error(rank + "writing '" + path + "': " + (what.rfind(rank, 0) == 0 ? what.substr(rank.size()) : what));
    }
  });
}

}  // namespace spmd::data
