#include "spmd/models/cnn_cpu.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "spmd/runtime/error.hpp"

namespace spmd::models {
namespace {

void check_batch(int batch, int limit, const char* what, const char* limit_name) {
  if (batch < 0 || batch > limit)
    throw Error(std::string(what) + ": batch of " + std::to_string(batch) + " rows; the workspace was made for " +
                limit_name + " = " + std::to_string(limit) + " (0 <= batch <= " + limit_name + ")");
}

std::size_t floats(long a, long b = 1) { return static_cast<std::size_t>(a * b); }

}  // namespace

// The passes over a workspace's stages (a friend of CnnWorkspace).
struct CnnCpuPass {
  using Stage = CnnWorkspace::Stage;

  // The SGD update fused into ops' weight gradients (cnn_train_step).
  struct FusedSgd {
    CnnParams* params;
    CnnParams* trace;
    optim::SgdMomentum opt;
  };

  static ops::CpuStep step_of(Stage& s, const CnnParams& params, CnnParams* grad, const FusedSgd* fused) {
    for (std::size_t i = 0; i < s.node->params.size(); ++i) {
      s.params[i] = params.tensor(s.node->params[i]).data();
      if (grad != nullptr) s.grads[i] = grad->tensor(s.node->params[i]).data();
    }
    ops::CpuStep step{s.params.data(), s.grads.data()};
    if (fused != nullptr && !s.sgd_params.empty()) {
      const auto fused_params = s.op->fused_sgd_params();
      for (std::size_t i = 0; i < fused_params.size(); ++i) {
        const std::size_t t = s.node->params[static_cast<std::size_t>(fused_params[i])];
        s.sgd_params[i] = fused->params->tensor(t).data();
        s.sgd_trace[i] = fused->trace->tensor(t).data();
      }
      step.sgd_params = s.sgd_params.data();
      step.sgd_trace = s.sgd_trace.data();
      step.sgd = fused->opt;
    }
    return step;
  }

  // Per-image stage i's input for image b (the slot it is kept in), and where its output goes:
  // the next stage's input frame, or row b of the flattened features.
  // keep: the activations are kept for a backward pass (else every image uses slot 0).
  static ops::View input(Stage& s, int b, bool keep) {
    return {s.in.data() + (keep && s.slots > 1 ? b : 0) * s.frame + s.origin, s.stride};
  }
  static ops::View output(CnnWorkspace& ws, std::size_t i, int b, bool keep) {
    if (i + 1 < ws.spatial_) return input(ws.stages_[i + 1], b, keep);
    const auto& out = ws.stages_[i].node->shape.out;
    return {ws.flat_.data() + b * out.size(), static_cast<long>(out.w) * out.c};
  }
  static ops::View d_output(CnnWorkspace& ws, std::size_t i, int b) {
    if (i + 1 < ws.spatial_) {
      Stage& next = ws.stages_[i + 1];
      return {next.d_in.data() + next.origin, next.stride};
    }
    const auto& out = ws.stages_[i].node->shape.out;
    return {ws.dflat_.data() + b * out.size(), static_cast<long>(out.w) * out.c};
  }
  static ops::CpuIo image_io(CnnWorkspace& ws, std::size_t i, int b, bool keep, bool backward) {
    ops::CpuIo io;
    const ops::View in = input(ws.stages_[i], b, keep), out = output(ws, i, b, keep);
    io.in = {in.data, in.stride};
    io.out = out;
    if (backward) {
      const ops::View dout = d_output(ws, i, b);
      io.dout = {dout.data, dout.stride};
      if (i > 0) io.din = {ws.stages_[i].d_in.data() + ws.stages_[i].origin, ws.stages_[i].stride};
    }
    return io;
  }
  // Batch stage i's input: the previous stage's output, or the flattened features.
  static const float* batch_input(CnnWorkspace& ws, std::size_t i) {
    return i > ws.spatial_ ? ws.stages_[i - 1].out.data() : ws.flat_.data();
  }

  static void forward(const CnnParams& params, const float* images, int batch, bool keep, CnnWorkspace& ws) {
    const auto& in = ws.layout_->nodes().front().shape.in;
    const long row = static_cast<long>(in.w) * in.c;
    // Image by image, so that one image's activations stay in L2 through the per-image ops.
    for (int b = 0; b < batch; ++b) {
      const float* image = images + b * in.size();
      if (ws.spatial_ == 0) {
        std::copy(image, image + in.size(), ws.flat_.data() + b * in.size());
        continue;
      }
      const ops::View frame = input(ws.stages_.front(), b, keep);
      for (int y = 0; y < in.h; ++y) std::copy(image + y * row, image + (y + 1) * row, frame.data + y * frame.stride);
      for (std::size_t i = 0; i < ws.spatial_; ++i)
        ws.stages_[i].op->forward(step_of(ws.stages_[i], params, nullptr, nullptr), image_io(ws, i, b, keep, false));
    }
    for (std::size_t i = ws.spatial_; i < ws.stages_.size(); ++i) {
      Stage& s = ws.stages_[i];
      ops::CpuIo io;
      io.rows = batch;
      io.in = {batch_input(ws, i), s.node->shape.in.size()};
      io.out = {s.out.data(), s.node->shape.out.size()};
      s.op->forward(step_of(s, params, nullptr, nullptr), io);
    }
  }

  static CnnLossSum evaluate(const CnnParams& params, const float* images, const std::int32_t* labels,
                             const std::uint8_t* mask, int batch, float* probs_out, CnnWorkspace& ws) {
    require_geometry(params, *ws.layout_, "CNN forward");
    check_batch(batch, ws.max_batch(), "CNN forward", "max_batch");
    forward(params, images, batch, false, ws);
    return ws.loss_->loss(ws.stages_.back().out.data(), labels, mask, batch, probs_out, nullptr, 0.0f);
  }

  static float loss_and_grad(const CnnParams& params, const float* images, const std::int32_t* labels,
                             const std::uint8_t* mask, int batch, CnnParams& grad, float* probs_out, CnnWorkspace& ws,
                             const FusedSgd* fused = nullptr) {
    if (ws.max_train_batch_ == 0)
      throw Error("CNN loss and gradient: the workspace was made for forward passes only (max_train_batch = 0)");
    require_geometry(params, *ws.layout_, "CNN loss and gradient");
    require_geometry(grad, *ws.layout_, "CNN loss and gradient (gradient buffer)");
    check_batch(batch, ws.max_train_batch(), "CNN loss and gradient", "max_train_batch");
    if (labels == nullptr && batch > 0) throw Error("CNN loss and gradient: labels are required");
    forward(params, images, batch, true, ws);
    const std::int64_t count = cnn_cpu::count_rows(mask, batch);
    const float scale = count > 0 ? 1.0f / static_cast<float>(count) : 0.0f;
    const CnnLossSum sum = ws.loss_->loss(ws.stages_.back().out.data(), labels, mask, batch, probs_out,
                                          ws.stages_.back().d_out.data(), scale);
    backward(params, batch, grad, ws, fused);
    return count > 0 ? static_cast<float>(sum.loss_sum / static_cast<double>(count)) : 0.0f;
  }

  static float train_step(CnnParams& params, CnnParams& trace, const optim::SgdMomentum& opt, const float* images,
                          const std::int32_t* labels, int batch, float* probs_out, CnnWorkspace& ws) {
    if (ws.max_train_batch_ == 0)
      throw Error("CNN train step: the workspace was made for forward passes only (max_train_batch = 0)");
    require_geometry(trace, *ws.layout_, "CNN train step (momentum trace)");
    // The tensors the ops update inside their gradient GEMMs (the hidden dense kernels, 97%
    // of the default model's parameters), tile by tile, which saves writing and re-reading
    // their gradient (3.2 MB by default); the other tensors after, in runs of adjacent tensors.
    const FusedSgd fused{&params, &trace, opt};
    const float loss = loss_and_grad(params, images, labels, nullptr, batch, *ws.grad_, probs_out, ws, &fused);
    const CnnLayout& layout = *ws.layout_;
    std::vector<bool> skip(layout.tensors().size(), false);
    for (const auto& s : ws.stages_)
      for (int p : s.op->fused_sgd_params()) skip[s.node->params[static_cast<std::size_t>(p)]] = true;
    const auto step = [&](std::size_t begin, std::size_t end) {
      if (end > begin)
        optim::sgd_momentum_step(params.flat().subspan(begin, end - begin), trace.flat().subspan(begin, end - begin),
                                 ws.grad_->flat().subspan(begin, end - begin), opt);
    };
    std::size_t begin = 0, end = 0;  // the current run of adjacent tensors
    for (std::size_t t = 0; t < layout.tensors().size(); ++t) {
      if (skip[t]) continue;
      const auto& info = layout.tensors()[t];
      if (info.offset != end) {
        step(begin, end);
        begin = info.offset;
      }
      end = info.offset + info.size;
    }
    step(begin, end);
    return loss;
  }

  // Whether stage i's backward folds its producer's ReLU into its input gradient.
  static bool mask_input(const CnnWorkspace& ws, std::size_t i) {
    return i > 0 && ws.stages_[i - 1].op->output_relu();
  }

  // Expects forward(..., keep = true) on the same batch and the last stage's d_out (dlogits)
  // filled. With `fused`, the ops' fused tensors are updated in place (their gradients are
  // not kept in grad).
  static void backward(const CnnParams& params, int batch, CnnParams& grad, CnnWorkspace& ws,
                       const FusedSgd* fused = nullptr) {
    std::size_t end = 0;  // the gaps between tensors belong to no op
    for (const auto& info : ws.layout_->tensors()) {
      std::fill(grad.data() + end, grad.data() + info.offset, 0.0f);
      end = info.offset + info.size;
    }
    for (std::size_t i = ws.stages_.size(); i-- > ws.spatial_;) {
      Stage& s = ws.stages_[i];
      ops::CpuIo io;
      io.rows = batch;
      io.in = {batch_input(ws, i), s.node->shape.in.size()};
      io.out = {s.out.data(), s.node->shape.out.size()};
      io.dout = {s.d_out.data(), s.node->shape.out.size()};
      float* din = i > ws.spatial_ ? ws.stages_[i - 1].d_out.data() : (ws.spatial_ > 0 ? ws.dflat_.data() : nullptr);
      io.din = {din, s.node->shape.in.size()};
      ops::CpuStep step = step_of(s, params, &grad, fused);
      step.mask_input_relu = mask_input(ws, i);
      s.op->backward(step, io);
    }
    image_backward(params, batch, grad, ws);
  }

  // The per-image ops, image by image (everything one image needs stays in L2).
  static void image_backward(const CnnParams& params, int batch, CnnParams& grad, CnnWorkspace& ws) {
    if (ws.spatial_ == 0) return;
    for (std::size_t i = 0; i < ws.spatial_; ++i) ws.stages_[i].op->prepare_backward(step_of(ws.stages_[i], params, &grad, nullptr));
    const bool recompute = ws.spatial_ > 1 && ws.stages_[1].slots == 1;
    for (int b = 0; b < batch; ++b) {
      // The first op's output is recomputed rather than kept: 100 KB per image for the
      // default model would push the batch's saved state out of L2, and it is 3% of the
      // arithmetic.
      if (recompute) ws.stages_[0].op->forward(step_of(ws.stages_[0], params, nullptr, nullptr), image_io(ws, 0, b, true, false));
      for (std::size_t i = ws.spatial_; i-- > 0;) {
        Stage& s = ws.stages_[i];
        ops::CpuStep step = step_of(s, params, &grad, nullptr);
        step.accumulate = b > 0;
        step.mask_input_relu = mask_input(ws, i);
        s.op->backward(step, image_io(ws, i, b, true, true));
      }
    }
    if (batch == 0)  // no image: the per-image ops' gradients are zero
      for (std::size_t i = 0; i < ws.spatial_; ++i)
        for (std::size_t t : ws.stages_[i].node->params) std::ranges::fill(grad.tensor(t), 0.0f);
  }
};

CnnWorkspace::CnnWorkspace(std::shared_ptr<const CnnLayout> layout, int max_batch, int max_train_batch,
                           cnn_cpu::Isa isa)
    : layout_(std::move(layout)), max_batch_(max_batch), max_train_batch_(max_train_batch), kernels_(nullptr) {
  if (max_batch < 0 || max_train_batch < 0 || max_train_batch > max_batch)
    throw Error("CnnWorkspace: need 0 <= max_train_batch <= max_batch, got max_batch=" + std::to_string(max_batch) +
                " max_train_batch=" + std::to_string(max_train_batch));
  kernels_ = &cnn_cpu::kernels_for(isa);
  const auto& nodes = layout_->nodes();
  const int slots = std::max(1, max_train_batch);
  const bool train = max_train_batch > 0;
  for (std::size_t i = 0; i + 1 < nodes.size(); ++i) {
    Stage s;
    s.node = &nodes[i];
    s.op = ops::make_cpu_op(nodes[i].spec, nodes[i].shape, {kernels_, max_batch, max_train_batch, i == 0});
    const std::size_t n = nodes[i].params.size();
    s.params.resize(n);
    s.grads.resize(n);
    s.sgd_params.resize(s.op->fused_sgd_params().size());
    s.sgd_trace.resize(s.sgd_params.size());
    const auto& in = nodes[i].shape.in;
    const auto& out = nodes[i].shape.out;
    if (i > 0 && stages_.back().op->output_relu() && !s.op->absorbs_input_relu())
      throw Error("CNN: op '" + nodes[i].spec.kind + "' cannot take the fused ReLU of '" + nodes[i - 1].spec.kind + "'");
    if (s.op->per_image()) {
      if (spatial_ != i) throw Error("CNN: per-image op '" + nodes[i].spec.kind + "' after a batch op");
      spatial_ = i + 1;
      const int border = s.op->input_border();
      if (i > 0 && border > 0 && !stages_.back().op->strided_output())
        throw Error("CNN: op '" + nodes[i - 1].spec.kind + "' cannot write into the bordered input of '" +
                    nodes[i].spec.kind + "'");
      s.stride = static_cast<long>(in.w + 2 * border) * in.c;
      s.frame = (in.h + 2 * border) * s.stride;
      s.origin = border * (s.stride + in.c);
      s.slots = i == 1 ? 1 : slots;  // the first op's output is recomputed in backward
      s.in = AlignedFloats(floats(s.slots, s.frame));
      if (train && i > 0) s.d_in = AlignedFloats(floats(s.frame));
    } else {
      s.out = AlignedFloats(floats(max_batch, out.size()));
      if (train) s.d_out = AlignedFloats(floats(max_train_batch, out.size()));
    }
    stages_.push_back(std::move(s));
  }
  loss_ = ops::make_cpu_loss(nodes.back().spec, nodes.back().shape);
  const long features = nodes[spatial_].shape.in.size();
  flat_ = AlignedFloats(floats(max_batch, features));
  if (train) {
    dflat_ = AlignedFloats(floats(max_train_batch, features));
    grad_ = std::make_unique<CnnParams>(layout_);
  }
}

std::size_t CnnWorkspace::bytes() const {
  std::size_t n = flat_.size() + dflat_.size() + (grad_ ? grad_->size() : 0);
  std::size_t scratch = 0;
  for (const auto& s : stages_) {
    n += s.in.size() + s.d_in.size() + s.out.size() + s.d_out.size();
    scratch += s.op->scratch_bytes();
  }
  return n * sizeof(float) + scratch;
}

void cnn_forward(const CnnParams& params, const float* images, int batch, float* probs_out, CnnWorkspace& ws) {
  cnn_evaluate(params, images, nullptr, nullptr, batch, probs_out, ws);
}

CnnLossSum cnn_evaluate(const CnnParams& params, const float* images, const std::int32_t* labels,
                        const std::uint8_t* mask, int batch, float* probs_out, CnnWorkspace& ws) {
  return CnnCpuPass::evaluate(params, images, labels, mask, batch, probs_out, ws);
}

float cnn_loss_and_grad(const CnnParams& params, const float* images, const std::int32_t* labels,
                        const std::uint8_t* mask, int batch, CnnParams& grad, float* probs_out, CnnWorkspace& ws) {
  return CnnCpuPass::loss_and_grad(params, images, labels, mask, batch, grad, probs_out, ws);
}

float cnn_train_step(CnnParams& params, CnnParams& trace, const optim::SgdMomentum& opt, const float* images,
                     const std::int32_t* labels, int batch, float* probs_out, CnnWorkspace& ws) {
  return CnnCpuPass::train_step(params, trace, opt, images, labels, batch, probs_out, ws);
}

}  // namespace spmd::models
