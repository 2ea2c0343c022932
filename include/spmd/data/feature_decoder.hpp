#pragma once
// How stored feature values become the float32 the models see, in one place: the loader
// (ShardReader::read_features), the rows kept as stored (load_stored_shard: the ensemble's
// sets) and the rows streamed from the file (spmd eval) all decode through a FeatureDecoder,
// so that each gives the same bits for the same stored value.
//
// The conversion is FeatureScale's (dataset.hpp):
//   uint8, auto          a table of float(v / 255.0) (numpy's `images / 255.0` then float32)
//   other types, auto    static_cast<float>(v) (exact below 2^24); none: the same, uint8 too
//   factor f (/ d)       float(double(v) * f / d)
// Checks, as the loader makes them: float16, float32 and float64 values must be finite (the message
// names the row and element), and a float64 must stay inside the float32 range once scaled.
// Images (FeatureScale::images) under auto of another type than uint8 must lie in [0, 1]
// over every rank's rows: FeatureRange collects the values, require_scaled_images agrees.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "spmd/data/dataset.hpp"
#include "spmd/data/element_type.hpp"

namespace spmd::runtime {
class Context;
}

namespace spmd::data {

class FeatureDecoder {
 public:
  // where: how messages name the data ("'f.h5': features dataset 'images'").
  FeatureDecoder(ElementType stored, const FeatureScale& scale, std::string where);

  ElementType stored() const { return stored_; }
  std::size_t element_bytes() const { return size_of(stored_); }
  const FeatureScale& scale() const { return scale_; }
  const std::string& where() const { return where_; }

  // True when the stored values already are the floats the models see (float32 without a
  // factor): rows can then be used where they lie, without decoding.
  bool in_place() const { return stored_ == ElementType::Float32 && scale_.mode != FeatureScale::Mode::Factor; }

  // out[i] = the float32 of stored element i (stored: `elements` values of stored(), in
  // native byte order; any alignment). Bitwise what the loader gives.
  void decode(const std::byte* stored, std::int64_t elements, float* out) const;

  // uint8: the float of every byte value (what decode() gives, for a model that decodes
  // bytes where it computes: a GPU); other types: nullptr.
  const std::array<float, 256>* byte_table() const {
    return stored_ == ElementType::UInt8 ? &byte_table_ : nullptr;
  }

  // Throws spmd::Error, naming the row (first_row is the first one's index in the dataset)
  // and the element, for a value the loader refuses. Integer types never fail.
  void check(const std::byte* stored, std::int64_t first_row, std::int64_t rows, std::int64_t row_elements) const;

  // Whether decoded values must be checked against [0, 1] (images, auto, not uint8).
  bool checks_image_range() const {
    return scale_.images && scale_.mode == FeatureScale::Mode::Auto && stored_ != ElementType::UInt8;
  }

 private:
  ElementType stored_;
  FeatureScale scale_;
  std::string where_;
  std::array<float, 256> byte_table_{};  // uint8: every value decoded once
  bool bytes_divide_by_255_ = false;      // uint8: the table is float(v) / 255.0f (auto)
};

// The extent of decoded values beyond [0, 1] seen on this rank (0 when all lie inside).
struct FeatureRange {
  double below = 0;  // max(0, -min)
  double above = 0;  // max(0, max)
  void add(const float* values, std::int64_t n);
};

// Collective: the ranks' ranges combined; every rank throws the same CollectiveError, naming
// the range, the dtype and the option to set, when images look unscaled.
void require_scaled_images(const runtime::Context& ctx, FeatureRange range, const FeatureDecoder& decoder);

}  // namespace spmd::data
