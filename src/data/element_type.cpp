#include "spmd/data/element_type.hpp"

#include <cmath>

#include "spmd/runtime/check.hpp"

namespace spmd::data {

namespace {

// IEEE binary16 in native (little-endian) byte order, as numpy's float16 and h5py's type of
// it: HDF5 has no predefined one. Made once; lives until the library closes.
hid_t native_float16() {
  static const hid_t type = [] {
    const hid_t t = SPMD_CHECK_HDF5(H5Tcopy(H5T_NATIVE_FLOAT), "making the float16 memory type");
    SPMD_CHECK_HDF5(H5Tset_fields(t, 15, 10, 5, 0, 10), "laying out the float16 memory type");
    SPMD_CHECK_HDF5(H5Tset_size(t, 2), "sizing the float16 memory type");
    SPMD_CHECK_HDF5(H5Tset_precision(t, 16), "sizing the float16 memory type");
    SPMD_CHECK_HDF5(H5Tset_ebias(t, 15), "biasing the float16 memory type's exponent");
    return t;
  }();
  return type;
}

}  // namespace

float float16_to_float(std::uint16_t bits) {
  const bool negative = (bits & 0x8000u) != 0;
  const unsigned exponent = (bits >> 10) & 0x1fu, mantissa = bits & 0x3ffu;
  float magnitude;
  if (exponent == 0x1f)
    magnitude = mantissa == 0 ? HUGE_VALF : NAN;
  else if (exponent == 0)
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);  // zero and subnormals: mantissa x 2^-24
  else
    magnitude = std::ldexp(static_cast<float>(mantissa | 0x400u), static_cast<int>(exponent) - 25);
  return negative ? -magnitude : magnitude;
}

namespace {
struct TypeInfo {
  const char* name;
  std::size_t size;
};
// Indexed by ElementType, in its order.
constexpr TypeInfo kTypes[] = {{"int8", 1},  {"uint8", 1},   {"int16", 2},   {"uint16", 2},  {"int32", 4},  {"uint32", 4},
                               {"int64", 8}, {"uint64", 8}, {"float16", 2}, {"float32", 4}, {"float64", 8}};
}  // namespace

const char* to_string(ElementType type) { return kTypes[static_cast<int>(type)].name; }

std::size_t size_of(ElementType type) { return kTypes[static_cast<int>(type)].size; }

bool is_integer(ElementType type) {
  return type != ElementType::Float16 && type != ElementType::Float32 && type != ElementType::Float64;
}

hid_t native_hdf5_type(ElementType type) {
  switch (type) {
    case ElementType::Int8: return H5T_NATIVE_INT8;
    case ElementType::UInt8: return H5T_NATIVE_UINT8;
    case ElementType::Int16: return H5T_NATIVE_INT16;
    case ElementType::UInt16: return H5T_NATIVE_UINT16;
    case ElementType::Int32: return H5T_NATIVE_INT32;
    case ElementType::UInt32: return H5T_NATIVE_UINT32;
    case ElementType::Int64: return H5T_NATIVE_INT64;
    case ElementType::UInt64: return H5T_NATIVE_UINT64;
    case ElementType::Float16: return native_float16();
    case ElementType::Float32: return H5T_NATIVE_FLOAT;
    case ElementType::Float64: return H5T_NATIVE_DOUBLE;
  }
  return -1;
}

std::optional<ElementType> element_type_of(hid_t hdf5_type) {
  const H5T_class_t cls = H5Tget_class(hdf5_type);
  const std::size_t size = H5Tget_size(hdf5_type);
  if (cls == H5T_INTEGER) {
    const bool is_signed = H5Tget_sign(hdf5_type) == H5T_SGN_2;
    switch (size) {
      case 1: return is_signed ? ElementType::Int8 : ElementType::UInt8;
      case 2: return is_signed ? ElementType::Int16 : ElementType::UInt16;
      case 4: return is_signed ? ElementType::Int32 : ElementType::UInt32;
      case 8: return is_signed ? ElementType::Int64 : ElementType::UInt64;
      default: return std::nullopt;
    }
  }
  if (cls == H5T_FLOAT) {
    // Size alone would accept a custom float layout; the reads below assume IEEE
    // half/single/double, recognised by their exponent and mantissa widths.
    std::size_t sign_pos = 0, exp_pos = 0, exp_bits = 0, mant_pos = 0, mant_bits = 0;
    if (H5Tget_fields(hdf5_type, &sign_pos, &exp_pos, &exp_bits, &mant_pos, &mant_bits) < 0) return std::nullopt;
    if (size == 2 && exp_bits == 5 && mant_bits == 10) return ElementType::Float16;
    if (size == 4 && exp_bits == 8 && mant_bits == 23) return ElementType::Float32;
    if (size == 8 && exp_bits == 11 && mant_bits == 52) return ElementType::Float64;
  }
  return std::nullopt;
}

std::string describe_hdf5_type(hid_t hdf5_type) {
  const H5T_class_t cls = H5Tget_class(hdf5_type);
  const std::size_t size = H5Tget_size(hdf5_type);
  const bool big_endian = (cls == H5T_INTEGER || cls == H5T_FLOAT) && H5Tget_order(hdf5_type) == H5T_ORDER_BE;
  std::string name;
  if (const auto known = element_type_of(hdf5_type)) {
    name = to_string(*known);
  } else {
    switch (cls) {
      case H5T_INTEGER: name = "int" + std::to_string(size * 8) + "-bit"; break;
      case H5T_FLOAT: name = "float" + std::to_string(size * 8); break;
      case H5T_STRING: name = "string"; break;
      case H5T_COMPOUND: name = "compound"; break;
      case H5T_ENUM: name = "enum"; break;
      case H5T_ARRAY: name = "array"; break;
      case H5T_VLEN: name = "variable-length"; break;
      case H5T_OPAQUE: name = "opaque"; break;
      case H5T_BITFIELD: name = "bitfield"; break;
      case H5T_REFERENCE: name = "reference"; break;
      case H5T_TIME: name = "time"; break;
      default: name = "unknown type"; break;
    }
  }
  if (big_endian && size > 1) name += " (big-endian)";
  return name;
}

}  // namespace spmd::data
