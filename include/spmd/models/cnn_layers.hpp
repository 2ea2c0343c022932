#pragma once
// The memory-bound kernels of the CPU ops (pooling, im2col, the narrow classifier layer,
// softmax cross-entropy): plain loops the compiler vectorises, shared by every kernel set in
// cnn_kernels.hpp, each defined in the file of the op it serves (src/ops/). Public so that
// tests check each against a scalar reference. All tensors are float32, NHWC / row-major,
// owned by the caller.
// "Padded" frames have a border of one zero pixel on each side: [(H+2), (W+2), C].
#include <cstdint>

namespace spmd::models::cnn_cpu {

// image [h, w, c] -> interior of x_padded [h + 2, w + 2, c]. The border is left untouched:
// the caller keeps it zero.
void pad_image(const float* image, int h, int w, int c, float* x_padded);

// 2x2 average pooling with stride 2 of in [h, w, c] into [h/2, w/2, c] (rounded down: as
// Flax's avg_pool with its default VALID padding, an odd last row or column is dropped),
// written to a frame whose rows are out_row_stride floats apart:
// out[py * out_row_stride + px * c + ch].
void avg_pool2x2(const float* in, int h, int w, int c, float* out, long out_row_stride);

// Backward of ReLU followed by avg_pool2x2: given the post-ReLU activation [h, w, c] and
// the gradient w.r.t. the pooled output (same frame convention as avg_pool2x2), writes
// dpre[y, x, ch] = (activation > 0) * dpooled[y/2, x/2, ch] / 4, the gradient w.r.t. the
// pre-activation; 0 in the odd last row or column that the pooling dropped.
void avg_pool2x2_relu_backward(const float* activation, const float* dpooled, long dpooled_row_stride, int h,
                               int w, int c, float* dpre);

// im2col for a 3x3 SAME convolution: in_padded [(h+2), (w+2), c] ->
// col [h*w, 9*c] with col[y*w + x, (dy*3 + dx)*c + ch] = in_padded[y+dy, x+dx, ch].
void im2col3x3(const float* in_padded, int h, int w, int c, float* col);

// The adjoint of im2col3x3: d_in_padded[y+dy, x+dx, ch] += col[y*w + x, (dy*3+dx)*c + ch].
void col2im3x3_add(const float* col, int h, int w, int c, float* d_in_padded);

// out[r, j] = bias[j] + sum_k in[r, k] * kernel[k, j] for a narrow dense layer
// (in [rows, n_in], kernel [n_in, n_out], out [rows, n_out]).
void dense_forward(const float* in, int rows, int n_in, const float* kernel, const float* bias, int n_out,
                   float* out);

// Backward of dense_forward given dout [rows, n_out]: ACCUMULATES dkernel [n_in, n_out]
// and dbias [n_out]; writes din [rows, n_in] (din may be nullptr) masked by ReLU of the
// input when relu_input_mask: din[r, k] = (in[r, k] > 0) * sum_j dout[r, j] kernel[k, j].
void dense_backward(const float* in, int rows, int n_in, const float* kernel, int n_out, const float* dout,
                    float* dkernel, float* dbias, float* din, bool relu_input_mask);

// dst[c, r] = src[r, c] for r < rows, c < cols; rows are src_stride / dst_stride apart.
void transpose(const float* src, int rows, int cols, long src_stride, float* dst, long dst_stride);

// acc [n] += the sum of the rows of x [rows, n].
void add_row_sums(const float* x, int rows, int n, float* acc);

struct LossSum {
  double loss_sum = 0.0;    // sum over counted rows of -log softmax(logits)[label]
  std::int64_t count = 0;   // rows counted (mask != 0, or all rows without a mask)
};

// Softmax cross-entropy of logits [rows, classes >= 1] against int labels in [0, classes).
// probs (nullable) [rows, classes] receives softmax(logits) for EVERY row (padding too).
// mask (nullable) [rows]: rows with 0 are not counted. labels may be nullptr when only
// probabilities are wanted (count stays 0). When dlogits is non-null it receives
// dloss/dlogits of (loss_sum * grad_scale): (softmax - onehot) * grad_scale for counted
// rows, 0 for the others. Throws spmd::Error when a counted row's label is out of range.
LossSum softmax_cross_entropy(const float* logits, const std::int32_t* labels, const std::uint8_t* mask, int rows,
                              int classes, float* probs, float* dlogits, float grad_scale);

// Number of counted rows: the mask's non-zero entries, or rows without a mask.
std::int64_t count_rows(const std::uint8_t* mask, int rows);

}  // namespace spmd::models::cnn_cpu
