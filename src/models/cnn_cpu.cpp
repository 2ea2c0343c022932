#include "spmd/models/cnn_cpu.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "spmd/runtime/error.hpp"

namespace spmd::models {
namespace {

int round_up16(int n) { return (n + 15) / 16 * 16; }

void check_batch(int batch, int limit, const char* what, const char* limit_name) {
  if (batch < 0 || batch > limit)
    throw Error(std::string(what) + ": batch of " + std::to_string(batch) + " rows; the workspace was made for " +
                limit_name + " = " + std::to_string(limit) + " (0 <= batch <= " + limit_name + ")");
}

// dst[c, r] = src[r, c] for r < rows, c < cols; rows are src_stride / dst_stride apart.
void transpose(const float* src, int rows, int cols, long src_stride, float* dst, long dst_stride) {
  constexpr int kBlock = 16;  // a 16x16 tile of both sides stays in L1
  for (int r0 = 0; r0 < rows; r0 += kBlock)
    for (int c0 = 0; c0 < cols; c0 += kBlock)
      for (int r = r0; r < std::min(rows, r0 + kBlock); ++r)
        for (int c = c0; c < std::min(cols, c0 + kBlock); ++c) dst[c * dst_stride + r] = src[r * src_stride + c];
}

// d[i] = 0 where the post-ReLU activation act[i] is not positive (ReLU's backward).
void relu_mask(float* d, const float* act, long n) {
  for (long i = 0; i < n; ++i) d[i] = act[i] > 0.0f ? d[i] : 0.0f;
}

}  // namespace

// The passes over a workspace's buffers (a friend of CnnWorkspace).
struct CnnCpuPass {
  // Where conv layer l's pooled output of image b (kept in `slot`) goes: the interior of
  // the next layer's zero-bordered input, or row b of the flattened features.
  static float* pool_target(CnnWorkspace& ws, std::size_t l, long slot, int b, long& row_stride) {
    const auto& convs = ws.layout_->convs();
    if (l + 1 < convs.size()) {
      const auto& next = convs[l + 1];
      row_stride = static_cast<long>(next.width + 2) * next.in_channels;
      return ws.conv_[l + 1].in_pad.data() + slot * next.padded_input_size() + row_stride + next.in_channels;
    }
    row_stride = static_cast<long>(convs[l].pooled_width) * convs[l].out_channels;
    return ws.flat_.data() + static_cast<long>(b) * ws.layout_->flat_features();
  }

  // Conv layer `c` on one image's zero-bordered input: act = relu(conv(in_pad) + bias).
  static void conv_forward(const CnnParams& params, const CnnConvLayer& c, bool direct, const float* in_pad, float* act,
                           CnnWorkspace& ws) {
    const cnn_cpu::Kernels& k = *ws.kernels_;
    const float* w = params.tensor(c.kernel).data();
    const float* bias = params.tensor(c.bias).data();
    if (direct) {
      k.conv1_forward(in_pad, c.height, c.width, w, bias, c.out_channels, act);
      return;
    }
    cnn_cpu::im2col3x3(in_pad, c.height, c.width, c.in_channels, ws.col_.data());
    k.gemm(false, static_cast<int>(c.pixels()), c.out_channels, c.patch(), ws.col_.data(), c.patch(), w,
           c.out_channels, act, c.out_channels, false, {bias, true});
  }

  static void forward(const CnnParams& params, const float* images, int batch, bool keep, CnnWorkspace& ws) {
    const cnn_cpu::Kernels& k = *ws.kernels_;
    const CnnLayout& layout = *ws.layout_;
    const auto& convs = layout.convs();
    // Image by image, so that one image's activations stay in L2 through the conv layers.
    for (int b = 0; b < batch; ++b) {
      const long slot = keep ? b : 0;
      const auto& first = convs.front();
      cnn_cpu::pad_image(images + static_cast<long>(b) * layout.input_size(), first.height, first.width,
                         first.in_channels, ws.conv_.front().in_pad.data() + slot * first.padded_input_size());
      for (std::size_t l = 0; l < convs.size(); ++l) {
        const auto& c = convs[l];
        const float* in_pad = ws.conv_[l].in_pad.data() + slot * c.padded_input_size();
        float* act = ws.conv_[l].act.data() + (l == 0 ? 0 : slot * c.output_size());
        conv_forward(params, c, l == 0 && ws.direct_conv0_, in_pad, act, ws);
        long stride = 0;
        float* out = pool_target(ws, l, slot, b, stride);
        cnn_cpu::avg_pool2x2(act, c.height, c.width, c.out_channels, out, stride);
      }
    }
    const float* x = ws.flat_.data();
    for (std::size_t j = 0; j < layout.denses().size(); ++j) {
      const auto& d = layout.denses()[j];
      float* y = ws.dense_out_[j].data();
      const float* w = params.tensor(d.kernel).data();
      const float* bias = params.tensor(d.bias).data();
      if (d.relu)
        k.gemm(false, batch, d.out_features, d.in_features, x, d.in_features, w, d.out_features, y, d.out_features,
               false, {bias, true});
      else  // the classifier: a few columns, where the GEMM's vector tiles would be mostly empty
        cnn_cpu::dense_forward(x, batch, d.in_features, w, bias, d.out_features, y);
      x = y;
    }
  }

  static CnnLossSum evaluate(const CnnParams& params, const float* images, const std::int32_t* labels,
                             const std::uint8_t* mask, int batch, float* probs_out, CnnWorkspace& ws) {
    require_geometry(params, *ws.layout_, "CNN forward");
    check_batch(batch, ws.max_batch(), "CNN forward", "max_batch");
    forward(params, images, batch, false, ws);
    return cnn_cpu::softmax_cross_entropy(ws.dense_out_.back().data(), labels, mask, batch, ws.layout_->classes(),
                                          probs_out, nullptr, 0.0f);
  }

  // The SGD update fused into the hidden dense kernels' weight gradients (cnn_train_step).
  struct FusedSgd {
    CnnParams* params;
    CnnParams* trace;
    optim::SgdMomentum opt;
  };

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
    const CnnLossSum sum = cnn_cpu::softmax_cross_entropy(ws.dense_out_.back().data(), labels, mask, batch,
                                                         ws.layout_->classes(), probs_out,
                                                         ws.dense_dout_.back().data(), scale);
    backward(params, batch, grad, ws, fused);
    return count > 0 ? static_cast<float>(sum.loss_sum / static_cast<double>(count)) : 0.0f;
  }

  static float train_step(CnnParams& params, CnnParams& trace, const optim::SgdMomentum& opt, const float* images,
                          const std::int32_t* labels, int batch, float* probs_out, CnnWorkspace& ws) {
    if (ws.max_train_batch_ == 0)
      throw Error("CNN train step: the workspace was made for forward passes only (max_train_batch = 0)");
    require_geometry(trace, *ws.layout_, "CNN train step (momentum trace)");
    // The hidden dense kernels (97% of the default model's parameters) are updated inside
    // their gradient GEMMs, tile by tile, which saves writing and re-reading their gradient
    // (3.2 MB by default); the other tensors after, in runs of adjacent tensors.
    const FusedSgd fused{&params, &trace, opt};
    const float loss = loss_and_grad(params, images, labels, nullptr, batch, *ws.grad_, probs_out, ws, &fused);
    const CnnLayout& layout = *ws.layout_;
    std::vector<bool> skip(layout.tensors().size(), false);
    for (const auto& d : layout.denses())
      if (d.relu) skip[d.kernel] = true;
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

  // Expects forward(..., keep = true) on the same batch and the classifier's dout (dlogits)
  // filled. With `fused`, the hidden dense kernels are updated in place (and their
  // gradients are not kept in grad).
  static void backward(const CnnParams& params, int batch, CnnParams& grad, CnnWorkspace& ws,
                       const FusedSgd* fused = nullptr) {
    const cnn_cpu::Kernels& k = *ws.kernels_;
    const CnnLayout& layout = *ws.layout_;
    const auto& convs = layout.convs();
    const auto& denses = layout.denses();
    const auto zero = [&](std::size_t t) {
      auto s = grad.tensor(t);
      std::fill(s.begin(), s.end(), 0.0f);
    };
    // The gaps between tensors, and the tensors that the kernels below accumulate into;
    // the others are overwritten.
    std::size_t end = 0;
    for (const auto& info : layout.tensors()) {
      std::fill(grad.data() + end, grad.data() + info.offset, 0.0f);
      end = info.offset + info.size;
    }
    for (const auto& c : convs) zero(c.bias);
    if (ws.direct_conv0_) zero(convs.front().kernel);
    for (const auto& d : denses) zero(d.bias);
    zero(denses.back().kernel);

    // The classifier, then the hidden dense layers from the last: each input gradient as
    // dx^T = W dh^T, a GEMM whose columns are the batch rows, padded to 16.
    const std::size_t hidden = denses.size() - 1;
    {
      const auto& d = denses.back();
      const float* x = hidden > 0 ? ws.dense_out_[hidden - 1].data() : ws.flat_.data();
      float* dx = hidden > 0 ? ws.dense_dout_[hidden - 1].data() : ws.dflat_.data();
      cnn_cpu::dense_backward(x, batch, d.in_features, params.tensor(d.kernel).data(), d.out_features,
                              ws.dense_dout_.back().data(), grad.tensor(d.kernel).data(), grad.tensor(d.bias).data(),
                              dx, hidden > 0);
    }
    const int bpad = round_up16(batch);
    for (std::size_t j = hidden; j-- > 0;) {
      const auto& d = denses[j];
      const float* x = j > 0 ? ws.dense_out_[j - 1].data() : ws.flat_.data();
      const float* dh = ws.dense_dout_[j].data();
      float* dx = j > 0 ? ws.dense_dout_[j - 1].data() : ws.dflat_.data();
      cnn_cpu::add_row_sums(dh, batch, d.out_features, grad.tensor(d.bias).data());
      std::fill(ws.dout_t_.data(), ws.dout_t_.data() + static_cast<long>(d.out_features) * bpad, 0.0f);
      transpose(dh, batch, d.out_features, d.out_features, ws.dout_t_.data(), bpad);
      k.gemm(false, d.in_features, bpad, d.out_features, params.tensor(d.kernel).data(), d.out_features,
             ws.dout_t_.data(), bpad, ws.din_t_.data(), bpad, false, {});
      transpose(ws.din_t_.data(), d.in_features, batch, bpad, dx, d.in_features);
      if (j > 0) relu_mask(dx, x, static_cast<long>(batch) * d.in_features);
      // The weight gradient last: with a fused update it overwrites the weights the input
      // gradient above has just read.
      cnn_cpu::GemmEpilogue epilogue;
      if (fused != nullptr) {
        epilogue.sgd_params = fused->params->tensor(d.kernel).data();
        epilogue.sgd_trace = fused->trace->tensor(d.kernel).data();
        epilogue.sgd = fused->opt;
      }
      k.gemm(true, d.in_features, d.out_features, batch, x, d.in_features, dh, d.out_features,
             grad.tensor(d.kernel).data(), d.out_features, false, epilogue);
    }

    // Convolutions, image by image (everything one image needs stays in L2).
    for (std::size_t l = 1; l < convs.size(); ++l)
      transpose(params.tensor(convs[l].kernel).data(), convs[l].patch(), convs[l].out_channels,
                convs[l].out_channels, ws.conv_[l].kernel_t.data(), convs[l].patch());
    const long flat = layout.flat_features();
    for (int b = 0; b < batch; ++b) {
      // Layer 0's activation is recomputed rather than kept: 100 KB per image by default
      // would push the batch's saved state out of L2, and it is 3% of the arithmetic.
      conv_forward(params, convs.front(), ws.direct_conv0_,
                   ws.conv_.front().in_pad.data() + static_cast<long>(b) * convs.front().padded_input_size(),
                   ws.conv_.front().act.data(), ws);
      for (std::size_t l = convs.size(); l-- > 0;) {
        const auto& c = convs[l];
        const float* act = ws.conv_[l].act.data() + (l == 0 ? 0 : b * c.output_size());
        const float* in_pad = ws.conv_[l].in_pad.data() + b * c.padded_input_size();
        // The gradient w.r.t. this layer's pooled output: the next layer's input gradient
        // (its interior), or the flattened features' gradient.
        const float* dpool = ws.dflat_.data() + b * flat;
        long dpool_stride = static_cast<long>(c.pooled_width) * c.out_channels;
        if (l + 1 < convs.size()) {
          const auto& next = convs[l + 1];
          dpool_stride = static_cast<long>(next.width + 2) * next.in_channels;
          dpool = ws.conv_[l + 1].d_in_pad.data() + dpool_stride + next.in_channels;
        }
        cnn_cpu::avg_pool2x2_relu_backward(act, dpool, dpool_stride, c.height, c.width, c.out_channels,
                                           ws.da_.data());
        float* dw = grad.tensor(c.kernel).data();
        float* db = grad.tensor(c.bias).data();
        if (l == 0 && ws.direct_conv0_) {
          k.conv1_weight_grad(in_pad, c.height, c.width, ws.da_.data(), c.out_channels, dw, db);
        } else {
          cnn_cpu::add_row_sums(ws.da_.data(), static_cast<int>(c.pixels()), c.out_channels, db);
          cnn_cpu::im2col3x3(in_pad, c.height, c.width, c.in_channels, ws.col_.data());
          k.gemm(true, c.patch(), c.out_channels, static_cast<int>(c.pixels()), ws.col_.data(), c.patch(),
                 ws.da_.data(), c.out_channels, dw, c.out_channels, b > 0, {});
        }
        if (l == 0) continue;  // the images need no gradient
        k.gemm(false, static_cast<int>(c.pixels()), c.patch(), c.out_channels, ws.da_.data(), c.out_channels,
               ws.conv_[l].kernel_t.data(), c.patch(), ws.dcol_.data(), c.patch(), false, {});
        float* d_in = ws.conv_[l].d_in_pad.data();
        std::fill(d_in, d_in + c.padded_input_size(), 0.0f);
        cnn_cpu::col2im3x3_add(ws.dcol_.data(), c.height, c.width, c.in_channels, d_in);
      }
    }
    if (batch == 0)
      for (std::size_t l = ws.direct_conv0_ ? 1 : 0; l < convs.size(); ++l) zero(convs[l].kernel);
  }
};

CnnWorkspace::CnnWorkspace(std::shared_ptr<const CnnLayout> layout, int max_batch, int max_train_batch,
                           cnn_cpu::Isa isa)
    : layout_(std::move(layout)),
      max_batch_(max_batch),
      max_train_batch_(max_train_batch),
      slots_(std::max(1, max_train_batch)),
      train_pad_(round_up16(std::max(1, max_train_batch))),
      kernels_(nullptr),
      direct_conv0_(false) {
  if (max_batch < 0 || max_train_batch < 0 || max_train_batch > max_batch)
    throw Error("CnnWorkspace: need 0 <= max_train_batch <= max_batch, got max_batch=" + std::to_string(max_batch) +
                " max_train_batch=" + std::to_string(max_train_batch));
  kernels_ = &cnn_cpu::kernels_for(isa);
  const auto& convs = layout_->convs();
  const auto& denses = layout_->denses();
  direct_conv0_ = convs.front().in_channels == 1 && convs.front().out_channels % kernels_->direct_conv_channels == 0;
  const auto n = [](long a, long b = 1) { return static_cast<std::size_t>(a * b); };
  const int t = max_train_batch;
  const bool train = t > 0;
  long col = 0, dcol = 0, da = 0;
  conv_.resize(convs.size());
  for (std::size_t l = 0; l < convs.size(); ++l) {
    const auto& c = convs[l];
    ConvBuffers& buf = conv_[l];
    buf.in_pad = AlignedFloats(n(slots_, c.padded_input_size()));
    buf.act = AlignedFloats(l == 0 ? n(c.output_size()) : n(slots_, c.output_size()));
    if (l > 0 || !direct_conv0_) col = std::max(col, c.pixels() * c.patch());
    da = std::max(da, c.output_size());
    if (train && l > 0) {
      buf.kernel_t = AlignedFloats(n(c.out_channels, c.patch()));
      buf.d_in_pad = AlignedFloats(n(c.padded_input_size()));
      dcol = std::max(dcol, c.pixels() * c.patch());
    }
  }
  col_ = AlignedFloats(n(col));
  flat_ = AlignedFloats(n(max_batch, layout_->flat_features()));
  long hidden_in = 0, hidden_out = 0;
  for (const auto& d : denses) {
    dense_out_.emplace_back(n(max_batch, d.out_features));
    if (train) dense_dout_.emplace_back(n(t, d.out_features));
    if (!d.relu) continue;
    hidden_in = std::max<long>(hidden_in, d.in_features);
    hidden_out = std::max<long>(hidden_out, d.out_features);
  }
  if (train) {
    dout_t_ = AlignedFloats(n(hidden_out, train_pad_));
    din_t_ = AlignedFloats(n(hidden_in, train_pad_));
    dflat_ = AlignedFloats(n(t, layout_->flat_features()));
    da_ = AlignedFloats(n(da));
    dcol_ = AlignedFloats(n(dcol));
    grad_ = std::make_unique<CnnParams>(layout_);
  }
}

std::size_t CnnWorkspace::bytes() const {
  std::size_t floats = col_.size() + flat_.size() + dout_t_.size() + din_t_.size() + dflat_.size() + da_.size() +
                       dcol_.size();
  for (const auto& c : conv_) floats += c.in_pad.size() + c.act.size() + c.kernel_t.size() + c.d_in_pad.size();
  for (const auto& d : dense_out_) floats += d.size();
  for (const auto& d : dense_dout_) floats += d.size();
  if (grad_) floats += grad_->size();
  return floats * sizeof(float);
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
