#pragma once
// Which instruction sets spmd's own CPU kernels may use on this host: what the CPU and the OS
// support (libgcc's check covers the CPU flags and the OS saving the vector state), capped by
// the environment variable SPMD_MAX_CPU_ISA.
//
// Why a cap: the kernels pick their variant at run time, so a suite run on an AVX-512 machine
// never runs the AVX2 paths that an AVX2-only host (Zen 3, many Xeons' E-cores, laptops) takes.
// SPMD_MAX_CPU_ISA=avx2 makes this host behave as one, for every kernel at once, as
// ONEDNN_MAX_CPU_ISA does for oneDNN and OPENBLAS_CORETYPE for OpenBLAS.
#include <string>

namespace spmd::runtime {

enum class CpuLevel {
  portable,  // no explicit vector code: the scalar variants, where a kernel has one
  avx2,      // AVX2 + FMA (the build's x86-64-v3 baseline)
  avx512,    // AVX-512 F/VL/DQ/BW
};

const char* to_string(CpuLevel level);

// The highest level the kernels may use: the host's, lowered to SPMD_MAX_CPU_ISA when it is
// set. Throws spmd::Error naming the variable when its value is not one of the levels.
CpuLevel cpu_level();
bool cpu_allows(CpuLevel level);  // level <= cpu_level()

// The host's own level, before the cap (for the start-up line: "avx2 (SPMD_MAX_CPU_ISA; host avx512)").
CpuLevel host_cpu_level();
// "" when no cap is set; otherwise " (SPMD_MAX_CPU_ISA=avx2 on a host with avx512)".
std::string cpu_cap_note();

}  // namespace spmd::runtime
