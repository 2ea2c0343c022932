// split_for_process against its definition: contiguous, covering, sizes differ by at most
// one, the first n % count ranks hold the extra row.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "spmd/runtime/error.hpp"
#include "spmd/sharding/split.hpp"

namespace {

using spmd::sharding::largest_split;
using spmd::sharding::RowRange;
using spmd::sharding::split_for_process;

std::vector<std::int64_t> sizes(std::int64_t n, int count) {
  std::vector<std::int64_t> out;
  for (int i = 0; i < count; ++i) out.push_back(split_for_process(n, i, count).size);
  return out;
}

TEST(ShardingSplit, NamedExamplesFromTheReference) {
  EXPECT_EQ(sizes(10000, 6), (std::vector<std::int64_t>{1667, 1667, 1667, 1667, 1666, 1666}));
  EXPECT_EQ(sizes(11, 3), (std::vector<std::int64_t>{4, 4, 3}));
  EXPECT_EQ(sizes(2, 4), (std::vector<std::int64_t>{1, 1, 0, 0}));
  EXPECT_EQ(split_for_process(10000, 5, 6), (RowRange{8334, 1666}));
  EXPECT_EQ(split_for_process(11, 2, 3), (RowRange{8, 3}));
}

TEST(ShardingSplit, EveryLayoutIsContiguousBalancedAndCovering) {
  for (std::int64_t n = 0; n <= 60; ++n) {
    for (int count = 1; count <= 9; ++count) {
      SCOPED_TRACE("n=" + std::to_string(n) + " count=" + std::to_string(count));
      std::int64_t expected_first = 0, smallest = n, largest = 0;
      for (int i = 0; i < count; ++i) {
        const RowRange r = split_for_process(n, i, count);
        EXPECT_EQ(r.first, expected_first) << "rank " << i << " does not start where rank " << i - 1 << " ended";
        EXPECT_GE(r.size, 0);
        // The first n % count ranks hold the extra row, the others none.
        EXPECT_EQ(r.size, n / count + (i < n % count ? 1 : 0)) << "rank " << i;
        smallest = std::min(smallest, r.size);
        largest = std::max(largest, r.size);
        expected_first = r.end();
      }
      EXPECT_EQ(expected_first, n) << "the ranges do not cover all rows";
      EXPECT_LE(largest - smallest, 1);
      EXPECT_EQ(largest_split(n, count), largest);
    }
  }
}

TEST(ShardingSplit, InvalidArgumentsNameTheConstraint) {
  auto message = [](auto fn) {
    try {
      fn();
    } catch (const spmd::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([] { split_for_process(10, 0, 0); }).find("process count must be >= 1"), std::string::npos);
  EXPECT_NE(message([] { split_for_process(10, 3, 3); }).find("0 <= index < count=3"), std::string::npos);
  EXPECT_NE(message([] { split_for_process(10, -1, 3); }).find("(got -1)"), std::string::npos);
  EXPECT_NE(message([] { split_for_process(-1, 0, 3); }).find("must be >= 0"), std::string::npos);
  EXPECT_NE(message([] { largest_split(5, 0); }).find("process count must be >= 1"), std::string::npos);
}

}  // namespace
