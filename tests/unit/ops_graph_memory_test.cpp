// The graph ops' memory refusals (Tensor::reset, scratch()): a size the node cannot hold is
// refused as TooLarge before the allocator is asked, counting what the same op was already
// granted and has not yet written (its output's pages are not yet taken from MemAvailable when
// it asks for its scratch: session 26 found a Conv pad of 2^24 OOM-killed that way). Sizes are
// fractions of the free memory read in the test: the property, on any machine.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "spmd/ops/graph_op.hpp"
#include "spmd/runtime/memory_limits.hpp"

namespace ops_graph_memory_test {

namespace {

using spmd::ops::ElemType;
using spmd::ops::OpMemoryScope;
using spmd::ops::Scratch;
using spmd::ops::Tensor;
using spmd::ops::TooLarge;

// Floats that take `fraction` of the smaller of the node's and this process's room; 0 where no
// limit is found or the room is too small to tell a refusal from a failed allocation.
std::int64_t floats_for(double fraction) {
  const double node = spmd::runtime::node_memory_room().bytes, own = spmd::runtime::address_space_room().bytes;
  const double room = std::min(node, own);
  if (!(room < 1e15) || room < 1e9) return 0;
  return static_cast<std::int64_t>(room * fraction / 4);
}

std::string what_of(const auto& call) {
  try {
    call();
  } catch (const TooLarge& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(GraphOpMemory, RefusesShapesPastTheLimitsBeforeAllocating) {
  Tensor t;
  EXPECT_NE(what_of([&] { t.reset(ElemType::Float32, {4, -1}); }).find("a negative dimension"), std::string::npos);
  EXPECT_NE(what_of([&] { t.reset(ElemType::Float32, {1 << 21, 1 << 20}); }).find("past 2^40 elements"), std::string::npos);
  EXPECT_NE(what_of([&] { t.reset(ElemType::Int64, {std::int64_t{1} << 62, 4}); }).find("past 2^40 elements"),
            std::string::npos);
  // A zero dimension anywhere is an empty tensor, however large the others.
  EXPECT_EQ(what_of([&] { t.reset(ElemType::Float32, {0, std::int64_t{1} << 50}); }), "");
  EXPECT_EQ(t.size(), 0);
}

TEST(GraphOpMemory, RefusesOneBufferLargerThanTheFreeMemory) {
  const std::int64_t too_many = floats_for(1.5);
  if (too_many == 0) GTEST_SKIP() << "no memory limit under 1e15 bytes found";
  Tensor t;
  const std::string said = what_of([&] { t.reset(ElemType::Float32, {too_many}); });
  EXPECT_NE(said.find("more than the"), std::string::npos) << said;
  EXPECT_NE(said.find(" free ("), std::string::npos) << said;
  EXPECT_TRUE(t.shape.empty()) << "a refused reset leaves the tensor as it was";
  EXPECT_NE(what_of([&] { spmd::ops::scratch(Scratch::Im2col, too_many); }).find("a scratch buffer of"), std::string::npos);
}

TEST(GraphOpMemory, OneOpsUnwrittenBuffersCountTogether) {
  const std::int64_t output = floats_for(0.45), buffer = floats_for(0.7);
  if (output == 0) GTEST_SKIP() << "no memory limit under 1e15 bytes found";
  {
    // Each alone fits; the two together pass the free memory (neither written: MemAvailable
    // does not see them).
    const OpMemoryScope op;
    Tensor y;
    EXPECT_EQ(what_of([&] { y.reset(ElemType::Float32, {output}); }), "");
    const std::string said = what_of([&] { spmd::ops::scratch(Scratch::Im2col, buffer); });
    // Under `ulimit -v` the output is already in the mapped address space the limit counts.
    const bool own_limit = spmd::runtime::address_space_room().bytes < 1e15;
    EXPECT_NE(said.find(own_limit ? "more than the" : "with the op's other new buffers"), std::string::npos) << said;
  }
  {
    // The next op starts a count of its own (the last op's outputs are written by then, or freed).
    const OpMemoryScope op;
    Tensor y;
    EXPECT_EQ(what_of([&] { y.reset(ElemType::Float32, {buffer}); }), "");
  }
  // A buffer reused at a size it already holds asks for nothing.
  const OpMemoryScope op;
  Tensor y;
  y.reset(ElemType::Float32, {output});
  EXPECT_EQ(what_of([&] { y.reset(ElemType::Float32, {output / 2}); }), "");
  EXPECT_EQ(what_of([&] { y.reset(ElemType::Float32, {output}); }), "");
}

}  // namespace ops_graph_memory_test
