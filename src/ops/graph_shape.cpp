// Graph ops that move or select elements, and the shape arithmetic exporters emit (Shape,
// Gather, Slice, Concat, Cast, ConstantOfShape on small int64 tensors).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>

#include "spmd/ops/graph_op.hpp"
#include "spmd/ops/half_float.hpp"
#include "strided_copy.hpp"

namespace spmd::ops {
namespace {


// Output 0 = input 0's data under another shape: its storage, where no later node reads it.
void copy_as(const OpCall& c, std::vector<std::int64_t> shape) {
  const Tensor& x = c.input(0);
  Tensor& y = *c.out[0];
  const bool taken = c.take_input0_storage(y);
  const std::vector<std::int64_t> from = x.shape;
  const ElemType type = x.type;
  const std::int64_t size = x.size();
  y.reset(type, std::move(shape));  // same size: the data stays
  if (y.size() != size) c.fail("cannot view " + to_string(from) + " as " + to_string(y.shape));
  if (taken || &x == &y) return;
  if (x.type == ElemType::Float32) std::copy_n(x.f.begin(), x.size(), y.f.begin());
  else std::copy_n(x.i.begin(), x.size(), y.i.begin());
}

void identity(const OpCall& c) { copy_as(c, c.input(0).shape); }

// Dropout at inference: the input, and (when asked) a mask of ones (bool as int64).
void dropout(const OpCall& c) {
  if (c.has_input(2) && c.input(2).as_ints().at(0) != 0) c.fail(kTrainingModeRefusal);
  identity(c);
  if (c.out.size() > 1) {
    c.out[1]->reset(ElemType::Int64, c.input(0).shape);
    std::fill(c.out[1]->i.begin(), c.out[1]->i.end(), 1);
  }
}

void reshape(const OpCall& c) {
  const Tensor& x = c.input(0);
  auto dims = c.node.opset < 5 ? c.node.attrs.ints_or("shape", {}) : c.input(1).as_ints();
  const bool allow_zero = c.node.attrs.i("allowzero", 0) != 0;
  std::int64_t known = 1, infer = -1;
  for (std::size_t k = 0; k < dims.size(); ++k) {
    if (dims[k] == 0 && !allow_zero) {
      if (k >= x.shape.size()) c.fail("0 in the target shape copies a dimension the input lacks");
      dims[k] = x.shape[k];
    }
    if (dims[k] == -1) {
      if (infer >= 0) c.fail("more than one -1 in the target shape");
      infer = static_cast<std::int64_t>(k);
    } else {
      if (dims[k] < 0) c.fail("a negative dimension (" + std::to_string(dims[k]) + ") in the target shape " + to_string(dims));
      if (dims[k] > 0 && known > std::numeric_limits<std::int64_t>::max() / dims[k])
        c.fail("the target shape " + to_string(dims) + " overflows a 64-bit size");
      known *= dims[k];
    }
  }
  if (infer >= 0) dims[static_cast<std::size_t>(infer)] = known ? x.size() / known : 0;
  copy_as(c, dims);
}

void flatten(const OpCall& c) {
  const Tensor& x = c.input(0);
  const auto r = static_cast<std::int64_t>(x.shape.size());
  std::int64_t a = c.node.attrs.i("axis", 1);
  if (a < -r || a > r) c.fail("axis " + std::to_string(a) + " is outside [-rank, rank] for rank " + std::to_string(r));
  const auto axis = static_cast<std::size_t>(a < 0 ? a + r : a);
  std::int64_t outer = 1, inner = 1;
  for (std::size_t k = 0; k < x.shape.size(); ++k) (k < axis ? outer : inner) *= x.shape[k];
  copy_as(c, {outer, inner});
}

void squeeze(const OpCall& c) {
  const Tensor& x = c.input(0);
  std::vector<std::int64_t> axes = c.node.opset < 13 ? c.node.attrs.ints_or("axes", {})
                                   : c.has_input(1) ? c.input(1).as_ints() : std::vector<std::int64_t>{};
  std::vector<bool> drop(x.shape.size(), false);
  for (const auto a : axes) drop[c.axis(a, x.shape.size())] = true;
  std::vector<std::int64_t> shape;
  for (std::size_t k = 0; k < x.shape.size(); ++k) {
    if (axes.empty() ? x.shape[k] == 1 : drop[k]) {
      if (x.shape[k] != 1) c.fail("cannot squeeze dimension " + std::to_string(k) + " of " + to_string(x.shape));
      continue;
    }
    shape.push_back(x.shape[k]);
  }
  copy_as(c, shape);
}

void unsqueeze(const OpCall& c) {
  const Tensor& x = c.input(0);
  const auto axes = c.node.opset < 13 ? c.node.attrs.ints_or("axes", {}) : c.input(1).as_ints();
  const std::size_t rank = x.shape.size() + axes.size();
  std::vector<bool> added(rank, false);
  for (const auto a : axes) {
    const std::size_t at = c.axis(a, rank);
    // Twice the same axis would leave the output a dimension short of `rank`.
    if (added[at]) c.fail("axes " + to_string(axes) + " name axis " + std::to_string(at) + " twice");
    added[at] = true;
  }
  std::vector<std::int64_t> shape;
  for (std::size_t k = 0, from = 0; k < rank; ++k) shape.push_back(added[k] ? 1 : x.shape[from++]);
  copy_as(c, shape);
}

// Output element at multi-index `index` comes from `src_offset(index)`; T is float or int64.
template <class T, class Offset>
void gather_elements(const std::vector<std::int64_t>& out_shape, const T* src, T* dst, Offset src_offset) {
  std::vector<std::int64_t> index(out_shape.size(), 0);
  std::int64_t total = 1;
  for (const auto d : out_shape) total *= d;
  for (std::int64_t o = 0; o < total; ++o) {
    dst[o] = src[src_offset(index)];
    for (std::size_t k = out_shape.size(); k-- > 0;) {
      if (++index[k] < out_shape[k]) break;
      index[k] = 0;
    }
  }
}

template <class Offset>
void gather_into(const Tensor& x, Tensor& y, Offset offset) {
  if (x.type == ElemType::Float32) gather_elements(y.shape, x.f.data(), y.f.data(), offset);
  else gather_elements(y.shape, x.i.data(), y.i.data(), offset);
}

void strided_copy_into(const Tensor& x, Tensor& y, const std::vector<std::int64_t>& strides, std::int64_t base) {
  if (x.type == ElemType::Float32) strided_copy(y.shape, strides, base, x.f.data(), y.f.data());
  else strided_copy(y.shape, strides, base, x.i.data(), y.i.data());
}

void transpose(const OpCall& c) {
  const Tensor& x = c.input(0);
  std::vector<std::int64_t> perm(x.shape.size());
  std::iota(perm.rbegin(), perm.rend(), 0);  // default: reverse the dimensions
  perm = c.node.attrs.ints_or("perm", perm);
  if (perm.size() != x.shape.size()) c.fail("perm has " + std::to_string(perm.size()) + " entries for rank " + std::to_string(x.shape.size()));
  std::vector<std::int64_t> shape(perm.size()), strides(perm.size());
  std::vector<bool> taken(perm.size());
  const auto in_strides = strides_of(x.shape);
  for (std::size_t k = 0; k < perm.size(); ++k) {
    const std::size_t from = c.axis(perm[k], x.shape.size());
    if (taken[from]) c.fail("perm " + to_string(perm) + " is not a permutation of the dimensions");
    taken[from] = true;
    shape[k] = x.shape[from];
    strides[k] = in_strides[from];
  }
  Tensor& y = *c.out[0];
  y.reset(x.type, shape);
  strided_copy_into(x, y, strides, 0);
}

void concat(const OpCall& c) {
  const Tensor& first = c.input(0);
  const std::size_t axis = c.axis(c.node.attrs.i("axis", c.node.opset < 4 ? 1 : 0), first.shape.size());
  auto shape = first.shape;
  shape[axis] = 0;
  for (std::size_t k = 0; k < c.in.size(); ++k) {
    const Tensor& t = c.input(k);
    if (t.shape.size() != first.shape.size() || t.type != first.type) c.fail("inputs of different ranks or types");
    for (std::size_t d = 0; d < shape.size(); ++d)
      if (d != axis && t.shape[d] != first.shape[d]) c.fail("input " + std::to_string(k) + " " + to_string(t.shape) + " differs off the axis");
    shape[axis] += t.shape[axis];
  }
  Tensor& y = *c.out[0];
  y.reset(first.type, shape);
  std::int64_t outer = 1, inner = 1;
  for (std::size_t d = 0; d < shape.size(); ++d) (d < axis ? outer : inner) *= d == axis ? 1 : shape[d];
  std::int64_t at = 0;
  for (std::size_t k = 0; k < c.in.size(); ++k) {
    const Tensor& t = c.input(k);
    const std::int64_t block = t.shape[axis] * inner;
    for (std::int64_t o = 0; o < outer; ++o) {
      const std::int64_t dst = o * shape[axis] * inner + at, src = o * block;
      if (t.type == ElemType::Float32) std::copy_n(t.f.begin() + src, block, y.f.begin() + dst);
      else std::copy_n(t.i.begin() + src, block, y.i.begin() + dst);
    }
    at += block;
  }
}

// Split along an axis: sizes from the `split` input (opset 13) or attribute, else equal parts
// (the last smaller when opset 18's num_outputs does not divide the dimension).
void split(const OpCall& c) {
  const Tensor& x = c.input(0);
  const std::size_t axis = c.axis(c.node.attrs.i("axis", 0), x.shape.size());
  const std::int64_t dim = x.shape[axis], parts = static_cast<std::int64_t>(c.out.size());
  // The sizes as an input in opsets 1 and 13 on, an attribute between.
  std::vector<std::int64_t> sizes = c.has_input(1) ? c.input(1).as_ints() : c.node.attrs.ints_or("split", {});
  if (sizes.empty()) {
    const std::int64_t each = (dim + parts - 1) / parts;
    for (std::int64_t k = 0; k < parts; ++k) sizes.push_back(std::clamp<std::int64_t>(dim - k * each, 0, each));
  }
  if (static_cast<std::int64_t>(sizes.size()) != parts || std::accumulate(sizes.begin(), sizes.end(), std::int64_t{0}) != dim)
    c.fail("split sizes do not add up to dimension " + std::to_string(axis) + " of " + to_string(x.shape) +
           " over " + std::to_string(parts) + " outputs");
  const auto in_strides = strides_of(x.shape);
  std::int64_t at = 0;
  for (std::size_t k = 0; k < c.out.size(); ++k) {
    auto shape = x.shape;
    shape[axis] = sizes[k];
    Tensor& y = *c.out[k];
    y.reset(x.type, shape);
    strided_copy_into(x, y, in_strides, at * in_strides[axis]);
    at += sizes[k];
  }
}

// Tile: the input repeated `repeats[d]` times along each dimension d.
void tile(const OpCall& c) {
  const Tensor& x = c.input(0);
  if (c.node.opset < 6) c.fail("opset " + std::to_string(c.node.opset) + "'s Tile (tiles and axis inputs) is not supported; export with opset >= 7");
  const auto repeats = c.input(1).as_ints();
  if (repeats.size() != x.shape.size()) c.fail("repeats has " + std::to_string(repeats.size()) + " values for rank " + std::to_string(x.shape.size()));
  auto shape = x.shape;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (repeats[d] < 0) c.fail("a negative repeat (" + std::to_string(repeats[d]) + ") on axis " + std::to_string(d));
    if (repeats[d] > 0 && shape[d] > std::numeric_limits<std::int64_t>::max() / repeats[d])
      c.fail("dimension " + std::to_string(shape[d]) + " repeated " + std::to_string(repeats[d]) + " times on axis " +
             std::to_string(d) + " overflows a 64-bit size");
    shape[d] *= repeats[d];
  }
  const auto in_strides = strides_of(x.shape);
  Tensor& y = *c.out[0];
  y.reset(x.type, shape);
  gather_into(x, y, [&](const std::vector<std::int64_t>& index) {
    std::int64_t off = 0;
    for (std::size_t d = 0; d < index.size(); ++d) off += index[d] % x.shape[d] * in_strides[d];
    return off;
  });
}

namespace {
std::string shortest(float v) {
  char text[32];
  const auto end = std::to_chars(text, text + sizeof text, v).ptr;
  return std::string(text, end);
}
}  // namespace

// Range(start, limit, delta): scalars of one type; max(ceil((limit - start) / delta), 0) values,
// at most --max-range-length: a model's constants (or its input) decide the length.
void range(const OpCall& c) {
  const Tensor& start = c.input(0);
  Tensor& y = *c.out[0];
  const std::int64_t limit = max_range_length();
  const auto over = [&](const std::string& count) {
    c.fail("it would make " + count + " values, over --max-range-length " + std::to_string(limit) +
           " (raise it for a model you trust)");
  };
  if (start.type == ElemType::Float32) {
    const float s = start.f.at(0), l = c.float_input(1).f.at(0), d = c.float_input(2).f.at(0);
    if (d == 0) c.fail("a delta of 0");
    const float q = std::ceil((l - s) / d);
    if (!std::isfinite(q))
      c.fail("start " + shortest(s) + ", limit " + shortest(l) + " and delta " + shortest(d) + " give no finite count");
    if (q > static_cast<float>(limit)) over(shortest(q));
    const auto n = std::max<std::int64_t>(0, static_cast<std::int64_t>(q));
    y.reset(ElemType::Float32, {n});
    for (std::int64_t k = 0; k < n; ++k) y.f[static_cast<std::size_t>(k)] = s + static_cast<float>(k) * d;
  } else {
    const std::int64_t s = start.i.at(0), l = c.input(1).as_ints().at(0), d = c.input(2).as_ints().at(0);
    if (d == 0) c.fail("a delta of 0");
    // In unsigned arithmetic: limit - start spans up to 2^64 - 1, past int64.
    const auto us = static_cast<std::uint64_t>(s), ul = static_cast<std::uint64_t>(l), ud = static_cast<std::uint64_t>(d);
    std::uint64_t n = 0;
    if (d > 0 && l > s) n = (ul - us - 1) / ud + 1;
    if (d < 0 && l < s) n = (us - ul - 1) / (0 - ud) + 1;
    if (n > static_cast<std::uint64_t>(limit)) over(std::to_string(n));
    y.reset(ElemType::Int64, {static_cast<std::int64_t>(n)});
    for (std::uint64_t k = 0; k < n; ++k) y.i[static_cast<std::size_t>(k)] = static_cast<std::int64_t>(us + k * ud);
  }
}

void shape_op(const OpCall& c) {
  const Tensor& x = c.input(0);
  const auto r = static_cast<std::int64_t>(x.shape.size());
  std::int64_t start = c.node.attrs.i("start", 0), end = c.node.attrs.i("end", r);
  start = std::clamp(start < 0 ? start + r : start, std::int64_t{0}, r);
  end = std::clamp(end < 0 ? end + r : end, std::int64_t{0}, r);
  Tensor& y = *c.out[0];
  y.reset(ElemType::Int64, {std::max<std::int64_t>(0, end - start)});
  for (std::int64_t k = start; k < end; ++k) y.i[static_cast<std::size_t>(k - start)] = x.shape[static_cast<std::size_t>(k)];
}

void gather(const OpCall& c) {
  const Tensor& x = c.input(0);
  const Tensor& idx = c.input(1);
  const std::size_t axis = c.axis(c.node.attrs.i("axis", 0), x.shape.size());
  const auto indices = idx.as_ints();
  std::vector<std::int64_t> shape(x.shape.begin(), x.shape.begin() + static_cast<long>(axis));
  shape.insert(shape.end(), idx.shape.begin(), idx.shape.end());
  shape.insert(shape.end(), x.shape.begin() + static_cast<long>(axis) + 1, x.shape.end());
  const auto in_strides = strides_of(x.shape);
  const std::size_t idx_rank = idx.shape.size();
  Tensor& y = *c.out[0];
  y.reset(x.type, shape);
  gather_into(x, y, [&](const std::vector<std::int64_t>& index) {
    std::int64_t flat = 0;  // position in `indices`
    for (std::size_t k = 0; k < idx_rank; ++k) flat = flat * idx.shape[k] + index[axis + k];
    std::int64_t pick = indices[static_cast<std::size_t>(flat)];
    if (pick < 0) pick += x.shape[axis];
    if (pick < 0 || pick >= x.shape[axis]) c.fail("index " + std::to_string(pick) + " is out of range");
    std::int64_t off = pick * in_strides[axis];
    for (std::size_t k = 0; k < axis; ++k) off += index[k] * in_strides[k];
    for (std::size_t k = axis + 1; k < x.shape.size(); ++k) off += index[k + idx_rank - 1] * in_strides[k];
    return off;
  });
}

void slice(const OpCall& c) {
  const Tensor& x = c.input(0);
  const bool attrs = c.node.opset < 10;
  const auto starts = attrs ? c.node.attrs.ints_or("starts", {}) : c.input(1).as_ints();
  const auto ends = attrs ? c.node.attrs.ints_or("ends", {}) : c.input(2).as_ints();
  std::vector<std::int64_t> axes(starts.size());
  std::iota(axes.begin(), axes.end(), 0);
  if (attrs) axes = c.node.attrs.ints_or("axes", axes);
  else if (c.has_input(3)) axes = c.input(3).as_ints();
  std::vector<std::int64_t> steps(starts.size(), 1);
  if (!attrs && c.has_input(4)) steps = c.input(4).as_ints();
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    c.fail("starts, ends, axes and steps differ in length");
  auto first = std::vector<std::int64_t>(x.shape.size(), 0), step = std::vector<std::int64_t>(x.shape.size(), 1);
  auto shape = x.shape;
  for (std::size_t k = 0; k < starts.size(); ++k) {
    const std::size_t a = c.axis(axes[k], x.shape.size());
    const std::int64_t dim = x.shape[a], s = steps[k];
    if (s == 0) c.fail("a step of 0");
    const auto clampd = [&](std::int64_t v, std::int64_t lo, std::int64_t hi) {
      return std::clamp(v < 0 ? v + dim : v, lo, hi);
    };
    const std::int64_t b = s > 0 ? clampd(starts[k], 0, dim) : clampd(starts[k], -1, dim - 1);
    const std::int64_t e = s > 0 ? clampd(ends[k], 0, dim) : clampd(ends[k], -1, dim - 1);
    first[a] = b;
    step[a] = s;
    shape[a] = std::max<std::int64_t>(0, s > 0 ? (e - b + s - 1) / s : (b - e - s - 1) / -s);
  }
  const auto in_strides = strides_of(x.shape);
  std::vector<std::int64_t> strides(shape.size());
  std::int64_t base = 0;
  for (std::size_t k = 0; k < shape.size(); ++k) {
    strides[k] = step[k] * in_strides[k];
    base += first[k] * in_strides[k];
  }
  Tensor& y = *c.out[0];
  y.reset(x.type, shape);
  strided_copy_into(x, y, strides, base);
}

// x as the TensorProto type `to` (1 float, 7 int64, 6 int32, 9 bool, 11 double, 10 float16, 16 bfloat16).
void cast_to(const OpCall& c, std::int64_t to) {
  const Tensor& x = c.input(0);
  Tensor& y = *c.out[0];
  const bool to_float = to == 1 || to == 10 || to == 11 || to == 16, to_bool = to == 9;
  y.reset(to_float ? ElemType::Float32 : ElemType::Int64, x.shape);
  const std::int64_t size = x.size();
  for (std::int64_t k = 0; k < size; ++k) {
    const auto u = static_cast<std::size_t>(k);
    if (to_float) {
      const float v = x.type == ElemType::Float32 ? x.f[u] : static_cast<float>(x.i[u]);
      // float16 and bfloat16 are computed in float32 after the rounding the cast asks for.
      y.f[u] = to == 10 ? half_to_float(float_to_half(v)) : to == 16 ? bfloat16_to_float(float_to_bfloat16(v)) : v;
    }
    else if (to_bool) y.i[u] = x.type == ElemType::Int64 ? x.i[u] != 0 : x.f[u] != 0.0f;
    else y.i[u] = x.type == ElemType::Int64 ? x.i[u] : static_cast<std::int64_t>(x.f[u]);
  }
}

void cast(const OpCall& c) {
  if (c.node.opset < 6) c.fail("opset " + std::to_string(c.node.opset) + "'s Cast (the type as a string) is not supported; export with opset >= 7");
  cast_to(c, c.node.attrs.i("to", 1));
}

// CastLike (opset 15; PyTorch 2's exporter writes it): to the type of input 1, as the loader
// found it declared (spmd_to: a graph input's, an initializer's, a Constant's, a Cast's
// output's, value_info's), else as computed here (float32 or int64).
void cast_like(const OpCall& c) {
  cast_to(c, c.node.attrs.i("spmd_to", c.input(1).type == ElemType::Float32 ? 1 : 7));
}

void constant_of_shape(const OpCall& c) {
  const auto dims = c.input(0).as_ints();
  const auto it = c.node.attrs.tensors.find("value");
  Tensor& y = *c.out[0];
  const bool ints = it != c.node.attrs.tensors.end() && it->second.type == ElemType::Int64;
  y.reset(ints ? ElemType::Int64 : ElemType::Float32, dims);
  if (ints) std::fill(y.i.begin(), y.i.end(), it->second.i.at(0));
  else std::fill(y.f.begin(), y.f.end(), it == c.node.attrs.tensors.end() ? 0.0f : it->second.f.at(0));
}

// Pad: pads [x1_begin, x2_begin, ..., x1_end, x2_end, ...] as input (opset >= 11) or
// attribute (opset 18: for the axes input's axes only); negative pads crop. Modes constant,
// reflect (mirror without the edge), edge and wrap (opset 19).
void pad(const OpCall& c) {
  const Tensor& x = c.input(0);
  const std::string mode = c.node.attrs.s("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
    c.fail("mode '" + mode + "' is not constant, reflect, edge or wrap");
  auto pads = c.node.opset < 2 ? c.node.attrs.ints_or("paddings", {}) : c.node.opset < 11 ? c.node.attrs.ints_or("pads", {}) : c.input(1).as_ints();
  if (c.node.opset >= 18 && c.has_input(3)) {  // pads for the listed axes only
    const auto axes = c.input(3).as_ints();
    if (pads.size() != 2 * axes.size()) c.fail("pads has " + std::to_string(pads.size()) + " values for " + std::to_string(axes.size()) + " axes");
    std::vector<std::int64_t> full(2 * x.shape.size(), 0);
    for (std::size_t k = 0; k < axes.size(); ++k) {
      const std::size_t a = c.axis(axes[k], x.shape.size());
      full[a] = pads[k];
      full[a + x.shape.size()] = pads[k + axes.size()];
    }
    pads = full;
  }
  const Tensor* constant = c.node.opset >= 11 && c.has_input(2) ? &c.input(2) : nullptr;
  const float value = c.node.opset < 11 ? c.node.attrs.f("value", 0.0f) : constant && constant->type == ElemType::Float32 ? constant->f.at(0) : 0.0f;
  const std::int64_t int_value = constant && constant->type == ElemType::Int64 ? constant->i.at(0) : 0;
  const std::size_t r = x.shape.size();
  if (pads.size() != 2 * r) c.fail("pads has " + std::to_string(pads.size()) + " values for rank " + std::to_string(r));
  // A pad past 2^40 is past any tensor's size: refused before the sum could overflow.
  constexpr std::int64_t kMaxPad = std::int64_t{1} << 40;
  for (const std::int64_t p : pads)
    if (p > kMaxPad || p < -kMaxPad) c.fail("a pad of " + std::to_string(p) + " (past 2^40)");
  auto shape = x.shape;
  for (std::size_t k = 0; k < r; ++k) shape[k] += pads[k] + pads[k + r];
  // PyTorch exports AvgPool2d (count_include_pad) as a Pad of zeros before the pool.
  if (std::all_of(pads.begin(), pads.end(), [](std::int64_t p) { return p == 0; })) return copy_as(c, shape);
  const auto in_strides = strides_of(x.shape);
  Tensor& y = *c.out[0];
  y.reset(x.type, shape);
  // Per dimension, where each output index reads (an input offset along it), or -1 for the
  // padding value: the mode's arithmetic done once per index, not once per element.
  std::vector<std::vector<std::int64_t>> from(r);
  for (std::size_t k = 0; k < r; ++k) {
    const std::int64_t n = x.shape[k];
    for (std::int64_t j = 0; j < shape[k]; ++j) {
      std::int64_t v = j - pads[k];
      if (mode == "edge") v = std::clamp<std::int64_t>(v, 0, n - 1);
      if (mode == "wrap" && n > 0) v = (v % n + n) % n;
      if (mode == "reflect" && n > 1)
        while (v < 0 || v >= n) v = v < 0 ? -v : 2 * (n - 1) - v;
      if (mode == "reflect" && n == 1) v = 0;
      from[k].push_back(v >= 0 && v < n ? v * in_strides[k] : -1);
    }
  }
  if (y.size() == 0) return;
  if (r == 0) {  // a scalar: nothing to pad
    y = x;
    return;
  }
  // Row by row along the last dimension: an odometer over the others finds the source row.
  const std::int64_t width = shape[r - 1], rows = y.size() / width;
  const std::vector<std::int64_t>& last = from[r - 1];
  // The row's interior (read in order, one block copy): where output index j reads input j - pad.
  const std::int64_t interior_begin = std::clamp<std::int64_t>(pads[r - 1], 0, width);
  const std::int64_t interior_end = std::clamp<std::int64_t>(pads[r - 1] + x.shape[r - 1], interior_begin, width);
  std::vector<std::int64_t> index(r - 1, 0);
  for (std::int64_t row = 0; row < rows; ++row) {
    std::int64_t off = 0;
    bool inside = true;
    for (std::size_t k = 0; k + 1 < r; ++k) {
      const std::int64_t f = from[k][static_cast<std::size_t>(index[k])];
      inside = inside && f >= 0;
      off += f;
    }
    const auto put = [&](auto* out, const auto* in, auto pad_value) {
      out += row * width;
      if (!inside) return std::fill(out, out + width, pad_value);
      const auto at = [&](std::int64_t j) {
        const std::int64_t f = last[static_cast<std::size_t>(j)];
        out[j] = f >= 0 ? in[off + f] : pad_value;
      };
      for (std::int64_t j = 0; j < interior_begin; ++j) at(j);
      std::copy(in + off + (interior_begin - pads[r - 1]), in + off + (interior_end - pads[r - 1]), out + interior_begin);
      for (std::int64_t j = interior_end; j < width; ++j) at(j);
    };
    if (x.type == ElemType::Float32) put(y.f.data(), x.f.data(), value);
    else put(y.i.data(), x.i.data(), int_value);
    for (std::size_t k = r - 1; k-- > 0;) {
      if (++index[k] < shape[k]) break;
      index[k] = 0;
    }
  }
}

}  // namespace

SPMD_REGISTER_GRAPH_OP("Identity", identity);
SPMD_REGISTER_GRAPH_OP("Dropout", dropout);
SPMD_REGISTER_GRAPH_OP("Reshape", reshape);
SPMD_REGISTER_GRAPH_OP("Flatten", flatten);
SPMD_REGISTER_GRAPH_OP("Squeeze", squeeze);
SPMD_REGISTER_GRAPH_OP("Unsqueeze", unsqueeze);
SPMD_REGISTER_GRAPH_OP("Transpose", transpose);
SPMD_REGISTER_GRAPH_OP("Concat", concat);
SPMD_REGISTER_GRAPH_OP("Split", split);
SPMD_REGISTER_GRAPH_OP("Tile", tile);
SPMD_REGISTER_GRAPH_OP("Range", range);
SPMD_REGISTER_GRAPH_OP("Shape", shape_op);
SPMD_REGISTER_GRAPH_OP("Gather", gather);
SPMD_REGISTER_GRAPH_OP("Slice", slice);
SPMD_REGISTER_GRAPH_OP("Cast", cast);
SPMD_REGISTER_GRAPH_OP("CastLike", cast_like);
SPMD_REGISTER_GRAPH_OP("ConstantOfShape", constant_of_shape);
SPMD_REGISTER_GRAPH_OP("Pad", pad);

}  // namespace spmd::ops
