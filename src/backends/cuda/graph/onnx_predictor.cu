// eval --model onnx on a GPU: rows (floats, or bytes decoded on the GPU by the byte stager)
// are mapped to the model's input there (NHWC -> NCHW, --input-mean / --input-std), the graph
// runs on the GPU (graph_executor.hpp) in tiles of up to kTileRows rows, and only the output
// rows [n, classes] come back, turned into classes and probabilities by the CPU predictor's
// own code (models::onnx_outputs_to_predictions).
#include <algorithm>
#include <optional>
#include <string>

#include "graph_executor.hpp"
#include "spmd/backends/cuda/byte_stager.hpp"
#include "spmd/backends/cuda/cuda_device.hpp"
#include "spmd/backends/cuda/models.hpp"
#include "spmd/backends/cuda/stream.hpp"
#include "spmd/models/onnx_predictor.hpp"
#include "spmd/runtime/error.hpp"

namespace spmd::backends::cuda {
namespace {

// Rows per graph run: bounds the activation buffers (planned for this many rows).
constexpr std::int64_t kTileRows = 2048;

// x [rows, size] <- (stored value - mean[e]) * inv_std[e]: the stored row as it is, or NHWC
// images [h, w, c] read as NCHW; mean == nullptr: no normalisation. The CPU predictor's order.
__global__ void map_input_kernel(const float* stored, std::int64_t rows, std::int64_t size, bool nhwc, std::int64_t hw,
                                 std::int64_t c, const float* mean, const float* inv_std, float* x) {
  for (std::int64_t i = first_index(); i < rows * size; i += index_stride()) {
    const std::int64_t r = i / size, e = i % size;
    float v = stored[nhwc ? r * size + (e % hw) * c + e / hw : i];
    if (mean) v = (v - mean[e]) * inv_std[e];
    x[i] = v;
  }
}

class CudaOnnxPredictor final : public models::DevicePredictor {
 public:
  CudaOnnxPredictor(const runtime::DeviceInfo& device, const models::OnnxPredictorSpec& spec, std::int64_t max_rows)
      : ordinal_((use_cuda_device(device, "CUDA ONNX predictor"), device.ordinal)),
        spec_(spec),
        max_rows_(max_rows),
        tile_rows_(std::clamp<std::int64_t>(max_rows, 1, kTileRows)),
        size_(row_size(spec.input.row)),
        mapped_(spec.input.nhwc_to_nchw || !spec.input.mean.empty()),
        cublas_(stream_.get()),
        graph_(spec.graph, tile_rows_, stream_.get(), cublas_.get()),
        stored_(mapped_ ? static_cast<std::size_t>(tile_rows_ * size_) : 0, "ONNX predictor rows as stored"),
        mean_(spec.input.mean.size(), "ONNX predictor input mean"),
        inv_std_(spec.input.inv_std.size(), "ONNX predictor input 1/std"),
        y_host_(static_cast<std::size_t>(tile_rows_ * spec.width), "ONNX predictor outputs (host)") {
    mean_.upload(spec.input.mean.data(), spec.input.mean.size(), stream_.get());
    inv_std_.upload(spec.input.inv_std.data(), spec.input.inv_std.size(), stream_.get());
    // A first run at the largest tile sizes the scratch: later runs allocate nothing.
    SPMD_CHECK_CUDA(cudaMemsetAsync(graph_.input(), 0, static_cast<std::size_t>(tile_rows_ * size_) * sizeof(float), stream_.get()),
                    "zeroing the ONNX graph's input");
    graph_.run(tile_rows_);
    stream_.synchronize("a first run of the ONNX graph on the GPU");
  }
  ~CudaOnnxPredictor() override { set_current_gpu_noexcept(ordinal_); }

  void predict(const float* samples, std::int64_t rows, std::int32_t* classes_out, float* probs_out) override {
    check_rows(rows);
    set_current_gpu(ordinal_);
    for (std::int64_t first = 0; first < rows; first += tile_rows_) {
      const std::int64_t n = std::min(tile_rows_, rows - first);
      float* to = mapped_ ? stored_.data() : graph_.input();
      SPMD_CHECK_CUDA(cudaMemcpyAsync(to, samples + first * size_, static_cast<std::size_t>(n * size_) * sizeof(float),
                                      cudaMemcpyHostToDevice, stream_.get()),
                      "copying rows to the GPU for the ONNX graph");
      finish_tile(first, n, classes_out, probs_out);
    }
  }

  bool decodes_bytes() const override { return true; }
  void predict_bytes(const std::uint8_t* samples, std::int64_t rows, const models::ByteTable& table, std::int32_t* classes_out,
                     float* probs_out) override {
    check_rows(rows);
    set_current_gpu(ordinal_);
    if (!stager_) stager_.emplace(static_cast<std::size_t>(tile_rows_ * size_), "CUDA ONNX predictor");
    stager_->run(samples, rows, size_, tile_rows_, table, mapped_ ? stored_.data() : graph_.input(), stream_.get(),
                 [&](std::int64_t first, std::int64_t n) { finish_tile(first, n, classes_out, probs_out); });
  }

 private:
  static std::int64_t row_size(const std::vector<std::int64_t>& row) {
    std::int64_t n = 1;
    for (const auto d : row) n *= d;
    return n;
  }
  void check_rows(std::int64_t rows) const {
    if (rows < 0 || rows > max_rows_)
      throw Error("CUDA ONNX predictor: batch of " + std::to_string(rows) + " rows; it was made for max_rows = " +
                  std::to_string(max_rows_));
  }

  // The tile's rows are in stored_ (or already the graph's input) on the stream.
  void finish_tile(std::int64_t first, std::int64_t n, std::int32_t* classes_out, float* probs_out) {
    const cudaStream_t s = stream_.get();
    if (mapped_) {
      const auto& in = spec_.input;
      map_input_kernel<<<blocks_for(n * size_), kThreadsPerBlock, 0, s>>>(stored_.data(), n, size_, in.nhwc_to_nchw, in.h * in.w,
                                                                          in.c, mean_.size() ? mean_.data() : nullptr,
                                                                          inv_std_.data(), graph_.input());
      SPMD_CHECK_CUDA_LAUNCH("ONNX input mapping kernel");
    }
    graph_.run(n);
    const DeviceTensor& y = graph_.output();
    if (y.size() != n * spec_.width)
      throw Error("CUDA ONNX predictor: the output " + ops::to_string(y.shape) + " is not [" + std::to_string(n) + ", " +
                  std::to_string(spec_.width) + "]");
    SPMD_CHECK_CUDA(cudaMemcpyAsync(y_host_.data(), y.data, static_cast<std::size_t>(y.size()) * sizeof(float),
                                    cudaMemcpyDeviceToHost, s),
                    "copying the ONNX graph's outputs to the host");
    stream_.synchronize("running the ONNX graph on the GPU");
    non_finite_rows_ += models::onnx_outputs_to_predictions(spec_.output, y_host_.data(), n, spec_.width, spec_.classes,
                                                            classes_out + first,
                                                            probs_out ? probs_out + first * spec_.classes : nullptr);
  }

  int ordinal_;
  const models::OnnxPredictorSpec& spec_;  // the classifier's, which outlives its predictors
  std::int64_t max_rows_, tile_rows_, size_;
  bool mapped_;
  Stream stream_;
  CublasHandle cublas_;
  GraphExecutor graph_;
  DeviceBuffer<float> stored_, mean_, inv_std_;
  PinnedBuffer<float> y_host_;
  std::optional<ByteStager> stager_;
};

}  // namespace

std::unique_ptr<models::DevicePredictor> make_onnx_predictor_cuda(const runtime::DeviceInfo& device,
                                                                  const models::OnnxPredictorSpec& spec, std::int64_t max_rows) {
  return std::make_unique<CudaOnnxPredictor>(device, spec, max_rows);
}

std::string onnx_unsupported_cuda(const models::OnnxGraph& graph) { return plan_graph(graph).unsupported; }

}  // namespace spmd::backends::cuda
