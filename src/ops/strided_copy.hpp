#pragma once
// A strided gather of a tensor's elements in one pass: what Transpose, Slice, Split and
// Einsum's operand layouts, DepthToSpace and SpaceToDepth are.
#include <algorithm>
#include <cstdint>
#include <vector>

namespace spmd::ops {

// Row-major strides of a shape, in elements.
inline std::vector<std::int64_t> strides_of(const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> s(shape.size(), 1);
  for (std::size_t k = shape.size(); k-- > 1;) s[k - 1] = s[k] * shape[k];
  return s;
}

// y[i] = x[base + sum_k i_k * strides[k]] over y's shape: what Transpose, Slice and Split are.
// Dimensions that are contiguous in both are merged and 1-sized ones dropped, so the innermost
// loop is as long as it can be (a plain copy where its stride is 1): an index computed per
// element costs more than the copy itself.
template <class T>
inline void strided_copy(const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& strides, std::int64_t base,
                  const T* src, T* dst) {
  std::vector<std::int64_t> dims, steps;
  for (std::size_t k = 0; k < shape.size(); ++k) {
    if (shape[k] == 0) return;
    if (shape[k] == 1) continue;
    if (!dims.empty() && steps.back() == strides[k] * shape[k]) {
      dims.back() *= shape[k];
      steps.back() = strides[k];
    } else {
      dims.push_back(shape[k]);
      steps.push_back(strides[k]);
    }
  }
  if (dims.empty()) {
    dst[0] = src[base];
    return;
  }
  const std::size_t outer_rank = dims.size() - 1;
  const std::int64_t inner = dims.back(), step = steps.back();
  std::int64_t outer = 1;
  for (std::size_t k = 0; k < outer_rank; ++k) outer *= dims[k];
  std::vector<std::int64_t> index(outer_rank, 0);
  std::int64_t from = base;
  for (std::int64_t o = 0; o < outer; ++o, dst += inner) {
    const T* s = src + from;
    if (step == 1) std::copy_n(s, inner, dst);
    else for (std::int64_t j = 0; j < inner; ++j) dst[j] = s[j * step];
    for (std::size_t k = outer_rank; k-- > 0;) {  // odometer, the source offset kept up to date
      from += steps[k];
      if (++index[k] < dims[k]) break;
      from -= steps[k] * dims[k];
      index[k] = 0;
    }
  }
}

}  // namespace spmd::ops
