#pragma once
// numpy broadcasting for the elementwise graph ops (graph_elementwise.cpp, graph_logic.cpp):
// the output shape, each operand's strides over it, and a loop that applies a function.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "spmd/ops/graph_op.hpp"

namespace spmd::ops {

// The broadcast shape of a and b (numpy rules), or a failure naming both.
inline std::vector<std::int64_t> broadcast_shape(const OpCall& c, const std::vector<std::int64_t>& a,
                                                 const std::vector<std::int64_t>& b) {
  const std::size_t rank = std::max(a.size(), b.size());
  std::vector<std::int64_t> out(rank);
  for (std::size_t k = 0; k < rank; ++k) {
    const std::int64_t da = k + a.size() >= rank ? a[k + a.size() - rank] : 1;
    const std::int64_t db = k + b.size() >= rank ? b[k + b.size() - rank] : 1;
    if (da != db && da != 1 && db != 1) c.fail("shapes " + to_string(a) + " and " + to_string(b) + " do not broadcast");
    out[k] = da == 1 ? db : da;
  }
  return out;
}

// Opsets before 7 broadcast B into A from attribute `axis` (B's dimensions aligned there), not
// numpy's right alignment: B's shape with the trailing 1s under which numpy's rules say the same.
inline std::vector<std::int64_t> legacy_aligned(const OpCall& c, const std::vector<std::int64_t>& a, std::vector<std::int64_t> b) {
  if (c.node.opset >= 7 || c.node.attrs.i("broadcast", 0) == 0 || !c.node.attrs.ints.count("axis")) return b;
  std::int64_t axis = c.node.attrs.i("axis", 0);
  if (axis < 0) axis += static_cast<std::int64_t>(a.size());
  const std::int64_t trailing = static_cast<std::int64_t>(a.size()) - axis - static_cast<std::int64_t>(b.size());
  if (trailing < 0) c.fail("B " + to_string(b) + " does not fit into A " + to_string(a) + " from axis " + std::to_string(axis));
  b.insert(b.end(), static_cast<std::size_t>(trailing), 1);
  return b;
}

// Strides of `shape` read as broadcast to `out` (0 along broadcast dimensions).
inline std::vector<std::int64_t> broadcast_strides(const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& out) {
  std::vector<std::int64_t> strides(out.size(), 0);
  std::int64_t s = 1;
  for (std::size_t k = shape.size(); k-- > 0;) {
    const std::size_t o = k + out.size() - shape.size();
    strides[o] = shape[k] == 1 ? 0 : s;
    s *= shape[k];
  }
  return strides;
}

// Merges adjacent dimensions along which both operands are contiguous together (or both
// broadcast): [N, C, H, W] times [N, C, 1, 1] becomes [N * C, H * W] times [N * C, 1], so the
// innermost loop runs over H * W instead of W. Shape and strides are rewritten in place.
inline void coalesce(std::vector<std::int64_t>& shape, std::vector<std::int64_t>& sa, std::vector<std::int64_t>& sb) {
  std::vector<std::int64_t> d, a, b;
  for (std::size_t k = 0; k < shape.size(); ++k) {
    if (shape[k] == 1) continue;
    if (!d.empty() && a.back() == sa[k] * shape[k] && b.back() == sb[k] * shape[k]) {
      d.back() *= shape[k];
      a.back() = sa[k];
      b.back() = sb[k];
    } else {
      d.push_back(shape[k]);
      a.push_back(sa[k]);
      b.push_back(sb[k]);
    }
  }
  if (d.empty()) d = {1}, a = {0}, b = {0};
  shape.swap(d);
  sa.swap(a);
  sb.swap(b);
}

// y = fn(a, b) over out_shape, a and b read through their broadcast strides.
template <class A, class B, class Y, class Fn>
void broadcast_apply(const std::vector<std::int64_t>& out_shape, const A* a, const std::vector<std::int64_t>& sa,
                     const B* b, const std::vector<std::int64_t>& sb, Y* y, Fn fn) {
  const std::size_t rank = out_shape.size();
  if (rank == 0) {
    y[0] = fn(a[0], b[0]);
    return;
  }
  // Odometer over all but the innermost dimension; the innermost runs as a strided loop.
  std::vector<std::int64_t> index(rank, 0);
  const std::int64_t inner = out_shape[rank - 1], ia = sa[rank - 1], ib = sb[rank - 1];
  std::int64_t outer = 1;
  for (std::size_t k = 0; k + 1 < rank; ++k) outer *= out_shape[k];
  for (std::int64_t o = 0; o < outer; ++o) {
    std::int64_t oa = 0, ob = 0;
    for (std::size_t k = 0; k + 1 < rank; ++k) {
      oa += index[k] * sa[k];
      ob += index[k] * sb[k];
    }
    Y* row = y + o * inner;
    const A* ra = a + oa;
    const B* rb = b + ob;
    // The common cases as loops the compiler vectorises: both operands contiguous, or one of
    // them a scalar along the row (a bias, a per-channel scale).
    if (ia == 1 && ib == 1) {
      for (std::int64_t j = 0; j < inner; ++j) row[j] = fn(ra[j], rb[j]);
    } else if (ia == 1 && ib == 0) {
      const B vb = *rb;
      for (std::int64_t j = 0; j < inner; ++j) row[j] = fn(ra[j], vb);
    } else if (ia == 0 && ib == 1) {
      const A va = *ra;
      for (std::int64_t j = 0; j < inner; ++j) row[j] = fn(va, rb[j]);
    } else {
      for (std::int64_t j = 0; j < inner; ++j) row[j] = fn(ra[j * ia], rb[j * ib]);
    }
    for (std::size_t k = rank - 1; k-- > 0;) {
      if (++index[k] < out_shape[k]) break;
      index[k] = 0;
    }
  }
}

}  // namespace spmd::ops
