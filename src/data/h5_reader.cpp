#include "spmd/data/h5_reader.hpp"

#include <algorithm>

#include "spmd/data/h5_file.hpp"
#include "spmd/runtime/check.hpp"
#include "spmd/runtime/time_account.hpp"
#include "row_read.hpp"

namespace spmd::data {

namespace {

// HDF5 clamps out-of-range values silently by default; a weight or label that does not
// fit the requested type must be an error instead. Rounding an integer to a float is fine,
// and so are infinities and NaN between floating-point types.
H5T_conv_ret_t refuse_lossy_conversion(H5T_conv_except_t except, hid_t, hid_t dst_type, void*, void*, void*) {
  if (except == H5T_CONV_EXCEPT_PRECISION) return H5T_CONV_UNHANDLED;
  const bool to_float = H5Tget_class(dst_type) == H5T_FLOAT;
  if (to_float && (except == H5T_CONV_EXCEPT_PINF || except == H5T_CONV_EXCEPT_NINF || except == H5T_CONV_EXCEPT_NAN))
    return H5T_CONV_UNHANDLED;
  return H5T_CONV_ABORT;
}

H5PropList strict_transfer() {
  H5PropList xfer(SPMD_CHECK_HDF5(H5Pcreate(H5P_DATASET_XFER), "creating a transfer property list"));
  refuse_lossy_conversions(xfer.get());
  return xfer;
}

std::vector<std::int64_t> space_dims(hid_t space) {
  const int rank = SPMD_CHECK_HDF5(H5Sget_simple_extent_ndims(space), "reading an attribute's rank");
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  if (rank > 0) SPMD_CHECK_HDF5(H5Sget_simple_extent_dims(space, dims.data(), nullptr), "reading an attribute's shape");
  return std::vector<std::int64_t>(dims.begin(), dims.end());
}

std::string trim_fixed_string(const char* data, std::size_t size) {
  std::string s(data, size);
  while (!s.empty() && (s.back() == '\0' || s.back() == ' ')) s.pop_back();
  const auto nul = s.find('\0');
  return nul == std::string::npos ? s : s.substr(0, nul);
}

herr_t collect_attribute_name(hid_t, const char* name, const H5A_info_t*, void* out) {
  static_cast<std::vector<std::string>*>(out)->emplace_back(name);
  return 0;
}

std::string object_or_root(const std::string& object) { return object.empty() ? "/" : object; }

}  // namespace

void refuse_lossy_conversions(hid_t xfer) {
  SPMD_CHECK_HDF5(H5Pset_type_conv_cb(xfer, refuse_lossy_conversion, nullptr), "setting a conversion check");
}

bool H5Reader::has_group(const std::string& name) const {
  runtime::TimeScope io(runtime::TimeCategory::Io);
  if (name.empty() || name == "/") return true;
  // H5Oget_info fails on a missing intermediate group: every prefix must exist first.
  for (std::size_t at = name.find('/', 1); ; at = name.find('/', at + 1)) {
    const std::string prefix = name.substr(0, at);
    if (!prefix.empty() && prefix != "/" && H5Lexists(file_.get(), prefix.c_str(), H5P_DEFAULT) <= 0) {
      H5Eclear2(H5E_DEFAULT);
      return false;
    }
    if (at == std::string::npos) break;
  }
  H5O_info_t info;
  if (H5Oget_info_by_name2(file_.get(), name.c_str(), &info, H5O_INFO_BASIC, H5P_DEFAULT) < 0) {
    H5Eclear2(H5E_DEFAULT);
    return false;
  }
  return info.type == H5O_TYPE_GROUP;
}

std::int64_t H5Reader::read_int64_at(const std::string& name, std::int64_t index) const {
  runtime::TimeScope io(runtime::TimeCategory::Io);
  const auto dims = shape(name);
  if (dims.size() != 1 || index < 0 || index >= dims[0])
    throw Error("'" + path_ + "': dataset '" + name + "' (shape " + format_shape(dims) + ") has no element " +
                std::to_string(index));
  H5Dataset dataset = open_dataset(file_.get(), path_, name, "requested dataset");
  H5Dataspace file_space(SPMD_CHECK_HDF5(H5Dget_space(dataset.get()), "reading a dataset's space"));
  const H5Dataspace memory = select_rows(file_space.get(), index, 1, "selecting one element of a dataset");
  H5PropList xfer = strict_transfer();
  std::int64_t value = 0;
  if (H5Dread(dataset.get(), H5T_NATIVE_INT64, memory.get(), file_space.get(), xfer.get(), &value) < 0) {
    H5Eclear2(H5E_DEFAULT);
    throw Error("'" + path_ + "': element " + std::to_string(index) + " of dataset '" + name +
                "' cannot be read as int64 (not an integer, or the file is damaged)");
  }
  return value;
}

std::vector<std::string> H5Reader::read_strings(const std::string& name) const {
  runtime::TimeScope io(runtime::TimeCategory::Io);
  const auto dims = shape(name);
  if (dims.size() != 1) throw Error("'" + path_ + "': dataset '" + name + "' is not 1-D (shape " + format_shape(dims) + ")");
  H5Dataset dataset = open_dataset(file_.get(), path_, name, "requested dataset");
  const std::string hint = "reading the strings of '" + name + "' in '" + path_ + "'";
  H5Datatype type(SPMD_CHECK_HDF5(H5Dget_type(dataset.get()), hint.c_str()));
  if (H5Tget_class(type.get()) != H5T_STRING)
    throw Error("'" + path_ + "': dataset '" + name + "' has dtype " + describe_hdf5_type(type.get()) + ", not strings");
  const auto n = static_cast<std::size_t>(dims[0]);
  std::vector<std::string> out;
  out.reserve(n);
  if (H5Tis_variable_str(type.get()) > 0) {
    H5Datatype mem(SPMD_CHECK_HDF5(H5Tcopy(H5T_C_S1), hint.c_str()));
    SPMD_CHECK_HDF5(H5Tset_size(mem.get(), H5T_VARIABLE), hint.c_str());
    SPMD_CHECK_HDF5(H5Tset_cset(mem.get(), H5Tget_cset(type.get())), hint.c_str());
    std::vector<char*> strings(n, nullptr);
    if (n > 0) SPMD_CHECK_HDF5(H5Dread(dataset.get(), mem.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, strings.data()), hint.c_str());
    for (char* s : strings) out.emplace_back(s ? s : "");
    if (n > 0) {
      H5Dataspace space(SPMD_CHECK_HDF5(H5Dget_space(dataset.get()), hint.c_str()));
      H5Dvlen_reclaim(mem.get(), space.get(), H5P_DEFAULT, strings.data());
    }
  } else {
    const std::size_t size = H5Tget_size(type.get());
    std::vector<char> bytes(n * size);
    if (n > 0) SPMD_CHECK_HDF5(H5Dread(dataset.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data()), hint.c_str());
    for (std::size_t i = 0; i < n; ++i) out.push_back(trim_fixed_string(bytes.data() + i * size, size));
  }
  return out;
}

H5Reader::H5Reader(std::string path, const std::string& what) : path_(std::move(path)) {
  runtime::TimeScope io(runtime::TimeCategory::Io);
  file_ = open_file_serial(path_, what);
}

std::vector<std::string> H5Reader::datasets() const { return list_datasets(file_.get()); }

bool H5Reader::has_dataset(const std::string& name) const { return dataset_exists(file_.get(), name); }

std::vector<std::int64_t> H5Reader::shape(const std::string& name) const {
  runtime::TimeScope io(runtime::TimeCategory::Io);
  H5Dataset dataset = open_dataset(file_.get(), path_, name, "requested dataset");
  return dataset_dims(dataset.get());
}

ElementType H5Reader::element_type(const std::string& name) const {
  runtime::TimeScope io(runtime::TimeCategory::Io);
  H5Dataset dataset = open_dataset(file_.get(), path_, name, "requested dataset");
  H5Datatype type(SPMD_CHECK_HDF5(H5Dget_type(dataset.get()), "reading a dataset's type"));
  const auto element = element_type_of(type.get());
  if (!element)
    throw Error("'" + path_ + "': dataset '" + name + "' has dtype " + describe_hdf5_type(type.get()) +
                ", not a numeric array");
  return *element;
}

void H5Reader::read_into(const std::string& name, ElementType type, void* out, std::size_t elements) const {
  runtime::TimeScope io(runtime::TimeCategory::Io);
  element_type(name);  // refuses what is not a numeric array
  if (elements == 0) return;
  H5Dataset dataset = open_dataset(file_.get(), path_, name, "requested dataset");
  H5PropList xfer = strict_transfer();
  if (H5Dread(dataset.get(), native_hdf5_type(type), H5S_ALL, H5S_ALL, xfer.get(), out) < 0) {
    H5Eclear2(H5E_DEFAULT);
    throw Error("'" + path_ + "': dataset '" + name + "' cannot be read as " + to_string(type) +
                " (a value is out of range, non-finite or fractional for that type, or the file is damaged)");
  }
}

void H5Reader::read_int64_pieces(const std::string& name, std::int64_t piece_rows,
                                 const std::function<void(std::span<const std::int64_t>)>& consume) const {
  runtime::TimeScope io(runtime::TimeCategory::Io);
  const auto dims = shape(name);
  if (dims.size() != 1) throw Error("'" + path_ + "': dataset '" + name + "' is not 1-D");
  H5Dataset dataset = open_dataset(file_.get(), path_, name, "requested dataset");
  H5Dataspace file_space(SPMD_CHECK_HDF5(H5Dget_space(dataset.get()), "reading a dataset's space"));
  H5PropList xfer = strict_transfer();
  std::vector<std::int64_t> piece(static_cast<std::size_t>(std::min(dims[0], piece_rows)));
  for (std::int64_t first = 0; first < dims[0]; first += piece_rows) {
    const std::int64_t count = std::min(piece_rows, dims[0] - first);
    const H5Dataspace memory = select_rows(file_space.get(), first, count, "selecting a piece of a dataset");
    if (H5Dread(dataset.get(), H5T_NATIVE_INT64, memory.get(), file_space.get(), xfer.get(), piece.data()) < 0) {
      H5Eclear2(H5E_DEFAULT);
      throw Error("'" + path_ + "': dataset '" + name + "' cannot be read as int64 at rows " + std::to_string(first) +
                  ".." + std::to_string(first + count - 1) +
                  " (a value out of range, or the file is damaged)");
    }
    consume(std::span<const std::int64_t>(piece.data(), static_cast<std::size_t>(count)));
  }
}

template <class T>
std::vector<T> H5Reader::read(const std::string& name) const {
  const auto dims = shape(name);
  std::vector<T> out(static_cast<std::size_t>(element_count(dims)));
  read_into(name, element_type_v<T>, out.data(), out.size());
  return out;
}

template <class T>
std::vector<T> H5Reader::read(const std::string& name, const std::vector<std::int64_t>& expected_shape) const {
  const auto dims = shape(name);
  if (dims != expected_shape)
    throw Error("'" + path_ + "': dataset '" + name + "' has shape " + format_shape(dims) + ", expected " +
                format_shape(expected_shape));
  return read<T>(name);
}

#define SPMD_INSTANTIATE_READ(T)                                                  \
  template std::vector<T> H5Reader::read<T>(const std::string&) const;            \
  template std::vector<T> H5Reader::read<T>(const std::string&, const std::vector<std::int64_t>&) const;
SPMD_INSTANTIATE_READ(std::int8_t)
SPMD_INSTANTIATE_READ(std::uint8_t)
SPMD_INSTANTIATE_READ(std::int16_t)
SPMD_INSTANTIATE_READ(std::uint16_t)
SPMD_INSTANTIATE_READ(std::int32_t)
SPMD_INSTANTIATE_READ(std::uint32_t)
SPMD_INSTANTIATE_READ(std::int64_t)
SPMD_INSTANTIATE_READ(std::uint64_t)
SPMD_INSTANTIATE_READ(float)
SPMD_INSTANTIATE_READ(double)
#undef SPMD_INSTANTIATE_READ

std::vector<std::string> H5Reader::attribute_names(const std::string& object) const {
  runtime::TimeScope io(runtime::TimeCategory::Io);
  std::vector<std::string> names;
  const std::string target = object_or_root(object);
  const std::string hint = "listing the attributes of '" + target + "' in '" + path_ + "'";
  SPMD_CHECK_HDF5(H5Aiterate_by_name(file_.get(), target.c_str(), H5_INDEX_NAME, H5_ITER_INC, nullptr,
                                     collect_attribute_name, &names, H5P_DEFAULT),
                  hint.c_str());
  return names;
}

bool H5Reader::has_attribute(const std::string& object, const std::string& name) const {
  runtime::TimeScope io(runtime::TimeCategory::Io);
  const std::string target = object_or_root(object);
  if (target != "/" && !H5Lexists(file_.get(), target.c_str(), H5P_DEFAULT)) {
    H5Eclear2(H5E_DEFAULT);
    return false;
  }
  const htri_t exists = H5Aexists_by_name(file_.get(), target.c_str(), name.c_str(), H5P_DEFAULT);
  H5Eclear2(H5E_DEFAULT);
  return exists > 0;
}

AttributeValue H5Reader::attribute(const std::string& object, const std::string& name) const {
  runtime::TimeScope io(runtime::TimeCategory::Io);
  const std::string target = object_or_root(object);
  if (!has_attribute(target, name))
    throw Error("'" + path_ + "': '" + target + "' has no attribute '" + name + "'");
  const std::string hint = "reading attribute '" + name + "' of '" + target + "' in '" + path_ + "'";
  H5Attribute attr(SPMD_CHECK_HDF5(H5Aopen_by_name(file_.get(), target.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT),
                                   hint.c_str()));
  H5Datatype type(SPMD_CHECK_HDF5(H5Aget_type(attr.get()), hint.c_str()));
  H5Dataspace space(SPMD_CHECK_HDF5(H5Aget_space(attr.get()), hint.c_str()));
  AttributeValue value;
  value.shape = space_dims(space.get());
  value.type_name = describe_hdf5_type(type.get());
  const std::size_t n = static_cast<std::size_t>(element_count(value.shape));
  const H5T_class_t cls = H5Tget_class(type.get());
  if (cls == H5T_STRING) {
    value.kind = AttributeValue::Kind::Text;
    std::vector<std::string> parts;
    if (H5Tis_variable_str(type.get()) > 0) {
      H5Datatype mem(SPMD_CHECK_HDF5(H5Tcopy(H5T_C_S1), hint.c_str()));
      SPMD_CHECK_HDF5(H5Tset_size(mem.get(), H5T_VARIABLE), hint.c_str());
      SPMD_CHECK_HDF5(H5Tset_cset(mem.get(), H5Tget_cset(type.get())), hint.c_str());
      std::vector<char*> strings(n, nullptr);
      if (n > 0) SPMD_CHECK_HDF5(H5Aread(attr.get(), mem.get(), strings.data()), hint.c_str());
      for (char* s : strings) {
        parts.emplace_back(s ? s : "");
        if (s) H5free_memory(s);
      }
    } else {
      const std::size_t size = H5Tget_size(type.get());
      std::vector<char> bytes(n * size);
      if (n > 0) SPMD_CHECK_HDF5(H5Aread(attr.get(), type.get(), bytes.data()), hint.c_str());
      for (std::size_t i = 0; i < n; ++i) parts.push_back(trim_fixed_string(bytes.data() + i * size, size));
    }
    for (std::size_t i = 0; i < parts.size(); ++i) value.text += (i ? ", " : "") + parts[i];
  } else if (cls == H5T_INTEGER) {
    value.kind = AttributeValue::Kind::Integers;
    value.integers.resize(n);
    if (H5Tget_sign(type.get()) == H5T_SGN_NONE && H5Tget_size(type.get()) >= 8) {
      // HDF5 would clamp silently; read unsigned and refuse what int64 cannot hold.
      std::vector<std::uint64_t> raw(n);
      if (n > 0) SPMD_CHECK_HDF5(H5Aread(attr.get(), H5T_NATIVE_UINT64, raw.data()), hint.c_str());
      for (std::size_t i = 0; i < n; ++i) {
        if (raw[i] > static_cast<std::uint64_t>(INT64_MAX))
          throw Error("'" + path_ + "': attribute '" + name + "' of '" + target + "' holds " + std::to_string(raw[i]) +
                      ", above the int64 range");
        value.integers[i] = static_cast<std::int64_t>(raw[i]);
      }
    } else if (n > 0) {
      SPMD_CHECK_HDF5(H5Aread(attr.get(), H5T_NATIVE_INT64, value.integers.data()), hint.c_str());
    }
  } else if (cls == H5T_FLOAT) {
    value.kind = AttributeValue::Kind::Floats;
    value.floats.resize(n);
    if (n > 0) SPMD_CHECK_HDF5(H5Aread(attr.get(), H5T_NATIVE_DOUBLE, value.floats.data()), hint.c_str());
  }
  return value;
}

std::string H5Reader::attribute_string(const std::string& object, const std::string& name) const {
  const AttributeValue v = attribute(object, name);
  if (v.kind != AttributeValue::Kind::Text)
    throw Error("'" + path_ + "': attribute '" + name + "' of '" + object_or_root(object) + "' is " + v.type_name +
                ", not a string");
  return v.text;
}

std::int64_t H5Reader::attribute_int(const std::string& object, const std::string& name) const {
  const AttributeValue v = attribute(object, name);
  if (v.kind != AttributeValue::Kind::Integers || v.integers.size() != 1)
    throw Error("'" + path_ + "': attribute '" + name + "' of '" + object_or_root(object) + "' is " + v.type_name +
                " of shape " + format_shape(v.shape) + ", not an integer scalar");
  return v.integers[0];
}

double H5Reader::attribute_double(const std::string& object, const std::string& name) const {
  const AttributeValue v = attribute(object, name);
  if (v.kind == AttributeValue::Kind::Floats && v.floats.size() == 1) return v.floats[0];
  if (v.kind == AttributeValue::Kind::Integers && v.integers.size() == 1) return static_cast<double>(v.integers[0]);
  throw Error("'" + path_ + "': attribute '" + name + "' of '" + object_or_root(object) + "' is " + v.type_name +
              " of shape " + format_shape(v.shape) + ", not a numeric scalar");
}

}  // namespace spmd::data
