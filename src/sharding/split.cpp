#include "spmd/sharding/split.hpp"

#include <string>

#include "spmd/runtime/error.hpp"

namespace spmd::sharding {

namespace {
void validate(std::int64_t n, int count) {
  if (n < 0) throw Error("split_for_process: the number of examples n must be >= 0 (got " + std::to_string(n) + ")");
  if (count < 1)
    throw Error("split_for_process: the process count must be >= 1 (got " + std::to_string(count) + ")");
}
}  // namespace

RowRange split_for_process(std::int64_t n, int index, int count) {
  validate(n, count);
  if (index < 0 || index >= count)
    throw Error("split_for_process: the process index must satisfy 0 <= index < count=" + std::to_string(count) +
                " (got " + std::to_string(index) + ")");
  const std::int64_t base = n / count;
  const std::int64_t extra = n % count;  // the first `extra` processes hold base + 1
  const std::int64_t i = index;
  const std::int64_t first = i * base + (i < extra ? i : extra);
  return {first, base + (i < extra ? 1 : 0)};
}

std::int64_t largest_split(std::int64_t n, int count) {
  validate(n, count);
  return (n + count - 1) / count;
}

}  // namespace spmd::sharding
