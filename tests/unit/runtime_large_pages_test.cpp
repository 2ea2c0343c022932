// LargeVector: an ordinary vector whose big buffers ask for transparent huge pages.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "spmd/runtime/large_pages.hpp"

using spmd::runtime::kLargePageThreshold;
using spmd::runtime::LargeVector;

namespace {

// kB of AnonHugePages in /proc/self/smaps for the mapping that contains address p.
long huge_kb_at(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  while (std::getline(smaps, line)) {
    std::uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = lo <= a && a < hi;
      continue;
    }
    if (inside && line.rfind("AnonHugePages:", 0) == 0) return std::stol(line.substr(14));
  }
  return -1;
}

std::string thp_mode() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string s;
  std::getline(f, s);
  return s;
}

TEST(LargePages, BigVectorsAreAlignedZeroedAndUsable) {
  const std::size_t n = 3 * kLargePageThreshold / sizeof(float) + 5;
  LargeVector<float> v(n);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(v.data()) % (std::size_t{2} << 20), 0u);
  for (std::size_t i = 0; i < n; i += 4099) EXPECT_EQ(v[i], 0.0f);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i % 1000);
  LargeVector<float> copy = v;
  EXPECT_EQ(copy, v);
  v.resize(10);  // shrinking keeps the buffer; a small vector is an ordinary allocation
  LargeVector<float> small(100, 1.5f);
  EXPECT_EQ(small[99], 1.5f);
}

TEST(LargePages, BigVectorsGetHugePagesWhereTheKernelOffersThem) {
  const std::string mode = thp_mode();
  if (mode.find("[never]") != std::string::npos || mode.empty())
    GTEST_SKIP() << "transparent huge pages are off here (" << mode << ")";
  LargeVector<float> v(8 * (std::size_t{2} << 20) / sizeof(float));  // 16 MiB, touched by the zero fill
  const long kb = huge_kb_at(v.data());
  if (kb == 0) GTEST_SKIP() << "the kernel gave no huge page right now (memory fragmented?); mode " << mode;
  EXPECT_GT(kb, 0) << "mode " << mode;
}

}  // namespace
