// The per-ISA kernel tables, defined in cnn_kernels_avx2.cpp and cnn_kernels_avx512.cpp and
// chosen by kernels_for() in cnn_kernels.cpp. Not a public header.
#pragma once
#include "spmd/models/cnn_kernels.hpp"

namespace spmd::models::cnn_cpu {
const Kernels& avx2_kernels();
const Kernels& avx512_kernels();  // call only when isa_supported(Isa::Avx512)
}  // namespace spmd::models::cnn_cpu
