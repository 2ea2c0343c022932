// One CNN ensemble member on a GPU (models/device_models.hpp's CnnMember): parameters,
// momentum, gradients and every activation stay in GPU memory; a step moves only the batch
// in and the probabilities and loss out. Same network and arithmetic as the CPU path
// (cnn_cpu.cpp); results agree to float rounding, not bitwise (cuBLAS sums in its own
// order), except the SGD update, which rounds exactly as optim::sgd_momentum_step.
//
// The geometry comes from the member's CnnConfig (cnn_config.hpp) at run time: one set of
// buffers per layer, sized from its CnnLayout.
//
// Layout: NHWC activations, rows of a batch back to back. Every convolution is im2col +
// one GEMM over the whole batch (col [pixels, 9 * Cin] times the HWIO kernel viewed as
// [9 * Cin, Cout], exactly the parameter layout); the backward pass mirrors that:
//   dW = col^T da,  dcol = da W^T,  d_in = col2im(dcol) (a gather: no atomics),
// and bias gradients are column sums with a fixed reduction tree. Nothing depends on
// timing, so a step gives the same bits run after run on the same GPU model.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "spmd/models/cnn_params.hpp"
#include "spmd/models/device_models.hpp"
#include "spmd/backends/cuda/byte_stager.hpp"
#include "spmd/backends/cuda/check.hpp"
#include "spmd/runtime/error.hpp"
#include "spmd/runtime/time_account.hpp"
#include "spmd/backends/cuda/cuda_device.hpp"
#include "spmd/backends/cuda/device_buffer.hpp"
#include "spmd/backends/cuda/gemm.hpp"
#include "spmd/backends/cuda/launch.hpp"
#include "spmd/backends/cuda/stream.hpp"

namespace spmd::backends::cuda {

// The device side of the models' interfaces (models/device_models.hpp), on a GPU.
using namespace spmd::models;

namespace {

using cuda::blocks_for;
using cuda::kThreadsPerBlock;
using cuda::RowMajorGemm;

// Forward passes over more rows than this run in tiles: bounds the activation memory of
// eval members (~230 MiB at 512 rows of the default geometry) whatever max_batch is; a
// larger geometry gets fewer rows per tile (kForwardTileBytes).
constexpr int kForwardTileRows = 512;
constexpr std::int64_t kForwardTileBytes = std::int64_t{256} << 20;
// Caps the rows of one pass so that every GEMM dimension (rows * H * W at most) fits
// cuBLAS's int.
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

// 2x2 average pooling, stride 2: in [n, h, w, c] -> out [n, h/2, w/2, c] (rounded down:
// an odd last row or column is dropped, as Flax's VALID avg_pool), summed in the CPU
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
// y/2, x/2, ch] / 4, with act the post-ReLU activation [n, h, w, c]; 0 in an odd last row
// or column, which the pooling dropped.
__global__ void avg_pool2x2_relu_backward_kernel(const float* act, const float* dpooled, std::int64_t n, int h, int w,
                                                 int c, float* dpre) {
  const std::int64_t total = n * h * w * c;
  const int ho = h / 2, wo = w / 2;
  for (std::int64_t i = grid_start(); i < total; i += grid_stride()) {
    const int ch = static_cast<int>(i % c);
    const std::int64_t pixel = i / c;
    const int x = static_cast<int>(pixel % w);
    const std::int64_t q = pixel / w;
    const int y = static_cast<int>(q % h);
    const std::int64_t b = q / h;
    if (y >= 2 * ho || x >= 2 * wo) {
      dpre[i] = 0.0f;
      continue;
    }
    const float g = dpooled[((b * ho + y / 2) * wo + x / 2) * c + ch];
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

// Per row of logits [rows, classes]: probs = softmax (every row). With labels: row_loss[r]
// = logsumexp - z[label] (double) and dlogits = (probs - onehot) * scale, as
// cnn_cpu::softmax_cross_entropy. Labels were checked on the host. exp() is evaluated twice
// per logit instead of kept: no per-thread array whose size would depend on `classes`.
__global__ void softmax_cross_entropy_kernel(const float* logits, const std::int32_t* labels, std::int64_t rows,
                                             int classes, float scale, float* probs, double* row_loss,
                                             float* dlogits) {
  for (std::int64_t r = grid_start(); r < rows; r += grid_stride()) {
    const float* z = logits + r * classes;
    float zmax = z[0];
    for (int j = 1; j < classes; ++j) zmax = fmaxf(zmax, z[j]);
    float total = 0.0f;
    for (int j = 0; j < classes; ++j) total += expf(z[j] - zmax);
    const float inv_total = 1.0f / total;
    for (int j = 0; j < classes; ++j) probs[r * classes + j] = expf(z[j] - zmax) * inv_total;
    if (labels == nullptr) continue;
    const std::int32_t label = labels[r];
    row_loss[r] = static_cast<double>(logf(total) - (z[label] - zmax));
    for (int j = 0; j < classes; ++j) dlogits[r * classes + j] = probs[r * classes + j] * scale;
    dlogits[r * classes + label] -= scale;
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
  CudaCnnMember(const runtime::DeviceInfo& device, std::shared_ptr<const CnnLayout> layout, int max_batch,
                int max_train_batch, int rows_per_pass)
      : ordinal_((cuda::use_cuda_device(device, "CUDA CNN member"), device.ordinal)),
        layout_(std::move(layout)),
        max_batch_(max_batch),
        max_train_batch_(max_train_batch),
        rows_per_pass_(rows_per_pass),
        cublas_(stream_.get()),
        params_(layout_->param_count(), "CNN parameters"),
        trace_(layout_->param_count(), "CNN momentum trace"),
        grad_(max_train_batch > 0 ? layout_->param_count() : 0, "CNN gradient"),
        x_(rows(layout_->input_size()), "CNN input images"),
        labels_(rows(1), "CNN labels"),
        probs_(rows(layout_->classes()), "CNN probabilities"),
        row_loss_(rows(1), "CNN per-row losses"),
        loss_sum_(1, "CNN loss sum"),
        images_host_(rows(layout_->input_size()), "CNN batch staging"),
        labels_host_(rows(1), "CNN label staging"),
        probs_host_(rows(layout_->classes()), "CNN probability staging"),
        loss_host_(1, "CNN loss staging") {
    for (const auto& c : layout_->convs()) {
      col_.emplace_back(rows(c.pixels() * c.patch()), "CNN conv im2col (and its gradient)");
      act_.emplace_back(rows(c.output_size()), "CNN conv activations");
      pool_.emplace_back(rows(c.pooled_size()), "CNN pooled activations");
      dact_.emplace_back(train_rows(c.output_size()), "CNN conv gradient");
      dpool_.emplace_back(train_rows(c.pooled_size()), "CNN pooled gradient");
    }
    for (const auto& d : layout_->denses()) {
      out_.emplace_back(rows(d.out_features), "CNN dense outputs");
      dout_.emplace_back(train_rows(d.out_features), "CNN dense gradients");
    }
    // Zero state until set_state: a member is never used uninitialised by accident. The
    // gradient's gaps between tensors (cnn_params.hpp) are never written: zero them once.
    params_.zero(stream_.get());
    trace_.zero(stream_.get());
    grad_.zero(stream_.get());
    stream_.synchronize("initialising the CNN member's state on the GPU");
  }

  ~CudaCnnMember() override { cuda::set_current_gpu_noexcept(ordinal_); }

  void set_state(const CnnParams& params, const CnnParams& momentum) override {
    require_geometry(params, *layout_, "CUDA CNN member");
    require_geometry(momentum, *layout_, "CUDA CNN member");
    cuda::set_current_gpu(ordinal_);
    params_.upload(params.data(), params_.size(), stream_.get());
    trace_.upload(momentum.data(), trace_.size(), stream_.get());
    stream_.synchronize_copies("copying the CNN member's parameters and momentum to the GPU");
  }

  void get_state(CnnParams& params, CnnParams& momentum) const override {
    require_geometry(params, *layout_, "CUDA CNN member");
    require_geometry(momentum, *layout_, "CUDA CNN member");
    cuda::set_current_gpu(ordinal_);
    params_.download(params.data(), params_.size(), stream_.get());
    trace_.download(momentum.data(), trace_.size(), stream_.get());
    stream_.synchronize_copies("copying the CNN member's parameters and momentum from the GPU");
  }

  float train_step(const float* images, const std::int32_t* labels, int batch, const optim::SgdMomentum& sgd,
                   float* probs_out) override {
    if (max_train_batch_ == 0)
      throw Error("CUDA CNN train step: this member was made for forward passes only (max_train_batch = 0)");
    check_batch(batch, max_train_batch_, "CUDA CNN train step", "max_train_batch");
    if (batch > 0 && labels == nullptr) throw Error("CUDA CNN train step: labels are required");
    const int classes = layout_->classes();
    for (int r = 0; r < batch; ++r)
      if (labels[r] < 0 || labels[r] >= classes)
        throw Error("CNN loss: label " + std::to_string(labels[r]) + " of batch row " + std::to_string(r) +
                    " is outside [0, " + std::to_string(classes) + ")");
    cuda::set_current_gpu(ordinal_);
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
      probs_.download(probs_host_.data(), static_cast<std::size_t>(batch) * classes, s);
      loss_sum_.download(loss_host_.data(), 1, s);
      backward_pass(batch);
    }
    const auto count = static_cast<std::int64_t>(params_.size());
    sgd_momentum_kernel<<<blocks_for(count), kThreadsPerBlock, 0, s>>>(params_.data(), trace_.data(), grad_.data(),
                                                                       count, sgd.learning_rate, sgd.momentum);
    SPMD_CHECK_CUDA_LAUNCH("CNN SGD momentum kernel");
    stream_.synchronize("running a CNN training step on the GPU");
    if (batch > 0) {
      if (probs_out != nullptr)
        std::memcpy(probs_out, probs_host_.data(), static_cast<std::size_t>(batch) * classes * sizeof(float));
      mean_loss = static_cast<float>(loss_host_.data()[0] / static_cast<double>(batch));
    }
    return mean_loss;
  }

  void forward(const float* images, int batch, float* probs_out) override {
    check_batch(batch, max_batch_, "CUDA CNN forward", "max_batch");
    if (batch == 0) return;
    cuda::set_current_gpu(ordinal_);
    const std::int64_t pixels = layout_->input_size();
    for (int first = 0; first < batch; first += rows_per_pass_) {
      const int n = std::min(rows_per_pass_, batch - first);
      upload_batch(images + first * pixels, nullptr, n);
      finish_forward(first, n, probs_out);
    }
  }

  bool decodes_bytes() const override { return true; }

  void forward_bytes(const std::uint8_t* images, int batch, const ByteTable& table, float* probs_out) override {
    check_batch(batch, max_batch_, "CUDA CNN forward", "max_batch");
    if (batch == 0) return;
    cuda::set_current_gpu(ordinal_);
    const std::int64_t pixels = layout_->input_size();
    if (!stager_)  // made at the first byte batch (float images never need it), then reused
      stager_.emplace(static_cast<std::size_t>(rows_per_pass_) * static_cast<std::size_t>(pixels), "CUDA CNN member");
    stager_->run(images, batch, pixels, rows_per_pass_, table, x_.data(), stream_.get(),
                 [&](std::int64_t first, std::int64_t n) {
                   finish_forward(static_cast<int>(first), static_cast<int>(n), probs_out);
                 });
  }

 private:
  std::size_t rows(std::int64_t per_row) const {
    return static_cast<std::size_t>(rows_per_pass_) * static_cast<std::size_t>(per_row);
  }
  std::size_t train_rows(std::int64_t per_row) const {
    return static_cast<std::size_t>(max_train_batch_) * static_cast<std::size_t>(per_row);
  }

  float* param(std::size_t tensor) { return params_.data() + layout_->tensors()[tensor].offset; }
  float* grad(std::size_t tensor) { return grad_.data() + layout_->tensors()[tensor].offset; }

  void gemm(const RowMajorGemm& g, const float* A, const float* B, float* C, const char* what) {
    cuda::sgemm_row_major(cublas_.get(), g, 1.0f, A, B, 0.0f, C, what);
  }

  // Rows [first, first + n) of the batch are in x_ (or queued there on the stream): the
  // forward pass, the softmax, and the probabilities back into probs_out (when not null).
  void finish_forward(int first, int n, float* probs_out) {
    const std::int64_t classes = layout_->classes();
    forward_pass(n);
    softmax(n, false, 0.0f);
    probs_.download(probs_host_.data(), static_cast<std::size_t>(n * classes), stream_.get());
    // Also frees the staging buffers for the next pass.
    stream_.synchronize("running the CNN forward pass on the GPU");
    if (probs_out != nullptr)
      std::memcpy(probs_out + first * classes, probs_host_.data(), static_cast<std::size_t>(n * classes) * sizeof(float));
  }

  // Host batch -> pinned staging -> GPU (x_, and labels_ when labels != nullptr).
  // Precondition: the stream has finished with the staging buffers.
  void upload_batch(const float* images, const std::int32_t* labels, int n) {
    runtime::DeviceTransferTimer transfer;  // the staging copies too
    const std::size_t pixels = static_cast<std::size_t>(n) * static_cast<std::size_t>(layout_->input_size());
    std::memcpy(images_host_.data(), images, pixels * sizeof(float));
    x_.upload(images_host_.data(), pixels, stream_.get());
    if (labels != nullptr) {
      std::memcpy(labels_host_.data(), labels, static_cast<std::size_t>(n) * sizeof(std::int32_t));
      labels_.upload(labels_host_.data(), static_cast<std::size_t>(n), stream_.get());
    }
  }

  // x_ [n, H, W, C] -> out_.back() (logits) [n, classes], keeping every activation for the
  // backward pass.
  void forward_pass(int n) {
    const cudaStream_t s = stream_.get();
    const float* in = x_.data();
    for (std::size_t l = 0; l < layout_->convs().size(); ++l) {
      const auto& c = layout_->convs()[l];
      const std::int64_t pix = n * c.pixels();
      im2col3x3_kernel<<<blocks_for(pix * c.patch()), kThreadsPerBlock, 0, s>>>(in, n, c.height, c.width,
                                                                              c.in_channels, col_[l].data());
      SPMD_CHECK_CUDA_LAUNCH("CNN conv im2col kernel");
      gemm({false, false, pix, c.out_channels, c.patch(), c.patch(), c.out_channels, c.out_channels}, col_[l].data(),
           param(c.kernel), act_[l].data(), "CNN conv forward GEMM");
      bias(act_[l].data(), pix, c.out_channels, param(c.bias), true);
      avg_pool2x2_kernel<<<blocks_for(n * c.pooled_size()), kThreadsPerBlock, 0, s>>>(
          act_[l].data(), n, c.height, c.width, c.out_channels, pool_[l].data());
      SPMD_CHECK_CUDA_LAUNCH("CNN pool kernel");
      in = pool_[l].data();
    }
    for (std::size_t j = 0; j < layout_->denses().size(); ++j) {
      const auto& d = layout_->denses()[j];
      gemm({false, false, n, d.out_features, d.in_features, d.in_features, d.out_features, d.out_features}, in,
           param(d.kernel), out_[j].data(), "CNN dense forward GEMM");
      bias(out_[j].data(), n, d.out_features, param(d.bias), d.relu);
      in = out_[j].data();
    }
  }

  void bias(float* x, std::int64_t num_rows, int cols, const float* b, bool relu) {
    add_bias_kernel<<<blocks_for(num_rows * cols), kThreadsPerBlock, 0, stream_.get()>>>(x, num_rows, cols, b, relu);
    SPMD_CHECK_CUDA_LAUNCH("CNN bias kernel");
  }

  // probs_ from the logits; with_labels: also row_loss_ and the logits' gradient (scaled by
  // grad_scale) into dout_.back().
  void softmax(int n, bool with_labels, float grad_scale) {
    softmax_cross_entropy_kernel<<<blocks_for(n), kThreadsPerBlock, 0, stream_.get()>>>(
        out_.back().data(), with_labels ? labels_.data() : nullptr, n, layout_->classes(), grad_scale, probs_.data(),
        with_labels ? row_loss_.data() : nullptr, with_labels ? dout_.back().data() : nullptr);
    SPMD_CHECK_CUDA_LAUNCH("CNN softmax cross-entropy kernel");
  }

  void column_sums(const float* x, std::int64_t num_rows, int cols, float* sums) {
    column_sums_kernel<<<static_cast<unsigned>(cols), kThreadsPerBlock, 0, stream_.get()>>>(x, num_rows, cols, sums);
    SPMD_CHECK_CUDA_LAUNCH("CNN bias gradient kernel");
  }

  // The whole gradient into grad_ (every tensor overwritten), from the logits' gradient and
  // the activations of forward_pass(n) on the same batch.
  void backward_pass(int n) {
    const cudaStream_t s = stream_.get();
    const auto& convs = layout_->convs();
    const auto& denses = layout_->denses();
    // Dense layers from the classifier back: dW = x^T dz, db = column sums, dx = dz W^T,
    // masked by the ReLU of x for a hidden layer's input.
    for (std::size_t j = denses.size(); j-- > 0;) {
      const auto& d = denses[j];
      const float* x = j > 0 ? out_[j - 1].data() : pool_.back().data();
      const float* dz = dout_[j].data();
      float* dx = j > 0 ? dout_[j - 1].data() : dpool_.back().data();
      gemm({true, false, d.in_features, d.out_features, n, d.in_features, d.out_features, d.out_features}, x, dz,
           grad(d.kernel), "CNN dense weight gradient GEMM");
      column_sums(dz, n, d.out_features, grad(d.bias));
      gemm({false, true, n, d.in_features, d.out_features, d.out_features, d.out_features, d.in_features}, dz,
           param(d.kernel), dx, "CNN dense input gradient GEMM");
      if (j > 0) {
        const std::int64_t count = static_cast<std::int64_t>(n) * d.in_features;
        relu_mask_kernel<<<blocks_for(count), kThreadsPerBlock, 0, s>>>(dx, out_[j - 1].data(), count);
        SPMD_CHECK_CUDA_LAUNCH("CNN dense ReLU mask kernel");
      }
    }
    // Conv layers from the last: pool + ReLU backward, then dW = col^T da, db = column
    // sums, and for all but the first layer dcol = da W^T (into col_, whose forward contents
    // the weight GEMM has consumed: same stream) and d_in = col2im(dcol). The images need
    // no gradient.
    for (std::size_t l = convs.size(); l-- > 0;) {
      const auto& c = convs[l];
      const std::int64_t pix = n * c.pixels();
      avg_pool2x2_relu_backward_kernel<<<blocks_for(pix * c.out_channels), kThreadsPerBlock, 0, s>>>(
          act_[l].data(), dpool_[l].data(), n, c.height, c.width, c.out_channels, dact_[l].data());
      SPMD_CHECK_CUDA_LAUNCH("CNN pool backward kernel");
      column_sums(dact_[l].data(), pix, c.out_channels, grad(c.bias));
      gemm({true, false, c.patch(), c.out_channels, pix, c.patch(), c.out_channels, c.out_channels}, col_[l].data(),
           dact_[l].data(), grad(c.kernel), "CNN conv weight gradient GEMM");
      if (l == 0) continue;
      gemm({false, true, pix, c.patch(), c.out_channels, c.out_channels, c.out_channels, c.patch()}, dact_[l].data(),
           param(c.kernel), col_[l].data(), "CNN conv input gradient GEMM");
      col2im3x3_kernel<<<blocks_for(pix * c.in_channels), kThreadsPerBlock, 0, s>>>(
          col_[l].data(), n, c.height, c.width, c.in_channels, dpool_[l - 1].data());
      SPMD_CHECK_CUDA_LAUNCH("CNN conv col2im kernel");
    }
  }

  int ordinal_;
  std::shared_ptr<const CnnLayout> layout_;
  int max_batch_, max_train_batch_;
  int rows_per_pass_;  // activation buffers' rows: max_train_batch, or a forward tile
  cuda::Stream stream_;
  cuda::CublasHandle cublas_;
  // State, flat in CnnParams layout (CnnLayout::tensors() offsets).
  cuda::DeviceBuffer<float> params_, trace_;
  cuda::DeviceBuffer<float> grad_;  // training members only
  // Forward, [rows_per_pass, ...] each; per conv layer l and dense layer j.
  cuda::DeviceBuffer<float> x_;                // [., H, W, C]
  cuda::DeviceBuffer<std::int32_t> labels_;    // [.]
  std::vector<cuda::DeviceBuffer<float>> col_;   // [. * h * w, 9 * in]; the input gradient's im2col in backward
  std::vector<cuda::DeviceBuffer<float>> act_;   // [., h, w, out] post-ReLU
  std::vector<cuda::DeviceBuffer<float>> pool_;  // [., h/2, w/2, out]; the last: the flattened features
  std::vector<cuda::DeviceBuffer<float>> out_;   // [., out] (post-ReLU for hidden layers); the last: logits
  cuda::DeviceBuffer<float> probs_;            // [., classes]
  cuda::DeviceBuffer<double> row_loss_;        // [.]
  cuda::DeviceBuffer<double> loss_sum_;        // [1]
  // Backward, [max_train_batch, ...] each: gradients w.r.t. act_ (pre-ReLU), pool_, and each
  // dense layer's pre-activation output (the last: the logits).
  std::vector<cuda::DeviceBuffer<float>> dact_, dpool_, dout_;
  // Host staging (page-locked) of a pass's inputs and outputs.
  cuda::PinnedBuffer<float> images_host_;
  cuda::PinnedBuffer<std::int32_t> labels_host_;
  cuda::PinnedBuffer<float> probs_host_;
  cuda::PinnedBuffer<double> loss_host_;
  std::optional<cuda::ByteStager> stager_;  // byte images: tiles of [rows_per_pass, H, W, C] bytes
};

}  // namespace

std::unique_ptr<CnnMember> make_cnn_member_cuda(const runtime::DeviceInfo& device, const CnnConfig& config,
                                                int max_batch, int max_train_batch) {
  auto layout = CnnLayout::make(config);
  if (max_batch < 0 || max_train_batch < 0 || max_train_batch > max_batch)
    throw Error("CUDA CNN member: need 0 <= max_train_batch <= max_batch, got max_batch=" + std::to_string(max_batch) +
                " max_train_batch=" + std::to_string(max_train_batch));
  const auto& first = layout->convs().front();
  const int max_rows = static_cast<int>(
      std::min<std::int64_t>(kMaxRowsPerPass, std::numeric_limits<int>::max() / first.pixels()));
  if (max_train_batch > max_rows)
    throw Error("CUDA CNN member: max_train_batch = " + std::to_string(max_train_batch) + " is above the " +
                std::to_string(max_rows) + " rows one pass supports for " + config.describe());
  // Bytes of one row's forward buffers: input, per conv layer im2col + activation + pooled,
  // dense outputs, probabilities.
  std::int64_t row_bytes = layout->input_size() + 2 * layout->classes();
  for (const auto& c : layout->convs()) row_bytes += c.pixels() * c.patch() + c.output_size() + c.pooled_size();
  for (const auto& d : layout->denses()) row_bytes += d.out_features;
  row_bytes *= static_cast<std::int64_t>(sizeof(float));
  const int tile = static_cast<int>(
      std::clamp<std::int64_t>(kForwardTileBytes / row_bytes, 1, std::min(kForwardTileRows, max_rows)));
  const int rows_per_pass = std::max({1, max_train_batch, std::min(max_batch, tile)});
  return std::make_unique<CudaCnnMember>(device, std::move(layout), max_batch, max_train_batch, rows_per_pass);
}

}  // namespace spmd::backends::cuda
