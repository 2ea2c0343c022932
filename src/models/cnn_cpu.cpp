#include "spmd/models/cnn_cpu.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "spmd/runtime/error.hpp"

namespace spmd::models {
namespace {

using namespace cnn;
constexpr int kPaddedImage = (kImageSide + 2) * (kImageSide + 2);           // 900
constexpr int kA1Size = kImagePixels * kConv1Channels;                      // 25088
constexpr int kP1Side = kPool1Side + 2;                                     // 16
constexpr int kP1PadSize = kP1Side * kP1Side * kConv1Channels;              // 8192
constexpr int kConv2Pixels = kPool1Side * kPool1Side;                       // 196
constexpr int kConv2K = 9 * kConv1Channels;                                 // 288
constexpr int kA2Size = kConv2Pixels * kConv2Channels;                      // 12544
constexpr long kP1Interior = (kP1Side + 1) * kConv1Channels;                // first interior pixel
constexpr long kP1RowStride = kP1Side * kConv1Channels;
constexpr long kP2RowStride = kPool2Side * kConv2Channels;

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

}  // namespace

// The passes over a workspace's buffers (a friend of CnnWorkspace).
struct CnnCpuPass {
  static void forward(const CnnParams& params, const float* images, int batch, bool keep, CnnWorkspace& ws) {
    const cnn_cpu::Kernels& k = *ws.kernels_;
    const float* w1 = params.tensor(CnnTensor::Conv1Kernel).data();
    const float* b1 = params.tensor(CnnTensor::Conv1Bias).data();
    const float* w2 = params.tensor(CnnTensor::Conv2Kernel).data();
    const float* b2 = params.tensor(CnnTensor::Conv2Bias).data();
    // Image by image, so that one image's activations stay in L2 from conv1 to pool2.
    for (int b = 0; b < batch; ++b) {
      const long slot = keep ? b : 0;
      float* x_pad = ws.x_pad_.data() + slot * kPaddedImage;
      float* a1 = ws.a1_.data();
      float* p1 = ws.p1_pad_.data() + slot * kP1PadSize;
      float* a2 = ws.a2_.data() + slot * kA2Size;
      cnn_cpu::pad_image(images + static_cast<long>(b) * kImagePixels, x_pad);
      k.conv1_forward(x_pad, w1, b1, a1);
      cnn_cpu::avg_pool2x2(a1, kImageSide, kImageSide, kConv1Channels, p1 + kP1Interior, kP1RowStride);
      cnn_cpu::im2col3x3(p1, kPool1Side, kPool1Side, kConv1Channels, ws.col_.data());
      k.gemm(false, kConv2Pixels, kConv2Channels, kConv2K, ws.col_.data(), kConv2K, w2, kConv2Channels, a2,
             kConv2Channels, false, {b2, true});
      cnn_cpu::avg_pool2x2(a2, kPool1Side, kPool1Side, kConv2Channels, ws.p2_.data() + static_cast<long>(b) * kFlatFeatures,
                           kP2RowStride);
    }
    k.gemm(false, batch, kHidden, kFlatFeatures, ws.p2_.data(), kFlatFeatures,
           params.tensor(CnnTensor::Dense1Kernel).data(), kHidden, ws.h_.data(), kHidden, false,
           {params.tensor(CnnTensor::Dense1Bias).data(), true});
    cnn_cpu::dense_forward(ws.h_.data(), batch, kHidden, params.tensor(CnnTensor::Dense2Kernel).data(),
                           params.tensor(CnnTensor::Dense2Bias).data(), kClasses, ws.logits_.data());
  }

  static CnnLossSum evaluate(const CnnParams& params, const float* images, const std::int32_t* labels,
                             const std::uint8_t* mask, int batch, float* probs_out, CnnWorkspace& ws) {
    check_batch(batch, ws.max_batch(), "CNN forward", "max_batch");
    forward(params, images, batch, false, ws);
    return cnn_cpu::softmax_cross_entropy(ws.logits_.data(), labels, mask, batch, kClasses, probs_out, nullptr, 0.0f);
  }

  // The SGD update fused into dense1's weight gradient (cnn_train_step).
  struct FusedSgd {
    CnnParams* params;
    CnnParams* trace;
    optim::SgdMomentum opt;
  };

  static float loss_and_grad(const CnnParams& params, const float* images, const std::int32_t* labels,
                             const std::uint8_t* mask, int batch, CnnParams& grad, float* probs_out, CnnWorkspace& ws,
                             const FusedSgd* fused = nullptr) {
    check_batch(batch, ws.max_train_batch(), "CNN loss and gradient", "max_train_batch");
    if (labels == nullptr && batch > 0) throw Error("CNN loss and gradient: labels are required");
    forward(params, images, batch, true, ws);
    const std::int64_t count = cnn_cpu::count_rows(mask, batch);
    const float scale = count > 0 ? 1.0f / static_cast<float>(count) : 0.0f;
    const CnnLossSum sum = cnn_cpu::softmax_cross_entropy(ws.logits_.data(), labels, mask, batch, kClasses, probs_out,
                                                         ws.dlogits_.data(), scale);
    backward(params, batch, grad, ws, fused);
    return count > 0 ? static_cast<float>(sum.loss_sum / static_cast<double>(count)) : 0.0f;
  }

  static float train_step(CnnParams& params, CnnParams& trace, const optim::SgdMomentum& opt, const float* images,
                          const std::int32_t* labels, int batch, float* probs_out, CnnWorkspace& ws) {
    // dense1's kernel (97% of the parameters) is updated inside its gradient GEMM, tile by
    // tile, which saves writing and re-reading 3.2 MB of gradient; the rest after.
    const FusedSgd fused{&params, &trace, opt};
    const float loss = loss_and_grad(params, images, labels, nullptr, batch, *ws.grad_, probs_out, ws, &fused);
    const auto& d1 = cnn_tensor_info(CnnTensor::Dense1Kernel);
    const std::size_t tail = d1.offset + d1.size;
    optim::sgd_momentum_step(params.flat().first(d1.offset), trace.flat().first(d1.offset),
                             ws.grad_->flat().first(d1.offset), opt);
    optim::sgd_momentum_step(params.flat().subspan(tail), trace.flat().subspan(tail), ws.grad_->flat().subspan(tail),
                             opt);
    return loss;
  }

  // Expects forward(..., keep = true) on the same batch and ws.dlogits_ filled. With
  // `fused`, dense1's kernel is updated in place (and its gradient is not kept in grad).
  static void backward(const CnnParams& params, int batch, CnnParams& grad, CnnWorkspace& ws,
                       const FusedSgd* fused = nullptr) {
    const cnn_cpu::Kernels& k = *ws.kernels_;
    const auto zero = [&](CnnTensor t) {
      auto s = grad.tensor(t);
      std::fill(s.begin(), s.end(), 0.0f);
    };
    // Tensors that the kernels below accumulate into; the others are overwritten.
    for (CnnTensor t : {CnnTensor::Conv1Kernel, CnnTensor::Conv1Bias, CnnTensor::Conv2Bias, CnnTensor::Dense1Bias,
                        CnnTensor::Dense2Kernel, CnnTensor::Dense2Bias})
      zero(t);

    // Head: dense2, then dense1 (its input gradient as dp2^T = W3 dh^T, a GEMM whose
    // columns are the batch rows, padded to 16).
    cnn_cpu::dense_backward(ws.h_.data(), batch, kHidden, params.tensor(CnnTensor::Dense2Kernel).data(), kClasses,
                            ws.dlogits_.data(), grad.tensor(CnnTensor::Dense2Kernel).data(),
                            grad.tensor(CnnTensor::Dense2Bias).data(), ws.dh_.data(), true);
    cnn_cpu::add_row_sums(ws.dh_.data(), batch, kHidden, grad.tensor(CnnTensor::Dense1Bias).data());
    const int bpad = round_up16(batch);
    std::fill(ws.dh_t_.data(), ws.dh_t_.data() + static_cast<long>(kHidden) * bpad, 0.0f);
    transpose(ws.dh_.data(), batch, kHidden, kHidden, ws.dh_t_.data(), bpad);
    k.gemm(false, kFlatFeatures, bpad, kHidden, params.tensor(CnnTensor::Dense1Kernel).data(), kHidden,
           ws.dh_t_.data(), bpad, ws.dp2_t_.data(), bpad, false, {});
    transpose(ws.dp2_t_.data(), kFlatFeatures, batch, bpad, ws.dp2_.data(), kFlatFeatures);
    // dense1's weight gradient last: with a fused update it overwrites the weights the input
    // gradient above has just read.
    cnn_cpu::GemmEpilogue dense1_epilogue;
    if (fused != nullptr) {
      dense1_epilogue.sgd_params = fused->params->tensor(CnnTensor::Dense1Kernel).data();
      dense1_epilogue.sgd_trace = fused->trace->tensor(CnnTensor::Dense1Kernel).data();
      dense1_epilogue.sgd = fused->opt;
    }
    k.gemm(true, kFlatFeatures, kHidden, batch, ws.p2_.data(), kFlatFeatures, ws.dh_.data(), kHidden,
           grad.tensor(CnnTensor::Dense1Kernel).data(), kHidden, false, dense1_epilogue);

    // Convolutions, image by image (everything one image needs stays in L2).
    transpose(params.tensor(CnnTensor::Conv2Kernel).data(), kConv2K, kConv2Channels, kConv2Channels, ws.w2_t_.data(),
              kConv2K);
    float* dw1 = grad.tensor(CnnTensor::Conv1Kernel).data();
    float* db1 = grad.tensor(CnnTensor::Conv1Bias).data();
    float* dw2 = grad.tensor(CnnTensor::Conv2Kernel).data();
    float* db2 = grad.tensor(CnnTensor::Conv2Bias).data();
    for (int b = 0; b < batch; ++b) {
      const float* x_pad = ws.x_pad_.data() + static_cast<long>(b) * kPaddedImage;
      // conv1's activation is recomputed rather than kept: 100 KB per image would push the
      // batch's saved state out of L2, and conv1 is 3% of the arithmetic.
      float* a1 = ws.a1_.data();
      k.conv1_forward(x_pad, params.tensor(CnnTensor::Conv1Kernel).data(), params.tensor(CnnTensor::Conv1Bias).data(),
                      a1);
      const float* p1 = ws.p1_pad_.data() + static_cast<long>(b) * kP1PadSize;
      const float* a2 = ws.a2_.data() + static_cast<long>(b) * kA2Size;
      cnn_cpu::avg_pool2x2_relu_backward(a2, ws.dp2_.data() + static_cast<long>(b) * kFlatFeatures, kP2RowStride,
                                         kPool1Side, kPool1Side, kConv2Channels, ws.da2_.data());
      cnn_cpu::add_row_sums(ws.da2_.data(), kConv2Pixels, kConv2Channels, db2);
      cnn_cpu::im2col3x3(p1, kPool1Side, kPool1Side, kConv1Channels, ws.col_.data());
      k.gemm(true, kConv2K, kConv2Channels, kConv2Pixels, ws.col_.data(), kConv2K, ws.da2_.data(), kConv2Channels,
             dw2, kConv2Channels, b > 0, {});
      k.gemm(false, kConv2Pixels, kConv2K, kConv2Channels, ws.da2_.data(), kConv2Channels, ws.w2_t_.data(), kConv2K,
             ws.dcol_.data(), kConv2K, false, {});
      std::fill(ws.dp1_pad_.data(), ws.dp1_pad_.data() + kP1PadSize, 0.0f);
      cnn_cpu::col2im3x3_add(ws.dcol_.data(), kPool1Side, kPool1Side, kConv1Channels, ws.dp1_pad_.data());
      cnn_cpu::avg_pool2x2_relu_backward(a1, ws.dp1_pad_.data() + kP1Interior, kP1RowStride, kImageSide, kImageSide,
                                         kConv1Channels, ws.da1_.data());
      k.conv1_weight_grad(x_pad, ws.da1_.data(), dw1, db1);
    }
    if (batch == 0) zero(CnnTensor::Conv2Kernel);
  }
};

CnnWorkspace::CnnWorkspace(int max_batch, int max_train_batch, cnn_cpu::Isa isa)
    : max_batch_(max_batch),
      max_train_batch_(max_train_batch),
      slots_(std::max(1, max_train_batch)),
      train_pad_(round_up16(std::max(1, max_train_batch))),
      kernels_(nullptr) {
  if (max_batch < 0 || max_train_batch < 0 || max_train_batch > max_batch)
    throw Error("CnnWorkspace: need 0 <= max_train_batch <= max_batch, got max_batch=" + std::to_string(max_batch) +
                " max_train_batch=" + std::to_string(max_train_batch));
  kernels_ = &cnn_cpu::kernels_for(isa);
  const auto n = [](long a, long b = 1) { return static_cast<std::size_t>(a * b); };
  const int t = max_train_batch;
  x_pad_ = AlignedFloats(n(slots_, kPaddedImage));
  a1_ = AlignedFloats(n(kA1Size));
  p1_pad_ = AlignedFloats(n(slots_, kP1PadSize));
  col_ = AlignedFloats(n(kConv2Pixels, kConv2K));
  a2_ = AlignedFloats(n(slots_, kA2Size));
  p2_ = AlignedFloats(n(max_batch, kFlatFeatures));
  h_ = AlignedFloats(n(max_batch, kHidden));
  logits_ = AlignedFloats(n(max_batch, kClasses));
  if (t > 0) {
    dlogits_ = AlignedFloats(n(t, kClasses));
    dh_ = AlignedFloats(n(t, kHidden));
    dh_t_ = AlignedFloats(n(kHidden, train_pad_));
    dp2_t_ = AlignedFloats(n(kFlatFeatures, train_pad_));
    dp2_ = AlignedFloats(n(t, kFlatFeatures));
    w2_t_ = AlignedFloats(n(kConv2Channels, kConv2K));
    da2_ = AlignedFloats(n(kA2Size));
    dcol_ = AlignedFloats(n(kConv2Pixels, kConv2K));
    dp1_pad_ = AlignedFloats(n(kP1PadSize));
    da1_ = AlignedFloats(n(kA1Size));
    grad_ = std::make_unique<CnnParams>();
  }
}

std::size_t CnnWorkspace::bytes() const {
  std::size_t floats = 0;
  for (const AlignedFloats* b : {&x_pad_, &a1_, &p1_pad_, &col_, &a2_, &p2_, &h_, &logits_, &dlogits_, &dh_, &dh_t_,
                                 &dp2_t_, &dp2_, &w2_t_, &da2_, &dcol_, &dp1_pad_, &da1_})
    floats += b->size();
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
