#include "spmd/runtime/cpu_features.hpp"

#include <cstdlib>
#include <string>

#include "spmd/runtime/error.hpp"

namespace spmd::runtime {
namespace {

constexpr const char* kCapVariable = "SPMD_MAX_CPU_ISA";

CpuLevel detect() {
  // The explicit init makes this safe when first reached from a static initialiser.
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512bw"))
    return CpuLevel::avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return CpuLevel::avx2;
  return CpuLevel::portable;
}

// Parsed on every call until it succeeds: a bad value keeps failing with its message.
CpuLevel capped() {
  const CpuLevel host = host_cpu_level();
  const char* cap = std::getenv(kCapVariable);
  if (cap == nullptr || *cap == '\0') return host;
  const std::string text = cap;
  for (CpuLevel level : {CpuLevel::portable, CpuLevel::avx2, CpuLevel::avx512})
    if (text == to_string(level)) return level < host ? level : host;
  throw Error(std::string(kCapVariable) + "='" + text + "' is not an instruction set level: expected one of portable, avx2, avx512");
}

}  // namespace

const char* to_string(CpuLevel level) {
  switch (level) {
    case CpuLevel::portable: return "portable";
    case CpuLevel::avx2: return "avx2";
    case CpuLevel::avx512: return "avx512";
  }
  return "?";
}

CpuLevel host_cpu_level() {
  static const CpuLevel host = detect();
  return host;
}

CpuLevel cpu_level() {
  static const CpuLevel level = capped();
  return level;
}

bool cpu_allows(CpuLevel level) { return level <= cpu_level(); }

std::string cpu_cap_note() {
  const char* cap = std::getenv(kCapVariable);
  if (cap == nullptr || *cap == '\0') return "";
  return std::string(" (") + kCapVariable + "=" + cap + " on a host with " + to_string(host_cpu_level()) + ")";
}

}  // namespace spmd::runtime
