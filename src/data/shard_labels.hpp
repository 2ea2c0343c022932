#pragma once
// Labels read into a shard's int32 column through a bounded int64 piece, so that a shard's
// labels cost 4 bytes per row at peak (not a whole int64 copy, 12 bytes per row), with the
// facts the loader's checks need, found on the way.
#include <cstdint>
#include <vector>

#include "spmd/data/dataset.hpp"

namespace spmd::data {

// Rows of labels widened to int64 at once (8 MiB).
inline constexpr std::int64_t kLabelPieceRows = std::int64_t{1} << 20;

struct LabelScan {
  std::int64_t above_row = -1, above_value = 0;      // first label >= bound (an id, not a class)
  std::int64_t outside_row = -1, outside_value = 0;  // first label < 0, or >= classes when classes > 0
  std::int64_t largest = -1;                         // of the labels in [0, bound)
};

// Collective (every rank calls it, whatever its rows). Reads rows [first_row, first_row +
// rows) into out (resized); a label outside int32 is stored as -1, and reported in the scan.
LabelScan read_labels_int32(const runtime::Context& ctx, ShardReader& reader, std::int64_t first_row, std::int64_t rows,
                            std::int64_t bound, int classes, std::vector<std::int32_t>& out);

}  // namespace spmd::data
