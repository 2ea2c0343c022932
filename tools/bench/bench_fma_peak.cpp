// The FMA peak of one core: independent fused multiply-add chains (enough to cover the FMA
// latency on every current x86 core) in the widest vectors the CPU runs, timed over about a
// quarter of a second. What tools/bench/onnx_speed.sh divides achieved FLOP/s by.
//   bench_fma_peak [--json]   prints GFLOP/s (2 per multiply-add) and the instruction set
#include <immintrin.h>

#include <chrono>
#include <cstdio>
#include <cstring>

namespace {

constexpr int kChains = 16;
constexpr long kIterations = 4'000'000;

double rate(int lanes, double seconds) { return 2.0 * kChains * lanes * static_cast<double>(kIterations) / seconds / 1e9; }

// One timing in vectors of Width floats; Ops gives the register type and its operations. A
// template instantiated inside the target region below gets that region's instruction set.
#define SPMD_FMA_TIMING(NAME, REG, LANES, SET1, FMA, STORE)                                   \
  double NAME() {                                                                           \
    REG acc[kChains];                                                                       \
    for (int c = 0; c < kChains; ++c) acc[c] = SET1(static_cast<float>(c) * 1e-3f);         \
    const REG a = SET1(0.999999f), b = SET1(1e-7f);                                         \
    const auto t0 = std::chrono::steady_clock::now();                                       \
    for (long i = 0; i < kIterations; ++i)                                                  \
      _Pragma("GCC unroll 16") for (int c = 0; c < kChains; ++c) acc[c] = FMA(acc[c], a, b); \
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); \
    float sink[LANES], total = 0.0f;  /* every chain's result is used: none is dead code */  \
    for (int c = 0; c < kChains; ++c) {                                                     \
      STORE(sink, acc[c]);                                                                  \
      total += sink[0];                                                                     \
    }                                                                                       \
    if (total == 42.0f) std::puts("");                                                      \
    return rate(LANES, s);                                                                  \
  }

SPMD_FMA_TIMING(gflops_avx2, __m256, 8, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_storeu_ps)

#pragma GCC push_options
#pragma GCC target("avx512f")
SPMD_FMA_TIMING(gflops_avx512, __m512, 16, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_storeu_ps)
#pragma GCC pop_options

}  // namespace

int main(int argc, char** argv) {
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f");
  double best = 0.0;
  for (int r = 0; r < 3; ++r) {  // the best of 3: the peak, not what a neighbour left
    const double g = avx512 ? gflops_avx512() : gflops_avx2();
    best = g > best ? g : best;
  }
  if (argc > 1 && std::strcmp(argv[1], "--json") == 0)
    std::printf("{\"gflops\": %.2f, \"isa\": \"%s\"}\n", best, avx512 ? "avx512" : "avx2");
  else
    std::printf("FMA peak, one core: %.1f GFLOP/s (%s)\n", best, avx512 ? "AVX-512" : "AVX2");
  return 0;
}
