// Kernel templates shared by the per-ISA translation units (cnn_kernels_avx2.cpp,
// cnn_kernels_avx512.cpp). Each includes this file inside its own unnamed namespace after
// defining `Ops` (vector width, register type, load/store/broadcast/fma) and, for AVX-512,
// after `#pragma GCC target`, so every instantiation gets that unit's instruction set and
// internal linkage: no ODR clash between the two compilations of the same template.
//
// Not a public header: include only from those units. It includes nothing itself.

// ---------------------------------------------------------------------------------------
// GEMM. The micro-kernel keeps an MR x (NV vectors) tile of C in registers and walks k:
// NV loads from a row of B, MR broadcasts from A, MR*NV FMAs. No packing: the model's
// B panels are re-read from L1/L2, and A is read in place (a row pointer per tile row
// without transposition; MR consecutive floats of one row with it).

// What happens to a finished tile, with pointers already moved to the tile's position.
struct TileEpilogue {
  const float* bias = nullptr;      // bias of the tile's first column, or nullptr
  const float* row_bias = nullptr;  // bias of the tile's first row, or nullptr
  bool relu = false;
  float* params = nullptr;      // SGD update instead of storing C (C's layout), or nullptr
  float* trace = nullptr;
  float learning_rate = 0.0f;
  float momentum = 0.0f;

  TileEpilogue at(long offset, int column, int row = 0) const {
    TileEpilogue e = *this;
    if (e.bias != nullptr) e.bias += column;
    if (e.row_bias != nullptr) e.row_bias += row;
    if (e.params != nullptr) {
      e.params += offset;
      e.trace += offset;
    }
    return e;
  }
};

// Where row kk of B starts: every ldb floats (a matrix), or at a listed offset (the taps of
// a direct convolution: B's row for tap (c, ky, kx) is the padded image itself, shifted).
struct StridedRows {
  long ldb;
  long operator()(int kk) const { return kk * ldb; }
  long base(int k0) const { return k0 * ldb; }  // where the k block from k0 starts
  StridedRows from(int) const { return *this; }
};
struct OffsetRows {
  const long* offsets;
  long operator()(int kk) const { return offsets[kk]; }
  long base(int) const { return 0; }
  OffsetRows from(int k0) const { return {offsets + k0}; }
};

// The lane mask of a tail tile; whole-vector tiles get an empty type instead, so that their
// code and register use are what they were before tails existed.
struct NoMask {};
template <bool Tail>
struct TailMask {
  using type = NoMask;
};
template <>
struct TailMask<true> {
  using type = Ops::Mask;
};

// Tail = true: one vector of which only the first `mask`-selected columns exist (n % W
// columns at the right edge of C); every load and store of B, C, the bias and the SGD
// arrays is masked, so nothing past the last column is read or written.
template <int MR, int NV, bool ATrans, bool Tail = false, class Rows = StridedRows>
void gemm_tile(int k, const float* a, long lda, const float* b, Rows rows, float* c, long ldc, bool load_c,
               const TileEpilogue& ep, typename TailMask<Tail>::type mask = {}) {
  static_assert(!Tail || NV == 1, "the masked tail is one vector wide");
  using Reg = typename Ops::Reg;
  constexpr int W = Ops::kWidth;
  const auto load = [&](const float* p) {
    if constexpr (Tail)
      return Ops::load_masked(p, mask);
    else
      return Ops::load(p);
  };
  const auto store = [&](float* p, Reg v) {
    if constexpr (Tail)
      Ops::store_masked(p, mask, v);
    else
      Ops::store(p, v);
  };
  Reg acc[MR][NV];
  if (load_c) {
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) acc[i][j] = load(c + i * ldc + j * W);
  } else {
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) acc[i][j] = Ops::zero();
  }
  for (int kk = 0; kk < k; ++kk) {
    Reg bv[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) bv[j] = load(b + rows(kk) + j * W);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const Reg av = ATrans ? Ops::broadcast(a + kk * lda + i) : Ops::broadcast(a + i * lda + kk);
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) acc[i][j] = Ops::fma(av, bv[j], acc[i][j]);
    }
  }
  if (ep.bias != nullptr) {
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) {
      const Reg bj = load(ep.bias + j * W);
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i) acc[i][j] = Ops::add(acc[i][j], bj);
    }
  }
  if (ep.row_bias != nullptr) {
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const Reg bi = Ops::broadcast(ep.row_bias + i);
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) acc[i][j] = Ops::add(acc[i][j], bi);
    }
  }
  if (ep.relu) {
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) acc[i][j] = Ops::relu(acc[i][j]);
  }
  if (ep.params != nullptr) {
    // trace = momentum * trace + grad; params -= lr * trace, with separate multiplies and
    // adds (no FMA) so that the result equals optim::sgd_momentum_step bit for bit.
    const Reg m = Ops::set1(ep.momentum), lr = Ops::set1(ep.learning_rate);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) {
        float* t = ep.trace + i * ldc + j * W;
        float* w = ep.params + i * ldc + j * W;
        const Reg tv = Ops::add(Ops::mul(m, load(t)), acc[i][j]);
        store(t, tv);
        store(w, Ops::sub(load(w), Ops::mul(lr, tv)));
      }
    return;
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) store(c + i * ldc + j * W, acc[i][j]);
}

// Rows of one column panel: full MR tiles, then the remainder in power-of-two tiles.
template <int NV, bool ATrans, bool Tail = false, class Rows = StridedRows>
void gemm_panel(int m, int k, const float* a, long lda, const float* b, Rows rows, float* c, long ldc, bool load_c,
                const TileEpilogue& ep, typename TailMask<Tail>::type mask = {}) {
  constexpr int MR = Ops::template rows_for<NV, ATrans>();
  const auto a_at = [&](int row) { return ATrans ? a + row : a + row * lda; };
  int i = 0;
  for (; i + MR <= m; i += MR)
    gemm_tile<MR, NV, ATrans, Tail, Rows>(k, a_at(i), lda, b, rows, c + i * ldc, ldc, load_c, ep.at(i * ldc, 0, i), mask);
  if constexpr (MR > 8) {
    if (i + 8 <= m) {
      gemm_tile<8, NV, ATrans, Tail, Rows>(k, a_at(i), lda, b, rows, c + i * ldc, ldc, load_c, ep.at(i * ldc, 0, i), mask);
      i += 8;
    }
  }
  if constexpr (MR > 4) {
    if (i + 4 <= m) {
      gemm_tile<4, NV, ATrans, Tail, Rows>(k, a_at(i), lda, b, rows, c + i * ldc, ldc, load_c, ep.at(i * ldc, 0, i), mask);
      i += 4;
    }
  }
  if (i + 2 <= m) {
    gemm_tile<2, NV, ATrans, Tail, Rows>(k, a_at(i), lda, b, rows, c + i * ldc, ldc, load_c, ep.at(i * ldc, 0, i), mask);
    i += 2;
  }
  if (i < m) gemm_tile<1, NV, ATrans, Tail, Rows>(k, a_at(i), lda, b, rows, c + i * ldc, ldc, load_c, ep.at(i * ldc, 0, i), mask);
}

// The right-edge columns (n % W of them), out of line so that this rarely used code does not
// take the inlining budget of gemm_impl's whole-vector panels, which the default geometry
// spends all its time in.
template <bool ATrans, class Rows>
[[gnu::noinline]] void gemm_tail_panel(int m, int k, const float* a, long lda, const float* b, Rows rows, float* c,
                                       long ldc, bool load_c, const TileEpilogue& ep, typename Ops::Mask mask) {
  gemm_panel<1, ATrans, true, Rows>(m, k, a, lda, b, rows, c, ldc, load_c, ep, mask);
}

// max_nv: the widest column panel in vectors (<= Ops::kMaxNv); a narrower one has taller
// tiles (Ops::rows_for), which suits a short m such as a convolution's 8 or 16 channels.
template <bool ATrans, class Rows = StridedRows>
void gemm_impl(int m, int n, int k, const float* a, long lda, const float* b, Rows rows, float* c, long ldc,
               bool accumulate, const GemmEpilogue& epilogue, int max_nv = Ops::kMaxNv) {
  constexpr int W = Ops::kWidth;
  // Split k evenly into blocks of at most kMaxKc so one block's B panel (kc x NR) stays in L1.
  const int k_blocks = k > 0 ? (k + Ops::kMaxKc - 1) / Ops::kMaxKc : 1;
  const int kc_nominal = k > 0 ? (k + k_blocks - 1) / k_blocks : 0;
  TileEpilogue final_ep;
  final_ep.bias = epilogue.bias;
  final_ep.row_bias = epilogue.row_bias;
  final_ep.relu = epilogue.relu;
  if (epilogue.sgd_params != nullptr) {
    final_ep.params = epilogue.sgd_params;
    final_ep.trace = epilogue.sgd_trace;
    final_ep.learning_rate = epilogue.sgd.learning_rate;
    final_ep.momentum = epilogue.sgd.momentum;
  }
  // k blocks outermost: one k-slab of A (m x kc) is reused from L2 by every column panel,
  // and each panel's B block (kc x NR) from L1 by every row tile.
  for (int kb = 0; kb < k_blocks; ++kb) {
    const int k0 = kb * kc_nominal;
    const int kc = k0 + kc_nominal <= k ? kc_nominal : k - k0;
    const bool load_c = accumulate || kb > 0;
    const bool last = kb + 1 == k_blocks;
    const float* a_k = ATrans ? a + static_cast<long>(k0) * lda : a + k0;
    const TileEpilogue ep = last ? final_ep : TileEpilogue{};
    const int n_whole = n - n % W;
    for (int n0 = 0; n0 < n_whole;) {
      const int nv = (n_whole - n0) / W >= max_nv ? max_nv : (n_whole - n0) / W;
      const float* b_k = b + rows.base(k0) + n0;
      const Rows rows_k = rows.from(k0);
      float* c_n = c + n0;
      const TileEpilogue ep_n = ep.at(n0, n0);
      switch (nv) {
        case 1: gemm_panel<1, ATrans, false, Rows>(m, kc, a_k, lda, b_k, rows_k, c_n, ldc, load_c, ep_n); break;
        case 2: gemm_panel<2, ATrans, false, Rows>(m, kc, a_k, lda, b_k, rows_k, c_n, ldc, load_c, ep_n); break;
        case 3:
          if constexpr (Ops::kMaxNv >= 3) gemm_panel<3, ATrans, false, Rows>(m, kc, a_k, lda, b_k, rows_k, c_n, ldc, load_c, ep_n);
          break;
        default:
          if constexpr (Ops::kMaxNv >= 4) gemm_panel<4, ATrans, false, Rows>(m, kc, a_k, lda, b_k, rows_k, c_n, ldc, load_c, ep_n);
          break;
      }
      n0 += nv * W;
    }
    if (n_whole < n)
      gemm_tail_panel<ATrans, Rows>(m, kc, a_k, lda, b + rows.base(k0) + n_whole, rows.from(k0), c + n_whole, ldc, load_c,
                              ep.at(n_whole, n_whole), Ops::tail_mask(n - n_whole));
  }
}

void gemm(bool a_transposed, int m, int n, int k, const float* a, long lda, const float* b, long ldb, float* c,
          long ldc, bool accumulate, GemmEpilogue epilogue) {
  if (m <= 0 || n <= 0) return;
  if (a_transposed)
    gemm_impl<true>(m, n, k, a, lda, b, StridedRows{ldb}, c, ldc, accumulate, epilogue);
  else
    gemm_impl<false>(m, n, k, a, lda, b, StridedRows{ldb}, c, ldc, accumulate, epilogue);
}

// C[m, n] = A^T B with A given as [k, m] (lda = m) and B's row kk at b + b_offsets[kk]: a
// stride-1 convolution over a zero-padded image without an im2col copy.
void gemm_offset_rows(int m, int n, int k, const float* a_t, const float* b, const long* b_offsets, float* c, long ldc,
                      GemmEpilogue epilogue) {
  if (m <= 0 || n <= 0) return;
  // The tallest tiles that m fills: 8 or 16 channels in whole tiles rather than 6 + 2.
  const int max_nv = m % 8 == 0 && Ops::kMaxNv >= 3 ? 3 : Ops::kMaxNv;
  gemm_impl<true>(m, n, k, a_t, m, b, OffsetRows{b_offsets}, c, ldc, false, epilogue, max_nv);
}

// ---------------------------------------------------------------------------------------
// conv1 (1 input channel): a direct kernel. A tile is PX consecutive output pixels of one
// row times CV vectors of channels; each of the 9 taps adds broadcast(input) * kernel row.
// Rows whose width is not a multiple of PX end with one-pixel tiles.

// The output-channel multiple both conv1 kernels need (vector widths are powers of two, so
// the larger block is a multiple of the smaller).
constexpr int kDirectConvChannels = Ops::kConv1Vectors > Ops::kConv1GradVectors ? Ops::kConv1Vectors * Ops::kWidth
                                                                                 : Ops::kConv1GradVectors * Ops::kWidth;

// Inlined by force: GCC's size heuristics would otherwise call it once per tile.
template <int PX>
[[gnu::always_inline]] inline void conv1_tile(const float* x_padded, long padded_row, int y, int x0, const float* kernel,
                                              const float* bias, int c, int c0, float* out, long out_row) {
  using Reg = typename Ops::Reg;
  constexpr int W = Ops::kWidth;
  constexpr int CV = Ops::kConv1Vectors;
  Reg acc[PX][CV];
#pragma GCC unroll 16
  for (int p = 0; p < PX; ++p)
#pragma GCC unroll 4
    for (int v = 0; v < CV; ++v) acc[p][v] = Ops::load(bias + c0 + v * W);
#pragma GCC unroll 3
  for (int dy = 0; dy < 3; ++dy) {
#pragma GCC unroll 3
    for (int dx = 0; dx < 3; ++dx) {
      const float* in = x_padded + (y + dy) * padded_row + x0 + dx;
      Reg wv[CV];
#pragma GCC unroll 4
      for (int v = 0; v < CV; ++v) wv[v] = Ops::load(kernel + (dy * 3 + dx) * c + c0 + v * W);
#pragma GCC unroll 16
      for (int p = 0; p < PX; ++p) {
        const Reg xv = Ops::broadcast(in + p);
#pragma GCC unroll 4
        for (int v = 0; v < CV; ++v) acc[p][v] = Ops::fma(xv, wv[v], acc[p][v]);
      }
    }
  }
#pragma GCC unroll 16
  for (int p = 0; p < PX; ++p)
#pragma GCC unroll 4
    for (int v = 0; v < CV; ++v) Ops::store(out + y * out_row + (x0 + p) * c + c0 + v * W, Ops::relu(acc[p][v]));
}

// kC: the channel count when it is a compile-time constant, else 0 (then c is read).
template <int kC>
void conv1_forward_rows(const float* x_padded, int h, int w, const float* kernel, const float* bias, int c_runtime,
                        float* out) {
  constexpr int PX = Ops::kConv1Pixels;
  constexpr int CB = Ops::kConv1Vectors * Ops::kWidth;
  static_assert(kDirectConvChannels % CB == 0);
  const int c = kC != 0 ? kC : c_runtime;
  const long padded_row = w + 2, out_row = static_cast<long>(w) * c;
  const int x_whole = w - w % PX;
  for (int y = 0; y < h; ++y) {
    for (int x0 = 0; x0 < x_whole; x0 += PX)
      for (int c0 = 0; c0 < c; c0 += CB) conv1_tile<PX>(x_padded, padded_row, y, x0, kernel, bias, c, c0, out, out_row);
    for (int x0 = x_whole; x0 < w; ++x0)
      for (int c0 = 0; c0 < c; c0 += CB) conv1_tile<1>(x_padded, padded_row, y, x0, kernel, bias, c, c0, out, out_row);
  }
}

void conv1_forward(const float* x_padded, int h, int w, const float* kernel, const float* bias, int c, float* out) {
  // The default geometry's 32 channels as a constant: a tile's kernel loads and stores then
  // take immediate offsets (tools/bench/README.md, "Figures moved out of the code's comments").
  if (c == 32) return conv1_forward_rows<32>(x_padded, h, w, kernel, bias, c, out);
  conv1_forward_rows<0>(x_padded, h, w, kernel, bias, c, out);
}

void conv1_weight_grad(const float* x_padded, int h, int w, const float* dout, int c, float* dkernel, float* dbias) {
  using Reg = typename Ops::Reg;
  constexpr int W = Ops::kWidth;
  constexpr int CV = Ops::kConv1GradVectors;
  static_assert(kDirectConvChannels % (CV * W) == 0);
  const long padded_row = w + 2;
  for (int c0 = 0; c0 < c; c0 += CV * W) {
    Reg acc[9][CV];
    Reg bacc[CV];
#pragma GCC unroll 4
    for (int v = 0; v < CV; ++v) {
      bacc[v] = Ops::load(dbias + c0 + v * W);
#pragma GCC unroll 9
      for (int t = 0; t < 9; ++t) acc[t][v] = Ops::load(dkernel + t * c + c0 + v * W);
    }
    for (int y = 0; y < h; ++y) {
      for (int x = 0; x < w; ++x) {
        Reg g[CV];
#pragma GCC unroll 4
        for (int v = 0; v < CV; ++v) {
          g[v] = Ops::load(dout + (static_cast<long>(y) * w + x) * c + c0 + v * W);
          bacc[v] = Ops::add(bacc[v], g[v]);
        }
#pragma GCC unroll 3
        for (int dy = 0; dy < 3; ++dy) {
#pragma GCC unroll 3
          for (int dx = 0; dx < 3; ++dx) {
            const Reg xv = Ops::broadcast(x_padded + (y + dy) * padded_row + x + dx);
#pragma GCC unroll 4
            for (int v = 0; v < CV; ++v) acc[dy * 3 + dx][v] = Ops::fma(xv, g[v], acc[dy * 3 + dx][v]);
          }
        }
      }
    }
#pragma GCC unroll 4
    for (int v = 0; v < CV; ++v) {
      Ops::store(dbias + c0 + v * W, bacc[v]);
#pragma GCC unroll 9
      for (int t = 0; t < 9; ++t) Ops::store(dkernel + t * c + c0 + v * W, acc[t][v]);
    }
  }
}
