// Gemm and MatMul graph ops on the CPU backend's tuned GEMM, whose every output row is
// reduced in one fixed order: a row's result does not depend on the rows beside it.
#include <algorithm>

#include "spmd/models/cnn_kernels.hpp"
#include "spmd/ops/graph_op.hpp"

namespace spmd::ops {
namespace {

const models::cnn_cpu::Kernels& kernels() {
  return models::cnn_cpu::kernels_for(models::cnn_cpu::resolve_isa(models::cnn_cpu::Isa::Auto));
}

// [rows, cols] -> [cols, rows].
void transpose_into(const float* src, std::int64_t rows, std::int64_t cols, float* dst) {
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) dst[static_cast<std::size_t>(c * rows + r)] = src[r * cols + c];
}

// Gemm: Y = alpha * op(A) op(B) + beta * C, A and B 2-D, C broadcast to [M, N]; then Relu
// where one was fused at load (attribute spmd_relu). A bias row C [N] (the usual Linear
// layer) and the Relu are applied in the GEMM's epilogue.
void gemm(const OpCall& call) {
  const Tensor& a = call.float_input(0);
  const Tensor& b = call.float_input(1);
  const Attrs& at = call.node.attrs;
  if (a.shape.size() != 2 || b.shape.size() != 2) call.fail("A " + to_string(a.shape) + " and B " + to_string(b.shape) + " must be 2-D");
  const bool ta = at.i("transA", 0) != 0, tb = at.i("transB", 0) != 0;
  const std::int64_t m = ta ? a.shape[1] : a.shape[0], k = ta ? a.shape[0] : a.shape[1];
  const std::int64_t kb = tb ? b.shape[1] : b.shape[0], n = tb ? b.shape[0] : b.shape[1];
  if (k != kb) call.fail("inner dimensions differ: A " + to_string(a.shape) + ", B " + to_string(b.shape));
  const float alpha = at.f("alpha", 1.0f), beta = at.f("beta", 1.0f);
  const bool relu = at.i("spmd_relu", 0) != 0;
  const Tensor* c = call.has_input(2) ? &call.float_input(2) : nullptr;
  if (c && c->shape.size() > 2) call.fail("C " + to_string(c->shape) + " has more than 2 dimensions");
  const std::int64_t cr = !c || c->shape.size() < 2 ? 1 : c->shape[0];
  const std::int64_t cc = !c || c->shape.empty() ? 1 : c->shape.back();
  if (c && ((cr != 1 && cr != m) || (cc != 1 && cc != n))) call.fail("C " + to_string(c->shape) + " does not broadcast to [M, N]");
  const float* bk = b.f.data();
  if (tb) {  // B as [k, n]
    float* bt = scratch(Scratch::TransposedB, n * k).data();
    transpose_into(b.f.data(), n, k, bt);
    bk = bt;
  }
  const bool bias_row = c && cr == 1 && cc == n && alpha == 1.0f && beta == 1.0f;
  Tensor& y = *call.out[0];
  y.reset(ElemType::Float32, {m, n});
  kernels().gemm(ta, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), a.f.data(), a.shape[1], bk, n,
                 y.f.data(), n, false, {bias_row ? c->f.data() : nullptr, relu && (bias_row || !c) && alpha == 1.0f});
  if (bias_row || (!c && alpha == 1.0f)) return;
  for (std::int64_t r = 0; r < m; ++r)
    for (std::int64_t j = 0; j < n; ++j) {
      float& v = y.f[static_cast<std::size_t>(r * n + j)];
      if (alpha != 1.0f) v *= alpha;
      if (c) v += beta * c->f[static_cast<std::size_t>((cr == 1 ? 0 : r) * cc + (cc == 1 ? 0 : j))];
      if (relu) v = std::max(v, 0.0f);
    }
}

// MatMul (numpy): A [..., M, K] x B [..., K, N] with broadcast leading dimensions; 1-D
// operands are promoted and the promoted dimension removed again.
void matmul(const OpCall& call) {
  const Tensor& a = call.float_input(0);
  const Tensor& b = call.float_input(1);
  auto sa = a.shape, sb = b.shape;  // 1-D operands promoted
  const bool a1 = sa.size() == 1, b1 = sb.size() == 1;
  if (a1) sa.insert(sa.begin(), 1);
  if (b1) sb.push_back(1);
  const std::int64_t m = sa[sa.size() - 2], k = sa.back();
  const std::int64_t kb = sb[sb.size() - 2], n = sb.back();
  if (k != kb) call.fail("inner dimensions differ: " + to_string(a.shape) + " x " + to_string(b.shape));
  const std::vector<std::int64_t> lead_a(sa.begin(), sa.end() - 2), lead_b(sb.begin(), sb.end() - 2);
  const std::size_t rank = std::max(lead_a.size(), lead_b.size());
  std::vector<std::int64_t> lead(rank);
  for (std::size_t d = 0; d < rank; ++d) {
    const std::int64_t x = d + lead_a.size() >= rank ? lead_a[d + lead_a.size() - rank] : 1;
    const std::int64_t z = d + lead_b.size() >= rank ? lead_b[d + lead_b.size() - rank] : 1;
    if (x != z && x != 1 && z != 1) call.fail("batch dimensions do not broadcast");
    lead[d] = std::max(x, z);
  }
  std::int64_t batches = 1;
  for (const auto d : lead) batches *= d;
  auto out_shape = lead;
  if (!a1) out_shape.push_back(m);
  if (!b1) out_shape.push_back(n);
  Tensor& y = *call.out[0];
  y.reset(ElemType::Float32, out_shape);
  // The flat index into each operand's leading dimensions for output batch `q`.
  const auto offset = [&](const std::vector<std::int64_t>& own, std::int64_t q) {
    std::int64_t index = 0, stride = 1;
    for (std::size_t d = rank; d-- > 0;) {
      const std::int64_t coord = q % lead[d];
      q /= lead[d];
      const std::size_t od = d + own.size();
      if (od >= rank) {
        const std::int64_t extent = own[od - rank];
        index += (extent == 1 ? 0 : coord) * stride;
        stride *= extent;
      }
    }
    return index;
  };
  for (std::int64_t q = 0; q < batches; ++q)
    kernels().gemm(false, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), a.f.data() + offset(lead_a, q) * m * k,
                   k, b.f.data() + offset(lead_b, q) * k * n, n, y.f.data() + q * m * n, n, false, {});
}

}  // namespace

SPMD_REGISTER_GRAPH_OP("Gemm", gemm);
SPMD_REGISTER_GRAPH_OP("MatMul", matmul);

}  // namespace spmd::ops
