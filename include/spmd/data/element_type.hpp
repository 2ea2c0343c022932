#pragma once
// Numeric element types as stored on disk, and their mapping to HDF5 types.
// Byte order is not part of the type: a big-endian float32 dataset is Float32, and HDF5
// converts it while reading into the native type.
#include <hdf5.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace spmd::data {

// Float16 (numpy's float16, IEEE binary16) has no C++20 type: its values are read as their
// bits (std::uint16_t) and widened with float16_to_float. Features only; never labels.
enum class ElementType { Int8, UInt8, Int16, UInt16, Int32, UInt32, Int64, UInt64, Float16, Float32, Float64 };

// "int8", "uint8", ..., "float16", "float32", "float64" (numpy's names).
const char* to_string(ElementType type);
std::size_t size_of(ElementType type);
bool is_integer(ElementType type);

// The HDF5 native (in-memory) type, e.g. H5T_NATIVE_FLOAT (float16: little-endian IEEE
// binary16, made once). Owned by the library; do not close.
hid_t native_hdf5_type(ElementType type);

// The element type of an HDF5 datatype, or nullopt for anything else (strings, compounds,
// non-IEEE floats, enums, ...).
std::optional<ElementType> element_type_of(hid_t hdf5_type);

// The float32 of an IEEE binary16 value (exact: every float16 is a float32), given its bits.
float float16_to_float(std::uint16_t bits);

// Human-readable description of any HDF5 datatype for messages and `data info`:
// "float32", "int64", "float32 (big-endian)", "string", "compound", "float16", ...
std::string describe_hdf5_type(hid_t hdf5_type);

// ElementType of a C++ type (compile-time).
template <class T>
struct ElementTypeOf;
template <> struct ElementTypeOf<std::int8_t> { static constexpr ElementType value = ElementType::Int8; };
template <> struct ElementTypeOf<std::uint8_t> { static constexpr ElementType value = ElementType::UInt8; };
template <> struct ElementTypeOf<std::int16_t> { static constexpr ElementType value = ElementType::Int16; };
template <> struct ElementTypeOf<std::uint16_t> { static constexpr ElementType value = ElementType::UInt16; };
template <> struct ElementTypeOf<std::int32_t> { static constexpr ElementType value = ElementType::Int32; };
template <> struct ElementTypeOf<std::uint32_t> { static constexpr ElementType value = ElementType::UInt32; };
template <> struct ElementTypeOf<std::int64_t> { static constexpr ElementType value = ElementType::Int64; };
template <> struct ElementTypeOf<std::uint64_t> { static constexpr ElementType value = ElementType::UInt64; };
template <> struct ElementTypeOf<float> { static constexpr ElementType value = ElementType::Float32; };
template <> struct ElementTypeOf<double> { static constexpr ElementType value = ElementType::Float64; };
template <class T>
inline constexpr ElementType element_type_v = ElementTypeOf<T>::value;

}  // namespace spmd::data
