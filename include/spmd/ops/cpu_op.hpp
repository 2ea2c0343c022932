#pragma once
// The CPU implementations of the op library's kinds (op.hpp). A CpuOp is made per workspace
// for one node (its shape known, its largest batch known) and owns the scratch it needs;
// the executor (models/cnn_cpu.cpp) owns the activations and hands each op views of them.
//
// Two kinds of op, by where they run best: per-image ops (convolutions, pooling) run one
// image at a time through the whole spatial part of a model, so that an image's activations
// stay in L2; batch ops (dense layers, the loss) run over all rows at once, as GEMMs.
//
// Fusions the executor arranges: an op may apply ReLU to its output (attribute "relu"); its
// consumer may then fold ReLU's backward into its own (absorbs_input_relu); otherwise the
// executor masks the gradient. A dense op may update its kernel by SGD-momentum inside its
// weight-gradient GEMM (fused_sgd_params).
#include <cstdint>
#include <memory>
#include <vector>

#include "spmd/models/cnn_kernels.hpp"
#include "spmd/models/cnn_layers.hpp"
#include "spmd/ops/op.hpp"
#include "spmd/optim/sgd.hpp"

namespace spmd::ops {

// A tensor view: per-image ops see one image [h, w, c] whose image rows are `stride` floats
// apart (the interior of a zero-bordered frame when the op has an input border); batch ops
// see [rows, features] with rows `stride` floats apart.
struct View {
  float* data = nullptr;
  long stride = 0;
};
struct ConstView {
  const float* data = nullptr;
  long stride = 0;
};

// One call's tensors. `in`, `out`: the op's input and (post-ReLU, when fused) output;
// `dout`, `din`: their gradients (din.data == nullptr: not wanted, the model's input).
struct CpuIo {
  int rows = 1;  // batch rows (batch ops); 1 for per-image ops
  ConstView in;
  View out;
  ConstView dout;
  View din;
};

// What a step gives every op: its parameters and gradients (in OpShape::params order).
struct CpuStep {
  const float* const* params = nullptr;
  float* const* grads = nullptr;
  // Per-image ops: true from the second image of a batch on (add to the gradients instead
  // of writing them). Batch ops always write.
  bool accumulate = false;
  bool mask_input_relu = false;  // fold ReLU's backward of the input into din
  // Fused SGD-momentum (fused_sgd_params): the same tensors of the parameters and the trace.
  float* const* sgd_params = nullptr;
  float* const* sgd_trace = nullptr;
  optim::SgdMomentum sgd{};
};

// What an implementation is made for.
struct CpuOpContext {
  const models::cnn_cpu::Kernels* kernels;
  int max_rows;        // the largest batch
  int max_train_rows;  // the largest batch of a backward pass (0: forward only)
  bool model_input;    // its input is the model's input (no input gradient is ever wanted)
};

class CpuOp {
 public:
  virtual ~CpuOp() = default;
  virtual bool per_image() const = 0;
  // Zero pixels around the input (a 3x3 SAME convolution: 1), kept zero by the executor.
  virtual int input_border() const { return 0; }
  // Writes its output with any image-row stride (into a consumer's bordered frame).
  virtual bool strided_output() const { return false; }
  virtual bool output_relu() const { return false; }
  virtual bool absorbs_input_relu() const { return false; }
  // Parameters (indices into OpShape::params) that backward updates by fused SGD when
  // CpuStep::sgd_params is set; their gradients are then not written.
  virtual std::vector<int> fused_sgd_params() const { return {}; }
  virtual std::size_t scratch_bytes() const { return 0; }
  // Once per backward pass, before the first image (a per-image op's transposed kernel).
  virtual void prepare_backward(const CpuStep&) {}
  virtual void forward(const CpuStep& step, const CpuIo& io) = 0;
  // Gradients w.r.t. the parameters (written, or added when step.accumulate) and, when
  // io.din.data is set, w.r.t. the input (every float of the frame written).
  virtual void backward(const CpuStep& step, const CpuIo& io) = 0;
};

// A model's last op: the loss over the logits.
class CpuLossOp {
 public:
  virtual ~CpuLossOp() = default;
  // probs (nullable) [rows, classes]; dlogits (nullable): d(loss_sum * grad_scale)/dlogits.
  virtual models::cnn_cpu::LossSum loss(const float* logits, const std::int32_t* labels, const std::uint8_t* mask,
                                        int rows, float* probs, float* dlogits, float grad_scale) const = 0;
};

using CpuFactory = std::unique_ptr<CpuOp> (*)(const OpSpec&, const OpShape&, const CpuOpContext&);
using CpuLossFactory = std::unique_ptr<CpuLossOp> (*)(const OpSpec&, const OpShape&);

// spmd::Error naming the kind when the CPU has no implementation of it.
std::unique_ptr<CpuOp> make_cpu_op(const OpSpec& spec, const OpShape& shape, const CpuOpContext& context);
std::unique_ptr<CpuLossOp> make_cpu_loss(const OpSpec& spec, const OpShape& shape);

namespace detail {
bool register_cpu(const char* kind, CpuFactory fn);
bool register_cpu_loss(const char* kind, CpuLossFactory fn);
}  // namespace detail

}  // namespace spmd::ops

// One line per kind in its CPU file: the shape rule and the implementation.
#define SPMD_REGISTER_CPU_OP(kind, shape_fn, factory)                                                \
  SPMD_REGISTER_OP_SHAPE(kind, shape_fn);                                                            \
  [[maybe_unused]] static const bool SPMD_OPS_CONCAT(spmd_cpu_op_, __LINE__) =                       \
      ::spmd::ops::detail::register_cpu(kind, [](const ::spmd::ops::OpSpec& s, const ::spmd::ops::OpShape& sh, \
                                                 const ::spmd::ops::CpuOpContext& c) -> std::unique_ptr<::spmd::ops::CpuOp> { \
        return std::make_unique<factory>(s, sh, c);                                                  \
      })
#define SPMD_REGISTER_CPU_LOSS(kind, shape_fn, factory)                                              \
  SPMD_REGISTER_OP_SHAPE(kind, shape_fn);                                                            \
  [[maybe_unused]] static const bool SPMD_OPS_CONCAT(spmd_cpu_loss_, __LINE__) =                     \
      ::spmd::ops::detail::register_cpu_loss(kind, [](const ::spmd::ops::OpSpec& s, const ::spmd::ops::OpShape& sh) \
                                                        -> std::unique_ptr<::spmd::ops::CpuLossOp> {  \
        return std::make_unique<factory>(s, sh);                                                     \
      })
