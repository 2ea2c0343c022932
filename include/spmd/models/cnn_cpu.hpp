#pragma once
// The ensemble CNN (seed 001) on one CPU core: forward, softmax cross-entropy, backward
// and a fused SGD-momentum step, on host buffers.
//
//   images [B, 28, 28, 1] float32 NHWC -> conv 3x3 SAME 1->32, ReLU, avg-pool 2x2
//   -> conv 3x3 SAME 32->64, ReLU, avg-pool 2x2 -> flatten [B, 3136] (NHWC order)
//   -> dense 3136->256, ReLU -> dense 256->10 = logits [B, 10]
//
// Every buffer a call needs lives in a CnnWorkspace allocated once for the largest batch
// and reused: no allocation, no page fault during a step. One workspace per thread; the
// functions are reentrant across different workspaces. The per-device interface that the
// workloads use (models/device_models.hpp, CnnMember) wraps these functions on a CPU
// device; its CUDA implementation keeps the same semantics.
//
// Masks: mask [B] uint8 (nullptr = every row counts). Rows with mask 0 (padding) add
// nothing to the loss, its count or the gradient, but they still get probabilities; their
// images must be finite (padding is zeros).
#include <cstdint>
#include <memory>
#include <span>

#include "spmd/models/cnn_aligned.hpp"
#include "spmd/models/cnn_kernels.hpp"
#include "spmd/models/cnn_layers.hpp"
#include "spmd/models/cnn_params.hpp"
#include "spmd/optim/sgd.hpp"

namespace spmd::models {

using CnnLossSum = cnn_cpu::LossSum;  // {double loss_sum; int64 count}

class CnnWorkspace {
 public:
  // max_batch: the largest batch of any call (eval at 512, say). max_train_batch: the
  // largest batch of cnn_loss_and_grad / cnn_train_step (0: this workspace only runs
  // forward passes; backward calls throw). isa: the kernel set (cnn_kernels.hpp).
  // Throws spmd::Error for negative sizes or an unsupported ISA.
  CnnWorkspace(int max_batch, int max_train_batch, cnn_cpu::Isa isa = cnn_cpu::Isa::Auto);

  int max_batch() const { return max_batch_; }
  int max_train_batch() const { return max_train_batch_; }
  cnn_cpu::Isa isa() const { return kernels_->isa; }
  std::size_t bytes() const;  // host memory held
  // Logits [batch, 10] of the last forward pass.
  std::span<const float> logits(int batch) const { return logits_.span().first(static_cast<std::size_t>(batch) * 10); }

 private:
  friend struct CnnCpuPass;
  int max_batch_;
  int max_train_batch_;
  int slots_;      // images whose activations are kept for a backward pass (>= 1)
  int train_pad_;  // max_train_batch rounded up to 16 (GEMM column width)
  const cnn_cpu::Kernels* kernels_;
  // Forward, per kept image (slot) unless noted.
  AlignedFloats x_pad_;   // [slots, 30, 30], zero border
  AlignedFloats a1_;      // [28, 28, 32] post-ReLU, one image (recomputed in backward)
  AlignedFloats p1_pad_;  // [slots, 16, 16, 32], zero border
  AlignedFloats col_;     // [196, 288] im2col of one image
  AlignedFloats a2_;      // [slots, 14, 14, 64] post-ReLU
  AlignedFloats p2_;      // [max_batch, 3136]
  AlignedFloats h_;       // [max_batch, 256] post-ReLU
  AlignedFloats logits_;  // [max_batch, 10]
  // Backward (sized by max_train_batch).
  AlignedFloats dlogits_;  // [T, 10]
  AlignedFloats dh_;       // [T, 256]
  AlignedFloats dh_t_;     // [256, train_pad] zero-padded columns
  AlignedFloats dp2_t_;    // [3136, train_pad]
  AlignedFloats dp2_;      // [T, 3136]
  AlignedFloats w2_t_;     // [64, 288]
  AlignedFloats da2_;      // [196, 64] one image
  AlignedFloats dcol_;     // [196, 288] one image
  AlignedFloats dp1_pad_;  // [16, 16, 32] one image
  AlignedFloats da1_;      // [28, 28, 32] one image
  std::unique_ptr<CnnParams> grad_;  // cnn_train_step's gradient (training workspaces only)
};

// Forward pass; probs_out [batch, 10] (nullable) receives softmax(logits).
// 0 <= batch <= ws.max_batch() (spmd::Error otherwise).
void cnn_forward(const CnnParams& params, const float* images, int batch, float* probs_out, CnnWorkspace& ws);

// Forward pass and the loss summed over counted rows: the eval step. labels [batch] in
// [0, 10) for counted rows (spmd::Error otherwise); probs_out nullable.
CnnLossSum cnn_evaluate(const CnnParams& params, const float* images, const std::int32_t* labels,
                        const std::uint8_t* mask, int batch, float* probs_out, CnnWorkspace& ws);

// Mean softmax cross-entropy over the counted rows (0 when none) and its gradient, written
// to grad (overwritten, same layout as params). probs_out nullable.
// batch <= ws.max_train_batch().
float cnn_loss_and_grad(const CnnParams& params, const float* images, const std::int32_t* labels,
                        const std::uint8_t* mask, int batch, CnnParams& grad, float* probs_out, CnnWorkspace& ws);

// One training step of one ensemble member: the result of cnn_loss_and_grad (every row
// counts) followed by optim::sgd_momentum_step on params and trace, with the update of
// dense1's kernel fused into its gradient computation. Returns the batch's mean loss
// (before the update).
float cnn_train_step(CnnParams& params, CnnParams& trace, const optim::SgdMomentum& opt, const float* images,
                     const std::int32_t* labels, int batch, float* probs_out, CnnWorkspace& ws);

}  // namespace spmd::models
