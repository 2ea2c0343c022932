#pragma once
// Splitting N examples over P processes (ranks), as tfds.split_for_jax_process does:
// contiguous, non-overlapping ranges in rank order; the first N % P ranks get one extra.
//   N=10000, P=6 -> sizes 1667 1667 1667 1667 1666 1666;  N=11, P=3 -> 4 4 3.
// A rank may get no rows (N < P); it must still take part in every collective.
#include <cstdint>

namespace spmd::sharding {

struct RowRange {
  std::int64_t first = 0;  // first row of the range
  std::int64_t size = 0;   // number of rows (may be 0)
  std::int64_t end() const { return first + size; }
  friend bool operator==(const RowRange&, const RowRange&) = default;
};

// Rows of process `index` among `count`. Throws spmd::Error unless n >= 0, count >= 1 and
// 0 <= index < count (the message names the argument and the constraint).
RowRange split_for_process(std::int64_t n, int index, int count);

// Size of the largest range (the first rank's): ceil(n / count). Same validation.
std::int64_t largest_split(std::int64_t n, int count);

}  // namespace spmd::sharding
