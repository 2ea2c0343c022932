// One CNN ensemble member on a GPU (models/device_models.hpp's CnnMember): parameters,
// momentum, gradients and every activation stay in GPU memory; a step moves only the batch
// in and the probabilities and loss out. Same network and arithmetic as the CPU path
// (cnn_cpu.cpp); results agree to float rounding, not bitwise (cuBLAS sums in its own
// order), except the SGD update, which rounds exactly as optim::sgd_momentum_step.
//
// Layout: NHWC activations, rows of a batch back to back. Both convolutions are im2col +
// one GEMM over the whole batch (col [pixels, 9 * Cin] times the HWIO kernel viewed as
// [9 * Cin, Cout], exactly the parameter layout); the backward pass mirrors that:
//   dW = col^T da,  dcol = da W^T,  d_in = col2im(dcol) (a gather: no atomics),
// and bias gradients are column sums with a fixed reduction tree. Nothing depends on
// timing, so a step gives the same bits run after run on the same GPU model.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "spmd/models/cnn_params.hpp"
#include "spmd/models/device_models.hpp"
#include "spmd/backends/cuda/check.hpp"
#include "spmd/runtime/error.hpp"
#include "spmd/backends/cuda/cuda_device.hpp"
#include "spmd/backends/cuda/device_buffer.hpp"
#include "spmd/backends/cuda/gemm.hpp"
#include "spmd/backends/cuda/launch.hpp"
#include "spmd/backends/cuda/stream.hpp"

namespace spmd::models {

namespace {

using namespace cnn;
using tensor::blocks_for;
using tensor::kThreadsPerBlock;
using tensor::RowMajorGemm;

constexpr int kConv1Pixels = kImageSide * kImageSide;  // 784 per image
constexpr int kConv2Pixels = kPool1Side * kPool1Side;  // 196 per image
constexpr int kConv1K = 9;                             // 3x3 taps x 1 input channel
constexpr int kConv2K = 9 * kConv1Channels;            // 288
// Rows per forward pass when forward() gets a larger batch: bounds the activation memory
// of eval members (~200 MiB at 512 rows) whatever max_batch is.
constexpr int kForwardTileRows = 512;
// Keeps every GEMM dimension (rows * 784 at most) inside cuBLAS's int.
constexpr int kMaxRowsPerPass = 1 << 20;

__device__ inline std::int64_t grid_start() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline std::int64_t grid_stride() { return static_cast<std::int64_t>(gridDim.x) * blockDim.x; }

// im2col for a 3x3 SAME convolution: in [n, h, w, c] (NHWC, no border) ->
// col [n*h*w, 9*c], col[(b*h + y)*w + x][(dy*3 + dx)*c + ch] = in[b, y+dy-1, x+dx-1, ch],
// 0 outside the image.
__global__ void im2col3x3_kernel(const float* in, std::int64_t n, int h, int w, int c, float* col) {
  const std::int64_t total = n * h * w * 9 * c;
  for (std::int64_t i = grid_start(); i < total; i += grid_stride()) {
    const int ch = static_cast<int>(i % c);
    const std::int64_t t = i / c;
    const int tap = static_cast<int>(t % 9);
    const std::int64_t pixel = t / 9;
    const int x = static_cast<int>(pixel % w);
    const std::int64_t q = pixel / w;
    const int y = static_cast<int>(q % h);
    const std::int64_t b = q / h;
    const int yy = y + tap / 3 - 1, xx = x + tap % 3 - 1;
    col[i] = (yy >= 0 && yy < h && xx >= 0 && xx < w) ? in[((b * h + yy) * w + xx) * c + ch] : 0.0f;
  }
}

// The adjoint of im2col3x3_kernel as a gather (each output written by one thread):
// d_in[b, yy, xx, ch] = sum over taps (dy, dx) whose output pixel (yy-dy+1, xx-dx+1) is
// inside the image of dcol[that pixel][(dy*3 + dx)*c + ch].
__global__ void col2im3x3_kernel(const float* dcol, std::int64_t n, int h, int w, int c, float* d_in) {
  const std::int64_t total = n * h * w * c;
  for (std::int64_t i = grid_start(); i < total; i += grid_stride()) {
    const int ch = static_cast<int>(i % c);
    const std::int64_t pixel = i / c;
    const int xx = static_cast<int>(pixel % w);
    const std::int64_t q = pixel / w;
    const int yy = static_cast<int>(q % h);
    const std::int64_t b = q / h;
    float s = 0.0f;
    for (int dy = 0; dy < 3; ++dy) {
      const int y = yy - dy + 1;
      if (y < 0 || y >= h) continue;
      for (int dx = 0; dx < 3; ++dx) {
        const int x = xx - dx + 1;
        if (x < 0 || x >= w) continue;
        s += dcol[((b * h + y) * w + x) * 9 * c + (dy * 3 + dx) * c + ch];
      }
    }
    d_in[i] = s;
  }
}

// x [rows, cols] += bias [cols], then ReLU when relu.
__global__ void add_bias_kernel(float* x, std::int64_t rows, int cols, const float* bias, bool relu) {
  const std::int64_t total = rows * cols;
  for (std::int64_t i = grid_start(); i < total; i += grid_stride()) {
    const float v = x[i] + bias[i % cols];
    x[i] = relu ? (v > 0.0f ? v : 0.0f) : v;
  }
}

// 2x2 average pooling, stride 2: in [n, h, w, c] -> out [n, h/2, w/2, c], summed in the CPU
// kernel's order.
__global__ void avg_pool2x2_kernel(const float* in, std::int64_t n, int h, int w, int c, float* out) {
  const int ho = h / 2, wo = w / 2;
  const std::int64_t total = n * ho * wo * c;
  for (std::int64_t i = grid_start(); i < total; i += grid_stride()) {
    const int ch = static_cast<int>(i % c);
    const std::int64_t pixel = i / c;
    const int px = static_cast<int>(pixel % wo);
    const std::int64_t q = pixel / wo;
    const int py = static_cast<int>(q % ho);
    const std::int64_t b = q / ho;
    const float* a = in + ((b * h + 2 * py) * w + 2 * px) * c + ch;
    const float* below = a + static_cast<std::int64_t>(w) * c;
    out[i] = 0.25f * ((a[0] + a[c]) + (below[0] + below[c]));
  }
}

// Backward of ReLU then 2x2 average pooling: dpre [n, h, w, c] = (act > 0) * dpooled[b,
// y/2, x/2, ch] / 4, with act the post-ReLU activation [n, h, w, c].
__global__ void avg_pool2x2_relu_backward_kernel(const float* act, const float* dpooled, std::int64_t n, int h, int w,
                                                 int c, float* dpre) {
  const std::int64_t total = n * h * w * c;
  for (std::int64_t i = grid_start(); i < total; i += grid_stride()) {
    const int ch = static_cast<int>(i % c);
    const std::int64_t pixel = i / c;
    const int x = static_cast<int>(pixel % w);
    const std::int64_t q = pixel / w;
    const int y = static_cast<int>(q % h);
    const std::int64_t b = q / h;
    const float g = dpooled[((b * (h / 2) + y / 2) * (w / 2) + x / 2) * c + ch];
    dpre[i] = act[i] > 0.0f ? 0.25f * g : 0.0f;
  }
}

// d [n] <- 0 where the post-ReLU activation act [n] is not positive.
__global__ void relu_mask_kernel(float* d, const float* act, std::int64_t n) {
  for (std::int64_t i = grid_start(); i < n; i += grid_stride())
    if (!(act[i] > 0.0f)) d[i] = 0.0f;
}

// sums[j] = sum over rows of x[r * cols + j]: one block per column (grid stride over
// columns), a fixed tree over the block's threads (blockDim.x == kThreadsPerBlock).
__global__ void column_sums_kernel(const float* x, std::int64_t rows, int cols, float* sums) {
  __shared__ float partial[kThreadsPerBlock];
  for (int j = blockIdx.x; j < cols; j += gridDim.x) {
    float s = 0.0f;
    for (std::int64_t r = threadIdx.x; r < rows; r += blockDim.x) s += x[r * cols + j];
    partial[threadIdx.x] = s;
    __syncthreads();
    for (unsigned width = blockDim.x / 2; width > 0; width /= 2) {
      if (threadIdx.x < width) partial[threadIdx.x] += partial[threadIdx.x + width];
      __syncthreads();
    }
    if (threadIdx.x == 0) sums[j] = partial[0];
    __syncthreads();  // partial[0] is read before the next column overwrites the array
  }
}

// *out = sum of x [n] in double (a single block, fixed tree).
__global__ void sum_kernel(const double* x, std::int64_t n, double* out) {
  __shared__ double partial[kThreadsPerBlock];
  double s = 0.0;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) s += x[i];
  partial[threadIdx.x] = s;
  __syncthreads();
  for (unsigned width = blockDim.x / 2; width > 0; width /= 2) {
    if (threadIdx.x < width) partial[threadIdx.x] += partial[threadIdx.x + width];
    __syncthreads();
  }
  if (threadIdx.x == 0) *out = partial[0];
}

// Per row of logits [rows, 10]: probs = softmax (every row). With labels: row_loss[r] =
// logsumexp - z[label] (double) and dlogits = (probs - onehot) * scale, as
// cnn_cpu::softmax_cross_entropy. Labels were checked on the host.
__global__ void softmax_cross_entropy_kernel(const float* logits, const std::int32_t* labels, std::int64_t rows,
                                             float scale, float* probs, double* row_loss, float* dlogits) {
  for (std::int64_t r = grid_start(); r < rows; r += grid_stride()) {
    const float* z = logits + r * kClasses;
    float zmax = z[0];
    for (int j = 1; j < kClasses; ++j) zmax = fmaxf(zmax, z[j]);
    float e[kClasses];
    float total = 0.0f;
    for (int j = 0; j < kClasses; ++j) {
      e[j] = expf(z[j] - zmax);
      total += e[j];
    }
    const float inv_total = 1.0f / total;
    for (int j = 0; j < kClasses; ++j) probs[r * kClasses + j] = e[j] * inv_total;
    if (labels == nullptr) continue;
    const std::int32_t label = labels[r];
    row_loss[r] = static_cast<double>(logf(total) - (z[label] - zmax));
    for (int j = 0; j < kClasses; ++j) dlogits[r * kClasses + j] = e[j] * inv_total * scale;
    dlogits[r * kClasses + label] -= scale;
  }
}

// optax.sgd with momentum, rounded step by step as optim::sgd_momentum_step (the host
// build does not contract to fused multiply-adds): trace = m * trace + g; w -= lr * trace.
__global__ void sgd_momentum_kernel(float* w, float* trace, const float* g, std::int64_t n, float lr, float m) {
  for (std::int64_t i = grid_start(); i < n; i += grid_stride()) {
    const float t = __fadd_rn(__fmul_rn(m, trace[i]), g[i]);
    trace[i] = t;
    w[i] = __fsub_rn(w[i], __fmul_rn(lr, t));
  }
}

void check_batch(int batch, int limit, const char* what, const char* limit_name) {
  if (batch < 0 || batch > limit)
    throw Error(std::string(what) + ": batch of " + std::to_string(batch) + " rows; the member was made for " +
                limit_name + " = " + std::to_string(limit) + " (0 <= batch <= " + limit_name + ")");
}

class CudaCnnMember final : public CnnMember {
 public:
  CudaCnnMember(const runtime::DeviceInfo& device, int max_batch, int max_train_batch)
      : ordinal_((tensor::use_cuda_device(device, "CUDA CNN member"), device.ordinal)),
        max_batch_(max_batch),
        max_train_batch_(max_train_batch),
        rows_per_pass_(std::max({1, max_train_batch, std::min(max_batch, kForwardTileRows)})),
        cublas_(stream_.get()),
        params_(kCnnParamCount, "CNN parameters"),
        trace_(kCnnParamCount, "CNN momentum trace"),
        grad_(max_train_batch > 0 ? kCnnParamCount : 0, "CNN gradient"),
        x_(rows(kConv1Pixels), "CNN input images"),
        labels_(rows(1), "CNN labels"),
        col1_(rows(kConv1Pixels * kConv1K), "CNN conv1 im2col"),
        a1_(rows(kConv1Pixels * kConv1Channels), "CNN conv1 activations"),
        p1_(rows(kConv2Pixels * kConv1Channels), "CNN pool1 activations"),
        col2_(rows(kConv2Pixels * kConv2K), "CNN conv2 im2col (and its gradient)"),
        a2_(rows(kConv2Pixels * kConv2Channels), "CNN conv2 activations"),
        p2_(rows(kFlatFeatures), "CNN pool2 activations"),
        h_(rows(kHidden), "CNN hidden activations"),
        logits_(rows(kClasses), "CNN logits"),
        probs_(rows(kClasses), "CNN probabilities"),
        row_loss_(rows(1), "CNN per-row losses"),
        loss_sum_(1, "CNN loss sum"),
        dlogits_(train_rows(kClasses), "CNN logits gradient"),
        dh_(train_rows(kHidden), "CNN hidden gradient"),
        dp2_(train_rows(kFlatFeatures), "CNN pool2 gradient"),
        da2_(train_rows(kConv2Pixels * kConv2Channels), "CNN conv2 gradient"),
        dp1_(train_rows(kConv2Pixels * kConv1Channels), "CNN pool1 gradient"),
        da1_(train_rows(kConv1Pixels * kConv1Channels), "CNN conv1 gradient"),
        images_host_(rows(kConv1Pixels), "CNN batch staging"),
        labels_host_(rows(1), "CNN label staging"),
        probs_host_(rows(kClasses), "CNN probability staging"),
        loss_host_(1, "CNN loss staging") {
    // Zero state until set_state: a member is never used uninitialised by accident.
    params_.zero(stream_.get());
    trace_.zero(stream_.get());
    stream_.synchronize("initialising the CNN member's state on the GPU");
  }

  ~CudaCnnMember() override { tensor::set_current_gpu_noexcept(ordinal_); }

  void set_state(const CnnParams& params, const CnnParams& momentum) override {
    tensor::set_current_gpu(ordinal_);
    params_.upload(params.data(), kCnnParamCount, stream_.get());
    trace_.upload(momentum.data(), kCnnParamCount, stream_.get());
    stream_.synchronize("copying the CNN member's parameters and momentum to the GPU");
  }

  void get_state(CnnParams& params, CnnParams& momentum) const override {
    tensor::set_current_gpu(ordinal_);
    params_.download(params.data(), kCnnParamCount, stream_.get());
    trace_.download(momentum.data(), kCnnParamCount, stream_.get());
    stream_.synchronize("copying the CNN member's parameters and momentum from the GPU");
  }

  float train_step(const float* images, const std::int32_t* labels, int batch, const optim::SgdMomentum& sgd,
                   float* probs_out) override {
    if (max_train_batch_ == 0)
      throw Error("CUDA CNN train step: this member was made for forward passes only (max_train_batch = 0)");
    check_batch(batch, max_train_batch_, "CUDA CNN train step", "max_train_batch");
    if (batch > 0 && labels == nullptr) throw Error("CUDA CNN train step: labels are required");
    for (int r = 0; r < batch; ++r)
      if (labels[r] < 0 || labels[r] >= kClasses)
        throw Error("CNN loss: label " + std::to_string(labels[r]) + " of batch row " + std::to_string(r) +
                    " is outside [0, " + std::to_string(kClasses) + ")");
    tensor::set_current_gpu(ordinal_);
    const cudaStream_t s = stream_.get();
    float mean_loss = 0.0f;
    if (batch == 0) {
      // As on the CPU: no rows, zero loss and gradient; the momentum still decays.
      grad_.zero(s);
    } else {
      upload_batch(images, labels, batch);
      forward_pass(batch);
      softmax(batch, true, 1.0f / static_cast<float>(batch));
      sum_kernel<<<1, kThreadsPerBlock, 0, s>>>(row_loss_.data(), batch, loss_sum_.data());
      SPMD_CHECK_CUDA_LAUNCH("CNN loss sum kernel");
      // Queued now, overlapping the backward pass; read after the final synchronize.
      probs_.download(probs_host_.data(), static_cast<std::size_t>(batch) * kClasses, s);
      loss_sum_.download(loss_host_.data(), 1, s);
      backward_pass(batch);
    }
    sgd_momentum_kernel<<<blocks_for(kCnnParamCount), kThreadsPerBlock, 0, s>>>(
        params_.data(), trace_.data(), grad_.data(), static_cast<std::int64_t>(kCnnParamCount), sgd.learning_rate,
        sgd.momentum);
    SPMD_CHECK_CUDA_LAUNCH("CNN SGD momentum kernel");
    stream_.synchronize("running a CNN training step on the GPU");
    if (batch > 0) {
      if (probs_out != nullptr)
        std::memcpy(probs_out, probs_host_.data(), static_cast<std::size_t>(batch) * kClasses * sizeof(float));
      mean_loss = static_cast<float>(loss_host_.data()[0] / static_cast<double>(batch));
    }
    return mean_loss;
  }

  void forward(const float* images, int batch, float* probs_out) override {
    check_batch(batch, max_batch_, "CUDA CNN forward", "max_batch");
    if (batch == 0) return;
    tensor::set_current_gpu(ordinal_);
    for (int first = 0; first < batch; first += rows_per_pass_) {
      const int n = std::min(rows_per_pass_, batch - first);
      upload_batch(images + static_cast<std::int64_t>(first) * kConv1Pixels, nullptr, n);
      forward_pass(n);
      softmax(n, false, 0.0f);
      probs_.download(probs_host_.data(), static_cast<std::size_t>(n) * kClasses, stream_.get());
      // Also frees the staging buffers for the next pass.
      stream_.synchronize("running the CNN forward pass on the GPU");
      if (probs_out != nullptr)
        std::memcpy(probs_out + static_cast<std::int64_t>(first) * kClasses, probs_host_.data(),
                    static_cast<std::size_t>(n) * kClasses * sizeof(float));
    }
  }

 private:
  std::size_t rows(std::size_t per_row) const { return static_cast<std::size_t>(rows_per_pass_) * per_row; }
  std::size_t train_rows(std::size_t per_row) const { return static_cast<std::size_t>(max_train_batch_) * per_row; }

  float* param(CnnTensor t) { return params_.data() + cnn_tensor_info(t).offset; }
  float* grad(CnnTensor t) { return grad_.data() + cnn_tensor_info(t).offset; }

  void gemm(const RowMajorGemm& g, const float* A, const float* B, float* C, const char* what) {
    tensor::sgemm_row_major(cublas_.get(), g, 1.0f, A, B, 0.0f, C, what);
  }

  // Host batch -> pinned staging -> GPU (x_, and labels_ when labels != nullptr).
  // Precondition: the stream has finished with the staging buffers.
  void upload_batch(const float* images, const std::int32_t* labels, int n) {
    const std::size_t pixels = static_cast<std::size_t>(n) * kConv1Pixels;
    std::memcpy(images_host_.data(), images, pixels * sizeof(float));
    x_.upload(images_host_.data(), pixels, stream_.get());
    if (labels != nullptr) {
      std::memcpy(labels_host_.data(), labels, static_cast<std::size_t>(n) * sizeof(std::int32_t));
      labels_.upload(labels_host_.data(), static_cast<std::size_t>(n), stream_.get());
    }
  }

  // x_ [n, 28, 28, 1] -> logits_ [n, 10], keeping every activation for the backward pass.
  void forward_pass(int n) {
    const cudaStream_t s = stream_.get();
    const std::int64_t n1 = static_cast<std::int64_t>(n) * kConv1Pixels, n2 = static_cast<std::int64_t>(n) * kConv2Pixels;
    im2col3x3_kernel<<<blocks_for(n1 * kConv1K), kThreadsPerBlock, 0, s>>>(x_.data(), n, kImageSide, kImageSide, 1,
                                                                          col1_.data());
    SPMD_CHECK_CUDA_LAUNCH("CNN conv1 im2col kernel");
    gemm({false, false, n1, kConv1Channels, kConv1K, kConv1K, kConv1Channels, kConv1Channels}, col1_.data(),
         param(CnnTensor::Conv1Kernel), a1_.data(), "CNN conv1 forward GEMM");
    bias(a1_.data(), n1, kConv1Channels, param(CnnTensor::Conv1Bias), true);
    avg_pool2x2_kernel<<<blocks_for(n2 * kConv1Channels), kThreadsPerBlock, 0, s>>>(a1_.data(), n, kImageSide,
                                                                                   kImageSide, kConv1Channels,
                                                                                   p1_.data());
    SPMD_CHECK_CUDA_LAUNCH("CNN pool1 kernel");
    im2col3x3_kernel<<<blocks_for(n2 * kConv2K), kThreadsPerBlock, 0, s>>>(p1_.data(), n, kPool1Side, kPool1Side,
                                                                          kConv1Channels, col2_.data());
    SPMD_CHECK_CUDA_LAUNCH("CNN conv2 im2col kernel");
    gemm({false, false, n2, kConv2Channels, kConv2K, kConv2K, kConv2Channels, kConv2Channels}, col2_.data(),
         param(CnnTensor::Conv2Kernel), a2_.data(), "CNN conv2 forward GEMM");
    bias(a2_.data(), n2, kConv2Channels, param(CnnTensor::Conv2Bias), true);
    avg_pool2x2_kernel<<<blocks_for(static_cast<std::int64_t>(n) * kFlatFeatures), kThreadsPerBlock, 0, s>>>(
        a2_.data(), n, kPool1Side, kPool1Side, kConv2Channels, p2_.data());
    SPMD_CHECK_CUDA_LAUNCH("CNN pool2 kernel");
    gemm({false, false, n, kHidden, kFlatFeatures, kFlatFeatures, kHidden, kHidden}, p2_.data(),
         param(CnnTensor::Dense1Kernel), h_.data(), "CNN dense1 forward GEMM");
    bias(h_.data(), n, kHidden, param(CnnTensor::Dense1Bias), true);
    gemm({false, false, n, kClasses, kHidden, kHidden, kClasses, kClasses}, h_.data(), param(CnnTensor::Dense2Kernel),
         logits_.data(), "CNN dense2 forward GEMM");
    bias(logits_.data(), n, kClasses, param(CnnTensor::Dense2Bias), false);
  }

  void bias(float* x, std::int64_t num_rows, int cols, const float* b, bool relu) {
    add_bias_kernel<<<blocks_for(num_rows * cols), kThreadsPerBlock, 0, stream_.get()>>>(x, num_rows, cols, b, relu);
    SPMD_CHECK_CUDA_LAUNCH("CNN bias kernel");
  }

  // probs_ from logits_; with_labels: also row_loss_ and dlogits_ (scaled by grad_scale).
  void softmax(int n, bool with_labels, float grad_scale) {
    softmax_cross_entropy_kernel<<<blocks_for(n), kThreadsPerBlock, 0, stream_.get()>>>(
        logits_.data(), with_labels ? labels_.data() : nullptr, n, grad_scale, probs_.data(),
        with_labels ? row_loss_.data() : nullptr, with_labels ? dlogits_.data() : nullptr);
    SPMD_CHECK_CUDA_LAUNCH("CNN softmax cross-entropy kernel");
  }

  void column_sums(const float* x, std::int64_t num_rows, int cols, float* sums) {
    column_sums_kernel<<<static_cast<unsigned>(cols), kThreadsPerBlock, 0, stream_.get()>>>(x, num_rows, cols, sums);
    SPMD_CHECK_CUDA_LAUNCH("CNN bias gradient kernel");
  }

  // The whole gradient into grad_ (every tensor overwritten), from dlogits_ and the
  // activations of forward_pass(n) on the same batch.
  void backward_pass(int n) {
    const cudaStream_t s = stream_.get();
    const std::int64_t n1 = static_cast<std::int64_t>(n) * kConv1Pixels, n2 = static_cast<std::int64_t>(n) * kConv2Pixels;
    // Dense2: dW = h^T dlogits, db = column sums, dh = dlogits W^T masked by ReLU(h).
    gemm({true, false, kHidden, kClasses, n, kHidden, kClasses, kClasses}, h_.data(), dlogits_.data(),
         grad(CnnTensor::Dense2Kernel), "CNN dense2 weight gradient GEMM");
    column_sums(dlogits_.data(), n, kClasses, grad(CnnTensor::Dense2Bias));
    gemm({false, true, n, kHidden, kClasses, kClasses, kClasses, kHidden}, dlogits_.data(),
         param(CnnTensor::Dense2Kernel), dh_.data(), "CNN dense2 input gradient GEMM");
    relu_mask_kernel<<<blocks_for(static_cast<std::int64_t>(n) * kHidden), kThreadsPerBlock, 0, s>>>(
        dh_.data(), h_.data(), static_cast<std::int64_t>(n) * kHidden);
    SPMD_CHECK_CUDA_LAUNCH("CNN dense1 ReLU mask kernel");
    // Dense1: dW = p2^T dh, db = column sums, dp2 = dh W^T.
    column_sums(dh_.data(), n, kHidden, grad(CnnTensor::Dense1Bias));
    gemm({true, false, kFlatFeatures, kHidden, n, kFlatFeatures, kHidden, kHidden}, p2_.data(), dh_.data(),
         grad(CnnTensor::Dense1Kernel), "CNN dense1 weight gradient GEMM");
    gemm({false, true, n, kFlatFeatures, kHidden, kHidden, kHidden, kFlatFeatures}, dh_.data(),
         param(CnnTensor::Dense1Kernel), dp2_.data(), "CNN dense1 input gradient GEMM");
    // Pool2 + ReLU, then conv2: dW = col2^T da2, db = column sums, dcol2 = da2 W^T (into
    // col2_, whose forward contents the weight GEMM has consumed: same stream), dp1 =
    // col2im(dcol2).
    avg_pool2x2_relu_backward_kernel<<<blocks_for(n2 * kConv2Channels), kThreadsPerBlock, 0, s>>>(
        a2_.data(), dp2_.data(), n, kPool1Side, kPool1Side, kConv2Channels, da2_.data());
    SPMD_CHECK_CUDA_LAUNCH("CNN pool2 backward kernel");
    column_sums(da2_.data(), n2, kConv2Channels, grad(CnnTensor::Conv2Bias));
    gemm({true, false, kConv2K, kConv2Channels, n2, kConv2K, kConv2Channels, kConv2Channels}, col2_.data(),
         da2_.data(), grad(CnnTensor::Conv2Kernel), "CNN conv2 weight gradient GEMM");
    gemm({false, true, n2, kConv2K, kConv2Channels, kConv2Channels, kConv2Channels, kConv2K}, da2_.data(),
         param(CnnTensor::Conv2Kernel), col2_.data(), "CNN conv2 input gradient GEMM");
    col2im3x3_kernel<<<blocks_for(n2 * kConv1Channels), kThreadsPerBlock, 0, s>>>(col2_.data(), n, kPool1Side,
                                                                                 kPool1Side, kConv1Channels,
                                                                                 dp1_.data());
    SPMD_CHECK_CUDA_LAUNCH("CNN conv2 col2im kernel");
    // Pool1 + ReLU, then conv1's weights and bias (its input needs no gradient).
    avg_pool2x2_relu_backward_kernel<<<blocks_for(n1 * kConv1Channels), kThreadsPerBlock, 0, s>>>(
        a1_.data(), dp1_.data(), n, kImageSide, kImageSide, kConv1Channels, da1_.data());
    SPMD_CHECK_CUDA_LAUNCH("CNN pool1 backward kernel");
    column_sums(da1_.data(), n1, kConv1Channels, grad(CnnTensor::Conv1Bias));
    gemm({true, false, kConv1K, kConv1Channels, n1, kConv1K, kConv1Channels, kConv1Channels}, col1_.data(),
         da1_.data(), grad(CnnTensor::Conv1Kernel), "CNN conv1 weight gradient GEMM");
  }

  int ordinal_;
  int max_batch_, max_train_batch_;
  int rows_per_pass_;  // activation buffers' rows: max_train_batch, or a forward tile
  tensor::Stream stream_;
  tensor::CublasHandle cublas_;
  // State, flat in CnnParams layout (cnn_tensor_table offsets).
  tensor::DeviceBuffer<float> params_, trace_;
  tensor::DeviceBuffer<float> grad_;  // training members only
  // Forward, [rows_per_pass, ...] each.
  tensor::DeviceBuffer<float> x_;                // [., 28, 28, 1]
  tensor::DeviceBuffer<std::int32_t> labels_;    // [.]
  tensor::DeviceBuffer<float> col1_;             // [. * 784, 9]
  tensor::DeviceBuffer<float> a1_;               // [., 28, 28, 32] post-ReLU
  tensor::DeviceBuffer<float> p1_;               // [., 14, 14, 32]
  tensor::DeviceBuffer<float> col2_;             // [. * 196, 288]; conv2's input gradient in backward
  tensor::DeviceBuffer<float> a2_;               // [., 14, 14, 64] post-ReLU
  tensor::DeviceBuffer<float> p2_;               // [., 3136]
  tensor::DeviceBuffer<float> h_;                // [., 256] post-ReLU
  tensor::DeviceBuffer<float> logits_;           // [., 10]
  tensor::DeviceBuffer<float> probs_;            // [., 10]
  tensor::DeviceBuffer<double> row_loss_;        // [.]
  tensor::DeviceBuffer<double> loss_sum_;        // [1]
  // Backward, [max_train_batch, ...] each.
  tensor::DeviceBuffer<float> dlogits_, dh_, dp2_, da2_, dp1_, da1_;
  // Host staging (page-locked) of a pass's inputs and outputs.
  tensor::PinnedBuffer<float> images_host_;
  tensor::PinnedBuffer<std::int32_t> labels_host_;
  tensor::PinnedBuffer<float> probs_host_;
  tensor::PinnedBuffer<double> loss_host_;
};

}  // namespace

std::unique_ptr<CnnMember> make_cnn_member_cuda(const runtime::DeviceInfo& device, int max_batch, int max_train_batch) {
  if (max_batch < 0 || max_train_batch < 0 || max_train_batch > max_batch)
    throw Error("CUDA CNN member: need 0 <= max_train_batch <= max_batch, got max_batch=" + std::to_string(max_batch) +
                " max_train_batch=" + std::to_string(max_train_batch));
  if (max_train_batch > kMaxRowsPerPass)
    throw Error("CUDA CNN member: max_train_batch = " + std::to_string(max_train_batch) + " is above the " +
                std::to_string(kMaxRowsPerPass) + " rows one pass supports");
  return std::make_unique<CudaCnnMember>(device, max_batch, max_train_batch);
}

}  // namespace spmd::models
