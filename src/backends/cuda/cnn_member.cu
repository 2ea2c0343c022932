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
// timing, so a step gives the same bits run after run on the same GPU model. A training
// step's work is replayed from a CUDA graph once its batch size recurs (step_graph.hpp):
// one launch instead of ~40, the same kernels, the same bits.
#include <algorithm>
#include <bit>
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
#include "spmd/backends/cuda/step_graph.hpp"
#include "spmd/backends/cuda/stream.hpp"
#include "ops/cuda_op.hpp"

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
    const auto& nodes = layout_->nodes();
    for (std::size_t i = 0; i + 1 < nodes.size(); ++i) {
      Stage st{&nodes[i], cuda::make_cuda_op(nodes[i].spec, nodes[i].shape, {rows_per_pass_, i == 0, max_train_batch_}),
               cuda::DeviceBuffer<float>(rows(nodes[i].shape.out.size()), "CNN activations"),
               cuda::DeviceBuffer<float>(train_rows(nodes[i].shape.out.size()), "CNN activation gradients"),
               {}, {}};
      for (std::size_t t : nodes[i].params) {
        st.params.push_back(params_.data() + layout_->tensors()[t].offset);
        st.grads.push_back(grad_.data() + layout_->tensors()[t].offset);
      }
      stages_.push_back(std::move(st));
    }
    loss_ = cuda::make_cuda_loss(nodes.back().spec, nodes.back().shape);
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
    check_train_call(labels, batch);
    cuda::set_current_gpu(ordinal_);
    if (batch > 0) stage_batch(images, labels, batch);
    return run_train_step(batch, sgd, true, probs_out);
  }

  // The bytes cross PCIe (a quarter of the floats' bytes, and a quarter of the host's copy into
  // pinned memory, which precedes the step) and are decoded into x_ on the stream ahead of the
  // step, whose graph then leaves the images where they are.
  float train_step_bytes(const std::uint8_t* images, const std::int32_t* labels, int batch, const ByteTable& table,
                         const optim::SgdMomentum& sgd, float* probs_out) override {
    check_train_call(labels, batch);
    cuda::set_current_gpu(ordinal_);
    if (batch > 0) {
      stage_batch(nullptr, labels, batch);
      byte_stager().run(images, batch, layout_->input_size(), rows_per_pass_, table, x_.data(), stream_.get(),
                        [](std::int64_t, std::int64_t) {});  // one tile: rows_per_pass_ >= max_train_batch
    }
    return run_train_step(batch, sgd, false, probs_out);
  }

  void forward(const float* images, int batch, float* probs_out) override {
    check_batch(batch, max_batch_, "CUDA CNN forward", "max_batch");
    if (batch == 0) return;
    cuda::set_current_gpu(ordinal_);
    const std::int64_t pixels = layout_->input_size();
    for (int first = 0; first < batch; first += rows_per_pass_) {
      const int n = std::min(rows_per_pass_, batch - first);
      upload_batch(images + first * pixels, n);
      finish_forward(first, n, probs_out);
    }
  }

  bool decodes_bytes() const override { return true; }

  void forward_bytes(const std::uint8_t* images, int batch, const ByteTable& table, float* probs_out) override {
    check_batch(batch, max_batch_, "CUDA CNN forward", "max_batch");
    if (batch == 0) return;
    cuda::set_current_gpu(ordinal_);
    const std::int64_t pixels = layout_->input_size();
    byte_stager().run(images, batch, pixels, rows_per_pass_, table, x_.data(), stream_.get(),
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

  cuda::CudaContext context() { return {stream_.get(), cublas_.get()}; }

  // Made at the first byte batch (float images never need it), then reused.
  cuda::ByteStager& byte_stager() {
    if (!stager_)
      stager_.emplace(static_cast<std::size_t>(rows_per_pass_) * static_cast<std::size_t>(layout_->input_size()),
                      "CUDA CNN member");
    return *stager_;
  }

  void check_train_call(const std::int32_t* labels, int batch) const {
    if (max_train_batch_ == 0)
      throw Error("CUDA CNN train step: this member was made for forward passes only (max_train_batch = 0)");
    check_batch(batch, max_train_batch_, "CUDA CNN train step", "max_train_batch");
    if (batch > 0 && labels == nullptr) throw Error("CUDA CNN train step: labels are required");
    const int classes = layout_->classes();
    for (int r = 0; r < batch; ++r)
      if (labels[r] < 0 || labels[r] >= classes)
        throw Error("CNN loss: label " + std::to_string(labels[r]) + " of batch row " + std::to_string(r) +
                    " is outside [0, " + std::to_string(classes) + ")");
  }

  // The step after its batch is staged (host_images: the images in images_host_; otherwise
  // already in x_ on the stream). A graph per (batch, learning rate, momentum, image path).
  float run_train_step(int batch, const optim::SgdMomentum& sgd, bool host_images, float* probs_out) {
    const cudaStream_t s = stream_.get();
    if (batch == 0) {
      // As on the CPU: no rows, zero loss and gradient; the momentum still decays.
      grad_.zero(s);
      enqueue_sgd(sgd);
    } else {
      const cuda::StepGraphs::Key key{static_cast<std::uint64_t>(batch), std::bit_cast<std::uint32_t>(sgd.learning_rate),
                                      std::bit_cast<std::uint32_t>(sgd.momentum), host_images ? 0u : 1u};
      train_graphs_.run(s, key, [&] { enqueue_train_step(batch, sgd, host_images); });
    }
    stream_.synchronize("running a CNN training step on the GPU");
    if (batch == 0) return 0.0f;
    if (probs_out != nullptr)
      std::memcpy(probs_out, probs_host_.data(),
                  static_cast<std::size_t>(batch) * layout_->classes() * sizeof(float));
    return static_cast<float>(loss_host_.data()[0] / static_cast<double>(batch));
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

  // Host batch -> pinned staging (images_host_ when images != nullptr, labels_host_ when
  // labels != nullptr). Precondition: the stream has finished with the staging buffers.
  void stage_batch(const float* images, const std::int32_t* labels, int n) {
    runtime::DeviceTransferTimer transfer;
    if (images != nullptr)
      std::memcpy(images_host_.data(), images, static_cast<std::size_t>(n) * layout_->input_size() * sizeof(float));
    if (labels != nullptr) std::memcpy(labels_host_.data(), labels, static_cast<std::size_t>(n) * sizeof(std::int32_t));
  }

  // Pinned staging -> GPU (x_ when images, labels_ when labels).
  void enqueue_upload(int n, bool images, bool labels) {
    if (images) x_.upload(images_host_.data(), static_cast<std::size_t>(n) * layout_->input_size(), stream_.get());
    if (labels) labels_.upload(labels_host_.data(), static_cast<std::size_t>(n), stream_.get());
  }

  void upload_batch(const float* images, int n) {
    stage_batch(images, nullptr, n);
    enqueue_upload(n, true, false);
  }

  // A training step's work on the stream, from the staged batch to the SGD update, with the
  // probabilities and the loss sum queued back into pinned memory: a CUDA graph replays it
  // (the copies inside it then count as compute in the time breakdown, not host-device).
  void enqueue_train_step(int batch, const optim::SgdMomentum& sgd, bool host_images) {
    const cudaStream_t s = stream_.get();
    enqueue_upload(batch, host_images, true);
    forward_pass(batch);
    softmax(batch, true, 1.0f / static_cast<float>(batch));
    sum_kernel<<<1, kThreadsPerBlock, 0, s>>>(row_loss_.data(), batch, loss_sum_.data());
    SPMD_CHECK_CUDA_LAUNCH("CNN loss sum kernel");
    // Queued now, overlapping the backward pass; read after the step's synchronize.
    probs_.download(probs_host_.data(), static_cast<std::size_t>(batch) * layout_->classes(), s);
    loss_sum_.download(loss_host_.data(), 1, s);
    backward_pass(batch);
    enqueue_sgd(sgd);
  }

  void enqueue_sgd(const optim::SgdMomentum& sgd) {
    const auto count = static_cast<std::int64_t>(params_.size());
    sgd_momentum_kernel<<<blocks_for(count), kThreadsPerBlock, 0, stream_.get()>>>(
        params_.data(), trace_.data(), grad_.data(), count, sgd.learning_rate, sgd.momentum);
    SPMD_CHECK_CUDA_LAUNCH("CNN SGD momentum kernel");
  }

  // x_ [n, H, W, C] -> the last stage's output (logits) [n, classes], keeping every
  // activation for the backward pass.
  void forward_pass(int n) {
    const float* in = x_.data();
    for (auto& st : stages_) {
      cuda::CudaIo io{n, in, st.out.data()};
      io.params = st.params.data();
      st.op->forward(context(), io);
      in = st.out.data();
    }
  }

  // probs_ from the logits; with_labels: also row_loss_ and the logits' gradient (scaled by
  // grad_scale) into the last stage's d_out.
  void softmax(int n, bool with_labels, float grad_scale) {
    loss_->loss(context(), stages_.back().out.data(), with_labels ? labels_.data() : nullptr, n, grad_scale,
                probs_.data(), with_labels ? row_loss_.data() : nullptr,
                with_labels ? stages_.back().d_out.data() : nullptr);
  }

  // The whole gradient into grad_ (every tensor overwritten), from the logits' gradient and
  // the activations of forward_pass(n) on the same batch: the ops from the last, each
  // writing its input's gradient into the d_out of the op before (the images need none).
  void backward_pass(int n) {
    for (std::size_t i = stages_.size(); i-- > 0;) {
      Stage& st = stages_[i];
      cuda::CudaIo io{n, i > 0 ? stages_[i - 1].out.data() : x_.data(), st.out.data(), st.d_out.data(),
                      i > 0 ? stages_[i - 1].d_out.data() : nullptr, st.params.data(), st.grads.data(),
                      i > 0 && stages_[i - 1].op->output_relu()};
      st.op->backward(context(), io);
    }
  }

  // One op of the model: its activations [rows_per_pass, out] and their gradient
  // [max_train_batch, out] (post-ReLU output; the gradient w.r.t. the pre-activation).
  struct Stage {
    const CnnNode* node;
    std::unique_ptr<cuda::CudaOp> op;
    cuda::DeviceBuffer<float> out, d_out;
    std::vector<const float*> params;
    std::vector<float*> grads;
  };

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
  std::vector<Stage> stages_;                // the model's ops (CnnLayout::nodes()), the loss excepted
  std::unique_ptr<cuda::CudaLossOp> loss_;
  cuda::DeviceBuffer<float> probs_;            // [., classes]
  cuda::DeviceBuffer<double> row_loss_;        // [.]
  cuda::DeviceBuffer<double> loss_sum_;        // [1]
  // Host staging (page-locked) of a pass's inputs and outputs.
  cuda::PinnedBuffer<float> images_host_;
  cuda::PinnedBuffer<std::int32_t> labels_host_;
  cuda::PinnedBuffer<float> probs_host_;
  cuda::PinnedBuffer<double> loss_host_;
  std::optional<cuda::ByteStager> stager_;  // byte images: tiles of [rows_per_pass, H, W, C] bytes
  cuda::StepGraphs train_graphs_{"CNN member's training step"};
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
