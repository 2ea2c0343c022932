#pragma once
// The ensemble CNN on one CPU core: forward, softmax cross-entropy, backward and a fused
// SGD-momentum step, on host buffers, for any geometry a CnnConfig describes
// (cnn_config.hpp). For the default config:
//
//   images [B, 28, 28, 1] float32 NHWC -> conv 3x3 SAME 1->32, ReLU, avg-pool 2x2
//   -> conv 3x3 SAME 32->64, ReLU, avg-pool 2x2 -> flatten [B, 3136] (NHWC order)
//   -> dense 3136->256, ReLU -> dense 256->10 = logits [B, 10]
//
// The network is CnnLayout::nodes(), a sequence of ops (ops/cpu_op.hpp), each run by its CPU
// implementation, which picks its fast path from its shape.
//
// Every buffer a call needs lives in a CnnWorkspace allocated once for the largest batch
// and reused: no allocation, no page fault during a step. One workspace per thread. The
// CPU backend's CnnMember (models/device_models.hpp) wraps these functions; the CUDA one
// keeps their semantics.
//
// Parameters, gradients and the workspace must share one geometry (spmd::Error otherwise).
// Masks: mask [B] uint8 (nullptr = every row counts). Rows with mask 0 (padding) add
// nothing to the loss, its count or the gradient, but they still get probabilities; their
// images must be finite (padding is zeros).
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "spmd/models/cnn_aligned.hpp"
#include "spmd/models/cnn_kernels.hpp"
#include "spmd/models/cnn_layers.hpp"
#include "spmd/models/cnn_params.hpp"
#include "spmd/ops/cpu_op.hpp"
#include "spmd/optim/sgd.hpp"

namespace spmd::models {

using CnnLossSum = cnn_cpu::LossSum;  // {double loss_sum; int64 count}

class CnnWorkspace {
 public:
  // max_batch: the largest batch of any call (eval at 512, say). max_train_batch: the
  // largest batch of cnn_loss_and_grad / cnn_train_step (0: this workspace only runs
  // forward passes; backward calls throw). isa: the kernel set (cnn_kernels.hpp).
  // Throws spmd::Error for negative sizes, an invalid config or an unsupported ISA.
  CnnWorkspace(std::shared_ptr<const CnnLayout> layout, int max_batch, int max_train_batch,
               cnn_cpu::Isa isa = cnn_cpu::Isa::Auto);
  CnnWorkspace(const CnnConfig& config, int max_batch, int max_train_batch, cnn_cpu::Isa isa = cnn_cpu::Isa::Auto)
      : CnnWorkspace(CnnLayout::make(config), max_batch, max_train_batch, isa) {}

  const CnnLayout& layout() const { return *layout_; }
  int max_batch() const { return max_batch_; }
  int max_train_batch() const { return max_train_batch_; }
  cnn_cpu::Isa isa() const { return kernels_->isa; }
  std::size_t bytes() const;  // host memory held
  // Logits [batch, classes] of the last forward pass.
  std::span<const float> logits(int batch) const {
    const auto classes = static_cast<std::size_t>(layout_->classes());
    return stages_.back().out.span().first(static_cast<std::size_t>(batch) * classes);
  }

 private:
  friend struct CnnCpuPass;
  // One op of the model and the activations it reads. Per-image ops (the first `spatial_`)
  // read `in`, a frame per kept image with the op's zero border ([slots, h+2b, w+2b, c]; the
  // second op's input, the first op's output, holds one image: it is recomputed in the
  // backward pass rather than kept), and write their input gradient to `d_in` (one image's
  // frame). Batch ops write `out` [max_batch, out] and the gradient w.r.t. it, `d_out`.
  struct Stage {
    const CnnNode* node;
    std::unique_ptr<ops::CpuOp> op;
    AlignedFloats in, d_in, out, d_out;
    long frame = 0, origin = 0, stride = 0;  // floats per image frame, offset of its interior, image-row stride
    int slots = 1;
    std::vector<const float*> params;  // per call: this op's tensors
    std::vector<float*> grads, sgd_params, sgd_trace;
  };
  std::shared_ptr<const CnnLayout> layout_;
  int max_batch_;
  int max_train_batch_;
  const cnn_cpu::Kernels* kernels_;
  std::vector<Stage> stages_;
  std::size_t spatial_ = 0;              // stages [0, spatial_) run image by image
  std::unique_ptr<ops::CpuLossOp> loss_;
  AlignedFloats flat_;                   // [max_batch, features] the per-image ops' output (the batch ops' input)
  AlignedFloats dflat_;                  // [max_train_batch, features]
  std::unique_ptr<CnnParams> grad_;      // cnn_train_step's gradient (training workspaces only)
};

// Forward pass; probs_out [batch, classes] (nullable) receives softmax(logits).
// 0 <= batch <= ws.max_batch() (spmd::Error otherwise).
void cnn_forward(const CnnParams& params, const float* images, int batch, float* probs_out, CnnWorkspace& ws);

// Forward pass and the loss summed over counted rows: the eval step. labels [batch] in
// [0, classes) for counted rows (spmd::Error otherwise); probs_out nullable.
CnnLossSum cnn_evaluate(const CnnParams& params, const float* images, const std::int32_t* labels,
                        const std::uint8_t* mask, int batch, float* probs_out, CnnWorkspace& ws);

// Mean softmax cross-entropy over the counted rows (0 when none) and its gradient, written
// to grad (every float overwritten, the gaps between tensors with 0; same layout as params).
// probs_out nullable. batch <= ws.max_train_batch().
float cnn_loss_and_grad(const CnnParams& params, const float* images, const std::int32_t* labels,
                        const std::uint8_t* mask, int batch, CnnParams& grad, float* probs_out, CnnWorkspace& ws);

// One training step of one ensemble member: the result of cnn_loss_and_grad (every row
// counts) followed by optim::sgd_momentum_step on params and trace (tensor by tensor; the
// gaps stay as they are), with the update of each hidden dense kernel fused into its
// gradient computation. Returns the batch's mean loss (before the update).
float cnn_train_step(CnnParams& params, CnnParams& trace, const optim::SgdMomentum& opt, const float* images,
                     const std::int32_t* labels, int batch, float* probs_out, CnnWorkspace& ws);

}  // namespace spmd::models
