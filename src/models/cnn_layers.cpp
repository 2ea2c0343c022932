#include "spmd/models/cnn_layers.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "spmd/runtime/error.hpp"

namespace spmd::models::cnn_cpu {

void pad_image(const float* image, int h, int w, int c, float* x_padded) {
  const long row = static_cast<long>(w) * c, padded_row = static_cast<long>(w + 2) * c;
  for (int y = 0; y < h; ++y)
    std::memcpy(x_padded + (y + 1) * padded_row + c, image + y * row, static_cast<std::size_t>(row) * sizeof(float));
}

void avg_pool2x2(const float* in, int h, int w, int c, float* out, long out_row_stride) {
  const long in_row = static_cast<long>(w) * c;
  for (int py = 0; py < h / 2; ++py) {
    for (int px = 0; px < w / 2; ++px) {
      const float* __restrict a = in + (2 * py) * in_row + (2 * px) * c;
      const float* __restrict b = a + in_row;
      float* __restrict o = out + py * out_row_stride + px * c;
      for (int ch = 0; ch < c; ++ch) o[ch] = 0.25f * ((a[ch] + a[c + ch]) + (b[ch] + b[c + ch]));
    }
  }
}

void avg_pool2x2_relu_backward(const float* activation, const float* dpooled, long dpooled_row_stride, int h,
                               int w, int c, float* dpre) {
  const long row = static_cast<long>(w) * c;
  // Rows and columns past 2 * (h/2), 2 * (w/2) (odd sizes) fed no pooled output.
  const int h_used = h / 2 * 2, w_used = w / 2 * 2;
  for (int y = 0; y < h; ++y) {
    if (y >= h_used) {
      std::fill(dpre + y * row, dpre + (y + 1) * row, 0.0f);
      continue;
    }
    if (w_used < w) std::fill(dpre + y * row + static_cast<long>(w_used) * c, dpre + (y + 1) * row, 0.0f);
    for (int x = 0; x < w_used; ++x) {
      // Multiplying by the 0/1 mask instead of branching lets GCC vectorise the loop (it does
      // not if-convert a float comparison under -ftrapping-math). g is finite, so the result
      // is the same.
      const float* __restrict g = dpooled + (y / 2) * dpooled_row_stride + (x / 2) * c;
      const float* __restrict act = activation + y * row + x * c;
      float* __restrict d = dpre + y * row + x * c;
      for (int ch = 0; ch < c; ++ch) d[ch] = static_cast<float>(act[ch] > 0.0f) * (0.25f * g[ch]);
    }
  }
}

namespace {

// C known at compile time: the copies become a few vector moves instead of memcpy calls.
template <int C>
void im2col3x3_fixed(const float* in_padded, int h, int w, float* col) {
  const long in_row = static_cast<long>(w + 2) * C;
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      float* __restrict dst = col + (static_cast<long>(y) * w + x) * 9 * C;
      for (int dy = 0; dy < 3; ++dy) {
        // The three taps of a row are adjacent in the padded input: 3*C contiguous floats.
        const float* __restrict src = in_padded + (y + dy) * in_row + x * C;
        for (int i = 0; i < 3 * C; ++i) dst[dy * 3 * C + i] = src[i];
      }
    }
  }
}

}  // namespace

void im2col3x3(const float* in_padded, int h, int w, int c, float* col) {
  if (c == 32) return im2col3x3_fixed<32>(in_padded, h, w, col);
  const long in_row = static_cast<long>(w + 2) * c;
  const std::size_t chunk = static_cast<std::size_t>(c) * sizeof(float);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      float* dst = col + (static_cast<long>(y) * w + x) * 9 * c;
      for (int dy = 0; dy < 3; ++dy) std::memcpy(dst + dy * 3 * c, in_padded + (y + dy) * in_row + x * c, 3 * chunk);
    }
  }
}

void col2im3x3_add(const float* col, int h, int w, int c, float* d_in_padded) {
  const long in_row = static_cast<long>(w + 2) * c;
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      const float* src = col + (static_cast<long>(y) * w + x) * 9 * c;
      for (int dy = 0; dy < 3; ++dy) {
        float* __restrict dst = d_in_padded + (y + dy) * in_row + x * c;
        const float* __restrict s = src + dy * 3 * c;
        for (int i = 0; i < 3 * c; ++i) dst[i] += s[i];
      }
    }
  }
}

void dense_forward(const float* in, int rows, int n_in, const float* kernel, const float* bias, int n_out,
                   float* out) {
  for (int r = 0; r < rows; ++r) {
    float* o = out + static_cast<long>(r) * n_out;
    for (int j = 0; j < n_out; ++j) o[j] = bias[j];
    const float* x = in + static_cast<long>(r) * n_in;
    for (int k = 0; k < n_in; ++k) {
      const float xk = x[k];
      const float* wk = kernel + static_cast<long>(k) * n_out;
      for (int j = 0; j < n_out; ++j) o[j] += xk * wk[j];
    }
  }
}

void dense_backward(const float* in, int rows, int n_in, const float* kernel, int n_out, const float* dout,
                    float* dkernel, float* dbias, float* din, bool relu_input_mask) {
  add_row_sums(dout, rows, n_out, dbias);
  for (int r = 0; r < rows; ++r) {
    const float* x = in + static_cast<long>(r) * n_in;
    const float* g = dout + static_cast<long>(r) * n_out;
    for (int k = 0; k < n_in; ++k) {
      float* dk = dkernel + static_cast<long>(k) * n_out;
      const float xk = x[k];
      for (int j = 0; j < n_out; ++j) dk[j] += xk * g[j];
    }
    if (din == nullptr) continue;
    float* dx = din + static_cast<long>(r) * n_in;
    for (int k = 0; k < n_in; ++k) {
      const float* wk = kernel + static_cast<long>(k) * n_out;
      float s = 0.0f;
      for (int j = 0; j < n_out; ++j) s += g[j] * wk[j];
      dx[k] = relu_input_mask && !(x[k] > 0.0f) ? 0.0f : s;
    }
  }
}

void add_row_sums(const float* x, int rows, int n, float* acc) {
  for (int r = 0; r < rows; ++r) {
    const float* row = x + static_cast<long>(r) * n;
    for (int j = 0; j < n; ++j) acc[j] += row[j];
  }
}

std::int64_t count_rows(const std::uint8_t* mask, int rows) {
  if (mask == nullptr) return rows;
  std::int64_t n = 0;
  for (int r = 0; r < rows; ++r) n += mask[r] != 0;
  return n;
}

LossSum softmax_cross_entropy(const float* logits, const std::int32_t* labels, const std::uint8_t* mask, int rows,
                              int classes, float* probs, float* dlogits, float grad_scale) {
  if (classes < 1) throw Error("CNN loss: " + std::to_string(classes) + " classes; need at least 1");
  // exp() of each logit is kept between the two passes: on the stack for the usual few
  // classes, in one allocation per call beyond that.
  constexpr int kStackClasses = 64;
  float stack_e[kStackClasses];
  std::vector<float> heap_e(classes > kStackClasses ? static_cast<std::size_t>(classes) : 0);
  float* e = classes > kStackClasses ? heap_e.data() : stack_e;
  LossSum sum;
  for (int r = 0; r < rows; ++r) {
    const float* z = logits + static_cast<long>(r) * classes;
    const bool counted = labels != nullptr && (mask == nullptr || mask[r] != 0);
    // Shifting by the max keeps exp() finite; the log-sum-exp is exact in float.
    float zmax = z[0];
    for (int j = 1; j < classes; ++j) zmax = std::max(zmax, z[j]);
    float total = 0.0f;
    for (int j = 0; j < classes; ++j) {
      e[j] = std::exp(z[j] - zmax);
      total += e[j];
    }
    const float inv_total = 1.0f / total;
    if (probs != nullptr)
      for (int j = 0; j < classes; ++j) probs[static_cast<long>(r) * classes + j] = e[j] * inv_total;
    float* d = dlogits != nullptr ? dlogits + static_cast<long>(r) * classes : nullptr;
    if (!counted) {
      if (d != nullptr) std::fill(d, d + classes, 0.0f);
      continue;
    }
    const std::int32_t label = labels[r];
    if (label < 0 || label >= classes)
      throw Error("CNN loss: label " + std::to_string(label) + " of batch row " + std::to_string(r) +
                  " is outside [0, " + std::to_string(classes) + ")");
    sum.loss_sum += static_cast<double>(std::log(total) - (z[label] - zmax));
    sum.count += 1;
    if (d != nullptr) {
      for (int j = 0; j < classes; ++j) d[j] = e[j] * inv_total * grad_scale;
      d[label] -= grad_scale;
    }
  }
  return sum;
}

}  // namespace spmd::models::cnn_cpu
