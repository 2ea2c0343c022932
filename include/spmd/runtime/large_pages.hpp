#pragma once
// Allocation for the big, long-lived arrays (a rank's shard of X, images): backed by 2 MiB
// transparent huge pages where the kernel allows it (Linux THP in "madvise" mode, the Debian
// default, gives huge pages only to regions that ask for them).
//
// Why: a shard is read end to end on every step. With 4 KiB pages, a 157 MB X takes 38,000
// TLB entries' worth of page walks per pass and as many first-touch page faults (costly in
// a VM); with 2 MiB pages, 75. Measured on the 2-vCPU Zen 4 VM: one streaming read of X
// 12.0 -> 10.0 ms. Nothing else changes: contents, alignment guarantees and results are
// the same, and where huge pages are unavailable the memory is ordinary.
#include <cstddef>
#include <new>
#include <vector>

namespace spmd::runtime {

// Below this size an allocation gets ordinary pages (operator new).
inline constexpr std::size_t kLargePageThreshold = std::size_t{4} << 20;

void* allocate_large(std::size_t bytes);          // throws std::bad_alloc
void deallocate_large(void* p, std::size_t bytes) noexcept;

template <class T>
struct LargePageAllocator {
  using value_type = T;
  LargePageAllocator() = default;
  template <class U>
  LargePageAllocator(const LargePageAllocator<U>&) noexcept {}  // NOLINT(google-explicit-constructor)
  T* allocate(std::size_t n) { return static_cast<T*>(allocate_large(n * sizeof(T))); }
  void deallocate(T* p, std::size_t n) noexcept { deallocate_large(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const LargePageAllocator<U>&) const noexcept { return true; }
};

// A std::vector whose storage, when large, sits on huge pages.
template <class T>
using LargeVector = std::vector<T, LargePageAllocator<T>>;

}  // namespace spmd::runtime
