#include "shard_labels.hpp"

#include <algorithm>
#include <limits>

#include "spmd/runtime/agree.hpp"
#include "spmd/runtime/collectives.hpp"

namespace spmd::data {

LabelScan read_labels_int32(const runtime::Context& ctx, ShardReader& reader, std::int64_t first_row, std::int64_t rows,
                            std::int64_t bound, int classes, std::vector<std::int32_t>& out) {
  runtime::agree_on(ctx.comm(), [&] { out.resize(static_cast<std::size_t>(std::max<std::int64_t>(rows, 0))); });
  // Every rank reads as many pieces (the reads are collective), some of them empty.
  std::int64_t pieces = (std::max<std::int64_t>(rows, 0) + kLabelPieceRows - 1) / kLabelPieceRows;
  runtime::allreduce_max(ctx, std::span<std::int64_t>(&pieces, 1));
  std::vector<std::int64_t> piece(static_cast<std::size_t>(std::min(std::max<std::int64_t>(rows, 0), kLabelPieceRows)));
  const std::int64_t limit = classes > 0 ? classes : bound;
  LabelScan scan;
  for (std::int64_t p = 0; p < pieces; ++p) {
    const std::int64_t done = p * kLabelPieceRows;
    const std::int64_t n = std::clamp<std::int64_t>(rows - done, 0, kLabelPieceRows);
    reader.read_labels(first_row + done, n, std::span<std::int64_t>(piece.data(), static_cast<std::size_t>(n)));
    std::int32_t* dst = out.data() + done;
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t v = piece[static_cast<std::size_t>(i)];
      if (v >= bound && scan.above_row < 0) scan = {first_row + done + i, v, scan.outside_row, scan.outside_value, scan.largest};
      if ((v < 0 || v >= limit) && scan.outside_row < 0) {
        scan.outside_row = first_row + done + i;
        scan.outside_value = v;
      }
      const bool fits = v >= 0 && v < bound && v <= std::numeric_limits<std::int32_t>::max();
      if (fits) scan.largest = std::max(scan.largest, v);
      dst[i] = fits ? static_cast<std::int32_t>(v) : -1;
    }
  }
  return scan;
}

}  // namespace spmd::data
