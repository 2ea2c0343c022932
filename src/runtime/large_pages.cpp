#include "spmd/runtime/large_pages.hpp"

#include <sys/mman.h>

#include <cstdlib>

namespace spmd::runtime {

namespace {
constexpr std::size_t kHugePage = std::size_t{2} << 20;
std::size_t round_to_huge_pages(std::size_t bytes) { return (bytes + kHugePage - 1) / kHugePage * kHugePage; }
}  // namespace

void* allocate_large(std::size_t bytes) {
  if (bytes < kLargePageThreshold) return ::operator new(bytes);
  const std::size_t rounded = round_to_huge_pages(bytes);
  void* p = std::aligned_alloc(kHugePage, rounded);
  if (p == nullptr) throw std::bad_alloc();
  // Advice only: where THP is off (or "never"), this fails harmlessly and the pages stay small.
  // It must come before the first touch, which is when the kernel picks the page size.
  (void)::madvise(p, rounded, MADV_HUGEPAGE);
  return p;
}

void deallocate_large(void* p, std::size_t bytes) noexcept {
  if (p == nullptr) return;
  if (bytes < kLargePageThreshold) {
    ::operator delete(p);
    return;
  }
  std::free(p);
}

}  // namespace spmd::runtime
