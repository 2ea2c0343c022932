// Graph ops that select or place elements by index or position: Trilu (causal masks),
// GatherElements (torch.gather), GatherND, ScatterElements and ScatterND (in-place assignments as
// exported), OneHot, TopK, NonZero. On float and int64 tensors alike; indices may be negative (counted
// from the end) and are checked.
#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "spmd/ops/graph_op.hpp"
#include "strided_copy.hpp"

namespace spmd::ops {
namespace {

// Element k of a tensor as a double (for comparisons and scalar inputs), and a copy of one
// element between tensors of the same type (int64 values kept exact).
double value_at(const Tensor& t, std::size_t k) { return t.type == ElemType::Float32 ? t.f[k] : static_cast<double>(t.i[k]); }
void copy_element(Tensor& to, std::size_t k, const Tensor& from, std::size_t j) {
  if (to.type == ElemType::Float32) to.f[k] = from.f[j];
  else to.i[k] = from.i[j];
}

// A scatter's new value at an index: the update, or the reduction (opsets 16, 18) of the two.
template <class T>
T combine(const std::string& reduction, T old, T update) {
  if (reduction == "add") return old + update;
  if (reduction == "mul") return old * update;
  if (reduction == "max") return std::max(old, update);
  if (reduction == "min") return std::min(old, update);
  return update;
}
void scatter_element(Tensor& y, std::size_t k, const Tensor& updates, std::size_t j, const std::string& reduction) {
  if (y.type == ElemType::Float32) y.f[k] = combine(reduction, y.f[k], updates.f[j]);
  else y.i[k] = combine(reduction, y.i[k], updates.i[j]);
}

// An index along a dimension of `size`, negative ones from the end; fail() outside.
std::int64_t checked_index(const OpCall& c, std::int64_t i, std::int64_t size) {
  if (i < -size || i >= size) c.fail("index " + std::to_string(i) + " is outside a dimension of " + std::to_string(size));
  return i < 0 ? i + size : i;
}

void trilu(const OpCall& c) {
  const Tensor& x = c.input(0);
  if (x.shape.size() < 2) c.fail("input " + to_string(x.shape) + " has fewer than 2 dimensions");
  const std::int64_t k = c.has_input(1) ? c.input(1).as_ints().at(0) : 0;
  const bool upper = c.node.attrs.i("upper", 1) != 0;
  const std::int64_t rows = x.shape[x.shape.size() - 2], cols = x.shape.back();
  Tensor& y = *c.out[0];
  y = x;
  for (std::int64_t m = 0; m < x.size() / std::max<std::int64_t>(1, rows * cols); ++m)
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t j = 0; j < cols; ++j)
        if (upper ? j - i < k : j - i > k) {
          const auto at = static_cast<std::size_t>((m * rows + i) * cols + j);
          if (y.type == ElemType::Float32) y.f[at] = 0.0f;
          else y.i[at] = 0;
        }
}

// GatherElements, and ScatterElements (scatter: y = data, then y[index] (op)= updates).
void elements(const OpCall& c, bool scatter) {
  const Tensor& data = c.input(0);
  const Tensor& index = c.input(1);
  const std::size_t axis = c.axis(c.node.attrs.i("axis", 0), data.shape.size());
  if (index.shape.size() != data.shape.size()) c.fail("indices " + to_string(index.shape) + " and data " + to_string(data.shape) + " differ in rank");
  const auto idx = index.as_ints();
  const auto ds = strides_of(data.shape), is = strides_of(index.shape);
  Tensor& y = *c.out[0];
  const std::string reduction = c.node.attrs.s("reduction", "none");
  if (scatter) {
    y = data;
    if (c.input(2).shape != index.shape) c.fail("updates " + to_string(c.input(2).shape) + " differ from indices " + to_string(index.shape));
    if (c.input(2).type != data.type) c.fail("updates and data of different element types");
  } else {
    y.reset(data.type, index.shape);
  }
  for (std::int64_t e = 0; e < static_cast<std::int64_t>(idx.size()); ++e) {
    std::int64_t at = 0;
    for (std::size_t d = 0; d < index.shape.size(); ++d) {
      const std::int64_t pos = (e / is[d]) % index.shape[d];
      at += (d == axis ? checked_index(c, idx[static_cast<std::size_t>(e)], data.shape[d]) : pos) * ds[d];
    }
    const auto u = static_cast<std::size_t>(at), v = static_cast<std::size_t>(e);
    if (scatter) scatter_element(y, u, c.input(2), v, reduction);
    else copy_element(y, v, data, u);
  }
}
void gather_elements(const OpCall& c) { elements(c, false); }
void scatter_elements(const OpCall& c) { elements(c, true); }

// ScatterND: y = data; y[indices[..., :]] (op)= updates[...] (each index a prefix of data's dims).
void scatter_nd(const OpCall& c) {
  const Tensor& data = c.input(0);
  const auto idx = c.input(1).as_ints();
  const auto& ishape = c.input(1).shape;
  const Tensor& updates = c.input(2);
  if (ishape.empty() || ishape.back() > static_cast<std::int64_t>(data.shape.size())) c.fail("indices " + to_string(ishape) + " do not index data " + to_string(data.shape));
  const std::int64_t depth = ishape.back(), count = static_cast<std::int64_t>(idx.size()) / std::max<std::int64_t>(1, depth);
  const auto ds = strides_of(data.shape);
  const std::int64_t slice = depth < static_cast<std::int64_t>(data.shape.size()) ? ds[static_cast<std::size_t>(depth - 1)] : 1;
  const std::int64_t block = depth == 0 ? data.size() : slice;
  if (updates.size() != count * block) c.fail("updates " + to_string(updates.shape) + " do not match indices " + to_string(ishape));
  if (updates.type != data.type) c.fail("updates and data of different element types");
  const std::string reduction = c.node.attrs.s("reduction", "none");
  Tensor& y = *c.out[0];
  y = data;
  for (std::int64_t q = 0; q < count; ++q) {
    std::int64_t at = 0;
    for (std::int64_t d = 0; d < depth; ++d)
      at += checked_index(c, idx[static_cast<std::size_t>(q * depth + d)], data.shape[static_cast<std::size_t>(d)]) * ds[static_cast<std::size_t>(d)];
    for (std::int64_t e = 0; e < block; ++e)
      scatter_element(y, static_cast<std::size_t>(at + e), updates, static_cast<std::size_t>(q * block + e), reduction);
  }
}

// GatherND: y[b..., q...] = data[b..., indices[b..., q..., :], ...], the first batch_dims
// dimensions (opset 12) shared by data and indices (tf.gather_nd as tf2onnx exports it).
void gather_nd(const OpCall& c) {
  const Tensor& data = c.input(0);
  const auto idx = c.input(1).as_ints();
  const auto& ishape = c.input(1).shape;
  const auto b = static_cast<std::size_t>(c.node.attrs.i("batch_dims", 0));
  const std::size_t r = data.shape.size();
  if (ishape.size() < b + 1 || r < b + 1 || ishape.back() < 1 || b + static_cast<std::size_t>(ishape.back()) > r ||
      !std::equal(ishape.begin(), ishape.begin() + static_cast<std::ptrdiff_t>(b), data.shape.begin()))
    c.fail("indices " + to_string(ishape) + " do not index data " + to_string(data.shape) + " with batch_dims " + std::to_string(b));
  const auto depth = static_cast<std::size_t>(ishape.back());
  std::vector<std::int64_t> shape(ishape.begin(), ishape.end() - 1);
  shape.insert(shape.end(), data.shape.begin() + static_cast<std::ptrdiff_t>(b + depth), data.shape.end());
  const auto ds = strides_of(data.shape);
  std::int64_t batches = 1, per_batch = 1;
  for (std::size_t k = 0; k < b; ++k) batches *= data.shape[k];
  for (std::size_t k = b; k + 1 < ishape.size(); ++k) per_batch *= ishape[k];
  const std::int64_t slice = b == 0 ? data.size() : ds[b - 1], block = b + depth < r ? ds[b + depth - 1] : 1;
  Tensor& y = *c.out[0];
  y.reset(data.type, shape);
  for (std::int64_t q = 0; q < batches * per_batch; ++q) {
    std::int64_t at = q / per_batch * slice;
    for (std::size_t d = 0; d < depth; ++d)
      at += checked_index(c, idx[static_cast<std::size_t>(q) * depth + d], data.shape[b + d]) * ds[b + d];
    for (std::int64_t e = 0; e < block; ++e) copy_element(y, static_cast<std::size_t>(q * block + e), data, static_cast<std::size_t>(at + e));
  }
}

// NonZero: the indices of the non-zero elements, [rank, count] in row-major order (a constant
// mask's, folded at load; torch.nonzero, boolean indexing).
void non_zero(const OpCall& c) {
  const Tensor& x = c.input(0);
  const std::size_t r = x.shape.size();
  std::vector<std::int64_t> found;
  for (std::size_t e = 0; e < static_cast<std::size_t>(x.size()); ++e)
    if (value_at(x, e) != 0.0) found.push_back(static_cast<std::int64_t>(e));
  const auto count = static_cast<std::int64_t>(found.size());
  const auto strides = strides_of(x.shape);
  Tensor& y = *c.out[0];
  y.reset(ElemType::Int64, {static_cast<std::int64_t>(r), count});
  for (std::size_t d = 0; d < r; ++d)
    for (std::int64_t k = 0; k < count; ++k)
      y.i[d * static_cast<std::size_t>(count) + static_cast<std::size_t>(k)] = found[static_cast<std::size_t>(k)] / strides[d] % x.shape[d];
}

void one_hot(const OpCall& c) {
  const Tensor& indices = c.input(0);
  const std::int64_t depth = static_cast<std::int64_t>(value_at(c.input(1), 0));
  const Tensor& values = c.input(2);
  if (depth < 1 || values.size() != 2) c.fail("needs a positive depth and values [off, on]");
  auto shape = indices.shape;
  const std::size_t axis = c.axis(c.node.attrs.i("axis", -1), shape.size() + 1);
  shape.insert(shape.begin() + static_cast<std::ptrdiff_t>(axis), depth);
  std::int64_t outer = 1, inner = 1;
  for (std::size_t k = 0; k < indices.shape.size(); ++k) (k < axis ? outer : inner) *= indices.shape[k];
  Tensor& y = *c.out[0];
  y.reset(values.type, shape);
  for (std::int64_t k = 0; k < y.size(); ++k) copy_element(y, static_cast<std::size_t>(k), values, 0);
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i = 0; i < inner; ++i) {
      std::int64_t v = static_cast<std::int64_t>(value_at(indices, static_cast<std::size_t>(o * inner + i)));
      if (v < 0) v += depth;  // out of range: all off
      if (v >= 0 && v < depth) copy_element(y, static_cast<std::size_t>((o * depth + v) * inner + i), values, 1);
    }
}

// TopK: the k largest (or smallest) along the axis, sorted; ties by the lower index first.
void top_k(const OpCall& c) {
  const Tensor& x = c.input(0);
  const std::size_t axis = c.axis(c.node.attrs.i("axis", -1), x.shape.size());
  const std::int64_t k = c.node.opset >= 10 ? c.input(1).as_ints().at(0) : c.node.attrs.i("k", 1);
  const bool largest = c.node.attrs.i("largest", 1) != 0;
  const std::int64_t length = x.shape[axis];
  if (k < 0 || k > length) c.fail("k = " + std::to_string(k) + " for an axis of " + std::to_string(length));
  std::int64_t outer = 1, inner = 1;
  for (std::size_t d = 0; d < x.shape.size(); ++d) {
    if (d < axis) outer *= x.shape[d];
    if (d > axis) inner *= x.shape[d];
  }
  auto shape = x.shape;
  shape[axis] = k;
  Tensor& values = *c.out[0];
  values.reset(x.type, shape);
  Tensor* indices = c.out.size() > 1 ? c.out[1] : nullptr;
  if (indices) indices->reset(ElemType::Int64, shape);
  std::vector<std::int64_t> order(static_cast<std::size_t>(length));
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i = 0; i < inner; ++i) {
      const auto at = [&](std::int64_t j) { return static_cast<std::size_t>((o * length + j) * inner + i); };
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
        const double va = value_at(x, at(a)), vb = value_at(x, at(b));
        return largest ? va > vb : va < vb;
      });
      for (std::int64_t j = 0; j < k; ++j) {
        const auto out = static_cast<std::size_t>((o * k + j) * inner + i);
        copy_element(values, out, x, at(order[static_cast<std::size_t>(j)]));
        if (indices) indices->i[out] = order[static_cast<std::size_t>(j)];
      }
    }
}

}  // namespace

SPMD_REGISTER_GRAPH_OP("Trilu", trilu);
SPMD_REGISTER_GRAPH_OP("GatherElements", gather_elements);
SPMD_REGISTER_GRAPH_OP("ScatterElements", scatter_elements);
SPMD_REGISTER_GRAPH_OP("Scatter", scatter_elements);  // opsets 9-10's name for it
SPMD_REGISTER_GRAPH_OP("ScatterND", scatter_nd);
SPMD_REGISTER_GRAPH_OP("GatherND", gather_nd);
SPMD_REGISTER_GRAPH_OP("NonZero", non_zero);
SPMD_REGISTER_GRAPH_OP("OneHot", one_hot);
SPMD_REGISTER_GRAPH_OP("TopK", top_k);

}  // namespace spmd::ops
