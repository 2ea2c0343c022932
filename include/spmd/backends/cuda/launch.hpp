#pragma once
// Launch geometry of the element-wise kernels: they loop with a grid stride, so the grid
// is capped and any element count (int64) works with the same code.
#include <algorithm>
#include <cstdint>

namespace spmd::backends::cuda {

inline constexpr int kThreadsPerBlock = 256;
// Enough blocks to fill the largest GPUs several times over.
inline constexpr std::int64_t kMaxBlocks = 16384;

// Blocks for n elements at kThreadsPerBlock threads each (>= 1 even for n == 0, so that a
// launch never has an empty grid; the kernels' loops then do nothing).
inline unsigned blocks_for(std::int64_t n) {
  const std::int64_t blocks = (n + kThreadsPerBlock - 1) / kThreadsPerBlock;
  return static_cast<unsigned>(std::clamp<std::int64_t>(blocks, 1, kMaxBlocks));
}

}  // namespace spmd::backends::cuda
