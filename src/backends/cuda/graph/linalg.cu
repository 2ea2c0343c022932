// Gemm and MatMul on the GPU through cuBLAS SGEMM (full float32: the handle allows no TF32).
// Gemm's C (broadcast to [M, N]) and the loader's fused Relu (attrs.ints["spmd_relu"] == 1)
// run in one epilogue kernel after the product.
#include <algorithm>

#include "graph_op.hpp"
#include "spmd/backends/cuda/gemm.hpp"

namespace spmd::backends::cuda {
namespace {

// y [m, n] += beta * c[broadcast] (c may be nullptr), then ReLU when relu.
__global__ void epilogue_kernel(float* y, std::int64_t m, std::int64_t n, const float* c, std::int64_t cr, std::int64_t cc,
                                float beta, bool relu) {
  for (std::int64_t i = first_index(); i < m * n; i += index_stride()) {
    float v = y[i];
    if (c) v += beta * c[(cr == 1 ? 0 : i / n) * cc + (cc == 1 ? 0 : i % n)];
    y[i] = relu ? (v > 0.0f ? v : 0.0f) : v;
  }
}

void epilogue(const CudaGraphCall& call, float* y, std::int64_t m, std::int64_t n, const DeviceTensor* c, float beta) {
  const bool relu = call.node.attrs.i("spmd_relu", 0) != 0;
  if (!c && !relu) return;
  std::int64_t cr = 1, cc = 1;
  if (c) {
    if (c->shape.size() > 2) call.fail("C " + ops::to_string(c->shape) + " has more than 2 dimensions");
    cr = c->shape.size() < 2 ? 1 : c->shape[0];
    cc = c->shape.empty() ? 1 : c->shape.back();
    if ((cr != 1 && cr != m) || (cc != 1 && cc != n)) call.fail("C " + ops::to_string(c->shape) + " does not broadcast to [M, N]");
  }
  epilogue_kernel<<<blocks_for(m * n), kThreadsPerBlock, 0, call.stream>>>(y, m, n, c ? c->data : nullptr, cr, cc, beta, relu);
  SPMD_CHECK_CUDA_LAUNCH("ONNX Gemm epilogue kernel");
}

// A product with an empty dimension runs no GEMM (cuBLAS takes none): nothing to write (M or N
// is 0) or zeros (K is 0). True when it was one.
bool empty_product(const CudaGraphCall& call, float* y, std::int64_t outputs, std::int64_t k) {
  if (outputs > 0 && k == 0)
    SPMD_CHECK_CUDA(cudaMemsetAsync(y, 0, static_cast<std::size_t>(outputs) * sizeof(float), call.stream), "zeroing an empty product");
  return outputs == 0 || k == 0;
}

// Gemm: Y = alpha * op(A) op(B) + beta * C.
void gemm(const CudaGraphCall& call) {
  const DeviceTensor& a = call.input(0);
  const DeviceTensor& b = call.input(1);
  if (a.shape.size() != 2 || b.shape.size() != 2) call.fail("A " + ops::to_string(a.shape) + " and B " + ops::to_string(b.shape) + " must be 2-D");
  const bool ta = call.node.attrs.i("transA", 0) != 0, tb = call.node.attrs.i("transB", 0) != 0;
  const std::int64_t m = ta ? a.shape[1] : a.shape[0], k = ta ? a.shape[0] : a.shape[1];
  const std::int64_t n = tb ? b.shape[0] : b.shape[1];
  if (k != (tb ? b.shape[1] : b.shape[0])) call.fail("inner dimensions differ: A " + ops::to_string(a.shape) + ", B " + ops::to_string(b.shape));
  float* y = call.out[0]->data;
  if (!empty_product(call, y, m * n, k))
    sgemm_row_major(call.cublas, {ta, tb, m, n, k, a.shape[1], b.shape[1], n}, call.node.attrs.f("alpha", 1.0f), a.data,
                    b.data, 0.0f, y, "ONNX Gemm");
  epilogue(call, y, m, n, call.has_input(2) ? &call.input(2) : nullptr, call.node.attrs.f("beta", 1.0f));
}

// MatMul (numpy): A [..., M, K] x B [..., K, N], leading dimensions broadcast; 1-D operands
// promoted. A 2-D B (a Linear layer's weights) makes one GEMM of every row of A.
void matmul(const CudaGraphCall& call) {
  const DeviceTensor& a = call.input(0);
  const DeviceTensor& b = call.input(1);
  auto sa = a.shape, sb = b.shape;
  if (sa.size() == 1) sa.insert(sa.begin(), 1);
  if (sb.size() == 1) sb.push_back(1);
  const std::int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
  if (k != sb[sb.size() - 2]) call.fail("inner dimensions differ: " + ops::to_string(a.shape) + " x " + ops::to_string(b.shape));
  float* y = call.out[0]->data;
  if (empty_product(call, y, call.out[0]->size(), k)) return;
  if (sb.size() == 2) {
    const std::int64_t rows = a.size() / k;
    sgemm_row_major(call.cublas, {false, false, rows, n, k, k, n, n}, 1.0f, a.data, b.data, 0.0f, y, "ONNX MatMul");
    epilogue(call, y, rows, n, nullptr, 0.0f);
    return;
  }
  // One GEMM per output matrix, its operands found through broadcast strides (in matrices).
  const std::vector<std::int64_t> lead_a(sa.begin(), sa.end() - 2), lead_b(sb.begin(), sb.end() - 2);
  std::vector<std::int64_t> lead(std::max(lead_a.size(), lead_b.size()), 1);
  for (std::size_t d = 0; d < lead.size(); ++d) {
    const std::size_t from_end = lead.size() - d;
    const std::int64_t da = from_end <= lead_a.size() ? lead_a[lead_a.size() - from_end] : 1;
    const std::int64_t db = from_end <= lead_b.size() ? lead_b[lead_b.size() - from_end] : 1;
    if (da != db && da != 1 && db != 1) call.fail("leading dimensions do not broadcast: " + ops::to_string(a.shape) + " x " + ops::to_string(b.shape));
    lead[d] = std::max(da, db);
  }
  const Dims8 stride_a = broadcast_strides(call, lead_a, lead), stride_b = broadcast_strides(call, lead_b, lead);
  const auto count = [](const std::vector<std::int64_t>& d) {
    std::int64_t n = 1;
    for (const auto v : d) n *= v;
    return n;
  };
  const std::int64_t matrices = count(lead), na = count(lead_a), nb = count(lead_b);
  // Each operand all of the leading dimensions or none of them: one strided-batched GEMM.
  if ((na == matrices || na == 1) && (nb == matrices || nb == 1)) {
    sgemm_row_major_strided_batched(call.cublas, {false, false, m, n, k, k, n, n}, 1.0f, a.data, na == 1 ? 0 : m * k, b.data,
                                    nb == 1 ? 0 : k * n, 0.0f, y, m * n, matrices, "ONNX MatMul");
    epilogue(call, y, matrices * m, n, nullptr, 0.0f);
    return;
  }
  for (std::int64_t t = 0; t < matrices; ++t) {
    std::int64_t oa = 0, ob = 0, rest = t;
    for (int d = static_cast<int>(lead.size()) - 1; d >= 0; --d) {
      const std::int64_t i = rest % lead[static_cast<std::size_t>(d)];
      rest /= lead[static_cast<std::size_t>(d)];
      oa += i * stride_a.d[d];
      ob += i * stride_b.d[d];
    }
    sgemm_row_major(call.cublas, {false, false, m, n, k, k, n, n}, 1.0f, a.data + oa * m * k, b.data + ob * k * n, 0.0f,
                    y + t * m * n, "ONNX MatMul");
  }
  epilogue(call, y, matrices * m, n, nullptr, 0.0f);
}

}  // namespace

SPMD_REGISTER_CUDA_GRAPH_OP("Gemm", gemm);
SPMD_REGISTER_CUDA_GRAPH_OP("MatMul", matmul);

}  // namespace spmd::backends::cuda
