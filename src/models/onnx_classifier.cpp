#include "spmd/models/onnx_classifier.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <tuple>
#include <type_traits>

#include "spmd/models/device_models.hpp"
#include "spmd/models/onnx_graph.hpp"
#include "spmd/models/onnx_predictor.hpp"
#include "spmd/ops/half_float.hpp"
#include "spmd/runtime/error.hpp"

namespace spmd::models {

OnnxOutput parse_onnx_output(const std::string& text) {
  for (const auto o : {OnnxOutput::Auto, OnnxOutput::Logits, OnnxOutput::Probabilities, OnnxOutput::LogProbabilities})
    if (text == to_string(o)) return o;
  throw Error("--model-output must be auto, logits, probabilities or log-probabilities (got '" + text + "')");
}

const char* to_string(OnnxOutput output) {
  switch (output) {
    case OnnxOutput::Auto: return "auto";
    case OnnxOutput::Logits: return "logits";
    case OnnxOutput::Probabilities: return "probabilities";
    case OnnxOutput::LogProbabilities: return "log-probabilities";
  }
  return "?";
}

namespace {

using Dims = std::vector<std::int64_t>;

std::int64_t product(const Dims& d) {
  std::int64_t n = 1;
  for (const auto v : d) n *= v;
  return n;
}

// The model's input row with its symbolic dimensions (-1) taken from the stored samples, read
// the ways check_sample_shape feeds them: as stored, NHWC images for a [C, H, W] input, or with
// 1-sized dimensions aside. The first reading whose fixed dimensions agree wins; where every
// dimension is symbolic, as stored and NHWC are both possible: refused.
Dims bind_symbolic_dims(const Dims& row, const Dims& stored, const std::string& path, const std::string& input) {
  const auto agrees = [](const Dims& want, const Dims& have) {
    if (want.size() != have.size()) return false;
    for (std::size_t k = 0; k < want.size(); ++k)
      if (want[k] >= 1 && want[k] != have[k]) return false;
    return true;
  };
  const bool any_fixed = std::any_of(row.begin(), row.end(), [](std::int64_t d) { return d >= 1; });
  if (any_fixed || row.size() == 1) {
    if (agrees(row, stored)) return stored;
    if (stored.size() == 3 && agrees(row, {stored[2], stored[0], stored[1]})) return {stored[2], stored[0], stored[1]};
    Dims squeezed_row, squeezed_stored;  // [1, h, w] for stored [28, 28]
    for (const auto d : row) if (d != 1) squeezed_row.push_back(d);
    for (const auto d : stored) if (d != 1) squeezed_stored.push_back(d);
    if (agrees(squeezed_row, squeezed_stored)) {
      Dims out = row;
      for (std::size_t k = 0, j = 0; k < out.size(); ++k)
        if (out[k] != 1) out[k] = squeezed_stored[j++];
      return out;
    }
  }
  throw Error("ONNX model '" + path + "': input '" + input + "' [batch, " + ops::to_string(row).substr(1) +
              " (-1: symbolic) cannot take its sizes from the data's samples " + ops::to_string(stored) +
              (any_fixed ? "" : ": with every dimension symbolic, as stored and NHWC-to-NCHW are both readings") +
              "; export it with those dimensions fixed");
}

// The normalisation as one (shift, 1 / std) pair per element of a model row: empty for none.
OnnxInputPlan plan_normalisation(const OnnxInputNorm& norm, const Dims& row, const std::string& path) {
  OnnxInputPlan n;
  n.row = row;
  if (norm.mean.empty() && norm.std.empty()) return n;
  const std::int64_t size = product(row);
  const auto count = static_cast<std::int64_t>(std::max(norm.mean.size(), norm.std.size()));
  if (!norm.mean.empty() && !norm.std.empty() && norm.mean.size() != norm.std.size() && norm.mean.size() != 1 &&
      norm.std.size() != 1)
    throw Error("--input-mean has " + std::to_string(norm.mean.size()) + " values and --input-std " +
                std::to_string(norm.std.size()) + "; give one value or one per channel for each");
  for (const float s : norm.std)
    if (!(s > 0.0f)) throw Error("--input-std must be positive (got " + std::to_string(s) + ")");
  // Which axis of the row holds the channels: per element index -> channel.
  const bool first = !row.empty() && row.front() == count, last = row.size() >= 2 && row.back() == count;
  if (count > 1 && first == last)
    throw Error("ONNX model '" + path + "': " + std::to_string(count) + " values of --input-mean / --input-std " +
                (first ? "match both the first and the last dimension" : "match no channel dimension") + " of its input [batch, " +
                ops::to_string(row).substr(1) + "; give one value, or one per channel");
  const std::int64_t inner = first ? size / count : 1;
  n.mean.resize(static_cast<std::size_t>(size));
  n.inv_std.resize(static_cast<std::size_t>(size));
  for (std::int64_t e = 0; e < size; ++e) {
    const std::int64_t c = count == 1 ? 0 : first ? e / inner : e % count;
    const auto pick = [c](const std::vector<float>& v, float fallback) {
      return v.empty() ? fallback : v[v.size() == 1 ? 0 : static_cast<std::size_t>(c)];
    };
    n.mean[static_cast<std::size_t>(e)] = pick(norm.mean, 0.0f);
    n.inv_std[static_cast<std::size_t>(e)] = 1.0f / pick(norm.std, 1.0f);
  }
  return n;
}

// Rows per run of the graph on the host: a device batch runs in chunks whose tensors take
// about twice the core's L2 cache (a node touches part of them), so that what one node writes
// is still cached when the next reads it (ResNet-style 12k -> 19k images/s at 512 rows per
// device). A row's result does not depend on the rows beside it (checked at load): the same bits.
std::int64_t host_chunk_rows(std::int64_t row_bytes, std::int64_t max_rows) {
  const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  const std::int64_t budget = 2 * (l2 > 0 ? l2 : 1 << 20), most = std::max<std::int64_t>(max_rows, 1);
  // At least 8 rows: with fewer, each run's own costs (a call per node, a convolution's zeroed
  // planes) outweigh what the cache saves on large rows (a ResNet-18 at 224 x 224: 1 row 6 %
  // slower than 32).
  return std::clamp<std::int64_t>(row_bytes > 0 ? budget / row_bytes : most, std::min<std::int64_t>(8, most), most);
}

// Bytes to floats through `table`, bit for bit. The tables of --input-scale auto (float(v) / 255,
// as data::FeatureDecoder makes it) and none (float(v)) are recognised and computed in a loop
// the compiler vectorises: a lookup per byte took a quarter of an MLP's eval.
void decode_bytes(const std::uint8_t* bytes, std::int64_t n, const ByteTable& table, float* out) {
  static const std::array<ByteTable, 2> computed = [] {
    std::array<ByteTable, 2> t{};
    for (int v = 0; v < 256; ++v) {
      t[0][static_cast<std::size_t>(v)] = static_cast<float>(v) / 255.0f;
      t[1][static_cast<std::size_t>(v)] = static_cast<float>(v);
    }
    return t;
  }();
  if (std::memcmp(table.data(), computed[0].data(), sizeof table) == 0)
    for (std::int64_t k = 0; k < n; ++k) out[k] = static_cast<float>(bytes[k]) / 255.0f;
  else if (std::memcmp(table.data(), computed[1].data(), sizeof table) == 0)
    for (std::int64_t k = 0; k < n; ++k) out[k] = static_cast<float>(bytes[k]);
  else
    for (std::int64_t k = 0; k < n; ++k) out[k] = table[bytes[k]];
}

class OnnxPredictor final : public DevicePredictor {
 public:
  OnnxPredictor(const OnnxPredictorSpec& spec, std::int64_t chunk_rows)
      : spec_(spec), runner_(spec.graph), chunk_(chunk_rows) {}

  void predict(const float* samples, std::int64_t rows, std::int32_t* classes_out, float* probs_out) override {
    predict_rows(samples, nullptr, rows, classes_out, probs_out);
  }
  // On the host too: each chunk's bytes are decoded into the graph's input tensor where it is
  // filled, a pass over the floats less than decoding the whole batch first.
  bool decodes_bytes() const override { return true; }
  void predict_bytes(const std::uint8_t* samples, std::int64_t rows, const ByteTable& table, std::int32_t* classes_out,
                     float* probs_out) override {
    predict_rows(samples, &table, rows, classes_out, probs_out);
  }

 private:
  template <class Stored>
  void predict_rows(const Stored* samples, const ByteTable* table, std::int64_t rows, std::int32_t* classes_out,
                    float* probs_out) {
    const std::int64_t size = product(spec_.input.row);
    for (std::int64_t first = 0; first < rows; first += chunk_)
      predict_chunk(samples + first * size, table, std::min(chunk_, rows - first), classes_out + first,
                    probs_out ? probs_out + first * spec_.classes : nullptr);
  }

  // Stored: float (the models' values) or std::uint8_t (value v is (*table)[v]).
  template <class Stored>
  void predict_chunk(const Stored* samples, const ByteTable* table, std::int64_t rows, std::int32_t* classes_out,
                     float* probs_out) {
    const OnnxInputPlan& in = spec_.input;
    ops::Tensor& x = runner_.input(0);
    Dims shape{rows};
    shape.insert(shape.end(), in.row.begin(), in.row.end());
    x.reset(ops::ElemType::Float32, shape);
    const std::int64_t size = product(in.row);
    const auto value = [&](std::int64_t k) {
      if constexpr (std::is_same_v<Stored, float>) return samples[k];
      else return (*table)[samples[k]];
    };
    if (!in.nhwc_to_nchw || in.c == 1) {  // one channel: NHWC and NCHW are the same bytes
      if constexpr (std::is_same_v<Stored, float>) std::copy_n(samples, rows * size, x.f.begin());
      else decode_bytes(samples, rows * size, *table, x.f.data());
    } else {
      const auto [h, w, c] = std::tuple{in.h, in.w, in.c};
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t p = 0; p < h * w; ++p)
          for (std::int64_t ch = 0; ch < c; ++ch)
            x.f[static_cast<std::size_t>(r * size + ch * h * w + p)] = value(r * size + p * c + ch);
    }
    if (!in.mean.empty())
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t e = 0; e < size; ++e) {
          float& v = x.f[static_cast<std::size_t>(r * size + e)];
          v = (v - in.mean[static_cast<std::size_t>(e)]) * in.inv_std[static_cast<std::size_t>(e)];
        }
    if (in.rounded_to == "float16")
      for (auto& v : x.f) v = ops::half_to_float(ops::float_to_half(v));
    else if (in.rounded_to == "bfloat16")
      for (auto& v : x.f) v = ops::bfloat16_to_float(ops::float_to_bfloat16(v));
    if (in.integer) {  // the stored integers, which eval read unscaled into floats
      x.i.resize(x.f.size());
      for (std::size_t k = 0; k < x.f.size(); ++k) x.i[k] = std::llround(x.f[k]);
      x.type = ops::ElemType::Int64;
    }
    runner_.run();
    non_finite_rows_ += onnx_outputs_to_predictions(spec_.output, runner_.output(0).f.data(), rows, spec_.width,
                                                    spec_.classes, classes_out, probs_out);
  }

  const OnnxPredictorSpec& spec_;  // the classifier's, which outlives its predictors
  OnnxRunner runner_;
  std::int64_t chunk_;
};

// Runs a graph that holds its batch size in fixed_batch rows per call: a device batch in
// chunks, the last one padded with copies of its first row (whose outputs are dropped).
class FixedBatchPredictor final : public DevicePredictor {
 public:
  FixedBatchPredictor(std::unique_ptr<DevicePredictor> inner, std::int64_t fixed_batch, std::int64_t sample_size, int classes)
      : inner_(std::move(inner)), batch_(fixed_batch), size_(sample_size), classes_(classes),
        staging_(static_cast<std::size_t>(fixed_batch * sample_size)), chunk_classes_(static_cast<std::size_t>(fixed_batch)),
        chunk_probs_(static_cast<std::size_t>(fixed_batch * classes)) {}

  void predict(const float* samples, std::int64_t rows, std::int32_t* classes_out, float* probs_out) override {
    for (std::int64_t first = 0; first < rows; first += batch_) {
      const std::int64_t real = std::min(batch_, rows - first);
      const float* chunk = samples + first * size_;
      if (real < batch_) {
        std::copy_n(chunk, real * size_, staging_.begin());
        for (std::int64_t r = real; r < batch_; ++r) std::copy_n(chunk, size_, staging_.begin() + r * size_);
        chunk = staging_.data();
      }
      // The probabilities always: the inner predictor also counts the padding copies among its
      // non-finite rows, so the real rows are judged here from what their class came from.
      inner_->predict(chunk, batch_, chunk_classes_.data(), chunk_probs_.data());
      const auto row_finite = [&](std::int64_t r) {
        return std::all_of(chunk_probs_.begin() + r * classes_, chunk_probs_.begin() + (r + 1) * classes_,
                           [](float p) { return std::isfinite(p); });
      };
      for (std::int64_t r = 0; r < real; ++r) non_finite_rows_ += !row_finite(r);
      std::copy_n(chunk_classes_.begin(), real, classes_out + first);
      if (probs_out) std::copy_n(chunk_probs_.begin(), real * classes_, probs_out + first * classes_);
    }
  }

 private:
  std::unique_ptr<DevicePredictor> inner_;
  std::int64_t batch_, size_;
  int classes_;
  std::vector<float> staging_;
  std::vector<std::int32_t> chunk_classes_;
  std::vector<float> chunk_probs_;
};

// A node that computes one statistic over its whole input, batch included, by its definition:
// DynamicQuantizeLinear (onnxruntime's quantize_dynamic) takes its scale from the tensor's range.
// Such a model is meant to quantize each request on its own: eval runs it an example at a time.
std::string whole_batch_node(const OnnxGraph& graph) {
  for (const auto& node : graph.nodes())
    if (node.op == "DynamicQuantizeLinear") return "node '" + node.name + "' (" + node.op + ")";
  return "";
}

class OnnxClassifier final : public Classifier {
 public:
  OnnxClassifier(OnnxPredictorSpec spec, std::string said, std::string bound, bool output_chosen, std::int64_t fixed_bytes,
                 std::int64_t row_bytes)
      : spec_(std::move(spec)), said_(std::move(said)), bound_(std::move(bound)), output_chosen_(output_chosen),
        fixed_bytes_(fixed_bytes), row_bytes_(row_bytes) {}

  std::string describe() const override {
    const OnnxGraph& g = *spec_.graph;
    const OnnxInputPlan& in = spec_.input;
    std::string text = "onnx " + g.path() + " (opset " + std::to_string(g.opset()) + ", " + std::to_string(g.node_count()) +
                       " nodes): input '" + g.inputs().front().name + "' [batch, " + ops::to_string(in.row).substr(1) + bound_;
    if (in.nhwc_to_nchw) text += " from stored NHWC [" + std::to_string(in.h) + ", " + std::to_string(in.w) + ", " +
                                 std::to_string(in.c) + "] transposed to NCHW";
    else if (in.stored.size() == 1 && in.row.size() > 1) text += " from stored flat [" + std::to_string(in.stored[0]) + "], read row-major";
    if (!in.mean.empty()) text += ", normalised by --input-mean / --input-std";
    if (in.integer) text += ", " + g.inputs().front().stored_as + ": the stored values as they are";
    if (!in.rounded_to.empty()) text += ", " + in.rounded_to + ": the features rounded to it, computed in float32";
    if (g.inputs().front().stored_as == "double") text += ", float64: computed in float32";
    if (spec_.fixed_batch > 0 && !whole_batch_.empty())
      text += "; " + whole_batch_ + " takes its scale from the whole batch (quantize_dynamic): one example per run, each "
              "quantized on its own range";
    else if (spec_.fixed_batch > 0)
      text += "; the graph holds the batch size the file fixes: " + std::to_string(spec_.fixed_batch) +
              (spec_.fixed_batch == 1 ? " row" : " rows") + " per run, the last padded (export with dynamic_axes=" +
              "{'" + g.inputs().front().name + "': {0: 'batch'}} to run whole batches)";
    text += ", output '" + g.outputs().front().name + "'" + (output_chosen_ ? " (--onnx-output) " : " ") +
            to_string(spec_.output) + " (" + said_ + ")";
    // A model returning (embedding, logits) would be read as a classifier of the embedding's
    // width without a word: say which output is read and name the others.
    if (g.outputs().size() > 1) {
      text += "; eval reads the first of its " + std::to_string(g.outputs().size()) + " outputs (also";
      for (std::size_t k = 1; k < g.outputs().size() && k < 5; ++k) text += (k > 1 ? ", '" : " '") + g.outputs()[k].name + "'";
      text += std::string(g.outputs().size() > 5 ? ", ..." : "") + "): --onnx-output NAME reads another";
    }
    return text;
  }
  int classes() const override { return spec_.classes; }
  std::string takes_stored_values() const override {
    const auto& in = spec_.graph->inputs().front();
    return spec_.input.integer ? "the ONNX model's input '" + in.name + "' is " + in.stored_as : "";
  }

  // Decides the input mapping (kept for the predictors made after it, on every rank alike).
  void check_sample_shape(const Dims& stored, const std::string& data_path) const override {
    OnnxInputPlan& in = spec_.input;
    const Dims& row = in.row;
    in.nhwc_to_nchw = false;
    in.stored = stored;
    if (stored == row) return;
    if (stored.size() == 3 && row.size() == 3 && stored[2] == row[0] && stored[0] == row[1] && stored[1] == row[2]) {
      in.nhwc_to_nchw = true;
      std::tie(in.h, in.w, in.c) = std::tuple{stored[0], stored[1], stored[2]};
      return;
    }
    // [H, W] stored for a [1, H, W] input (shapes that differ by 1-sized dimensions), or any
    // sample flattened for a vector input (an MLP's [784] for [28, 28, 1] images): row-major as stored.
    Dims a, b;
    for (const auto d : stored) if (d != 1) a.push_back(d);
    for (const auto d : row) if (d != 1) b.push_back(d);
    if (a == b || (row.size() == 1 && product(stored) == row[0])) return;
    // Flat samples ([784] as sklearn's MNIST) for a model whose input has at most two
    // dimensions beyond 1 ([1, 28, 28]): row-major is the only reading. With a third (channels
    // beside height and width) HWC and CHW flattenings are both common: refused below.
    if (a.size() == 1 && b.size() <= 2 && a[0] == product(row)) return;
    throw CollectiveError("'" + data_path + "' holds samples of shape " + ops::to_string(stored) + "; the ONNX model '" +
                          spec_.graph->path() + "' takes input '" + spec_.graph->inputs().front().name + "' [batch, " +
                          ops::to_string(row).substr(1) + " (as stored, flattened for a vector input, or NHWC images for an NCHW input)");
  }

  std::unique_ptr<DevicePredictor> make_predictor(const runtime::DeviceInfo& device, std::int64_t max_rows) const override {
    const std::int64_t fixed = spec_.fixed_batch;
    std::unique_ptr<DevicePredictor> inner =
        device.is_host() ? std::make_unique<OnnxPredictor>(spec_, fixed > 0 ? fixed : host_chunk_rows(row_bytes_, max_rows))
                         : make_on_device<OnnxPredictorKind>(device, spec_, fixed > 0 ? fixed : max_rows);
    if (fixed == 0) return inner;
    return std::make_unique<FixedBatchPredictor>(std::move(inner), fixed, product(spec_.input.row), spec_.classes);
  }
  std::int64_t parameter_bytes() const override { return spec_.graph->parameter_floats() * 4; }
  // OnnxPredictor's; a fixed batch's chunks are padded as floats (FixedBatchPredictor).
  bool host_decodes_bytes() const override { return spec_.fixed_batch == 0; }
  // The run's tensors (storage reused by liveness) for one chunk of rows, and the ops'
  // scratch, from trial runs at load.
  std::int64_t workspace_bytes(std::int64_t rows) const override {
    return fixed_bytes_ + host_chunk_rows(row_bytes_, rows) * row_bytes_;
  }

 private:
  mutable OnnxPredictorSpec spec_;  // its input mapping is set by check_sample_shape
  std::string said_, bound_;
  bool output_chosen_ = false;  // --onnx-output named it (the graph keeps that output alone)
  std::string whole_batch_ = whole_batch_node(*spec_.graph);  // run an example at a time for it
  std::int64_t fixed_bytes_, row_bytes_;
};

// What trial runs with 1 and 3 rows show: the classes ([rows, C], other dimensions 1; [rows]
// or [rows, 1] is a binary classifier's one score) and the bytes of the run's tensors, fixed and
// per row (for --dry-run's memory).
struct Trial {
  int classes = 0, width = 0;
  std::int64_t fixed_bytes = 0, row_bytes = 0;
};

// Row 0 of each node's first output in the first trial run, to find where the second run's
// row 0 first differs: a tensor [rows, ...] holds the batch on axis 0.
struct RowTrace {
  std::vector<std::vector<float>> first_row;
  std::string first_difference;  // "node 'NAME' (OP)", or empty
  void observe(int pass, std::int64_t rows, std::size_t node, const ops::OpCall& call) {
    const ops::Tensor& t = *call.out[0];
    const bool batch_first = t.type == ops::ElemType::Float32 && !t.shape.empty() && t.shape[0] == rows;
    if (pass == 0) {
      first_row.resize(node + 1);
      if (batch_first) first_row[node].assign(t.f.begin(), t.f.begin() + t.size() / rows);
      return;
    }
    const std::vector<float>& one = first_row.at(node);
    if (!batch_first || one.empty() || static_cast<std::int64_t>(one.size()) * rows != t.size() || !first_difference.empty()) return;
    if (std::memcmp(one.data(), t.f.data(), one.size() * sizeof(float)) != 0)
      first_difference = "node '" + call.node.name + "' (" + call.node.op + ")";
  }
};

// Two trial runs whose row 0 is the same and whose other rows differ: 1 then 2 rows where the
// batch is free (fixed_batch 0), else fixed_batch rows, the others copies of row 0 (as
// FixedBatchPredictor pads) then other values. Throws spmd::Error for an output that is no
// classifier's, classes that change, or a row 0 whose output changes (rows that mix).
Trial trial_runs(const std::shared_ptr<const OnnxGraph>& graph, const Dims& row, std::int64_t fixed_batch) {
  OnnxRunner runner(graph);
  RowTrace trace;
  std::vector<float> first_output;
  std::int64_t classes = 0, bytes[2] = {0, 0};
  for (const int pass : {0, 1}) {
    const std::int64_t rows = fixed_batch > 0 ? fixed_batch : 1 + 2 * pass;
    Dims shape{rows};
    shape.insert(shape.end(), row.begin(), row.end());
    ops::Tensor& x = runner.input(0);
    // Values in [0, 1) from a fixed LCG (an integer input: 0 or 1, an index any embedding table
    // holds, as any image's byte could be): row 0 the same in both runs.
    const bool integer = graph->inputs().front().type == ops::ElemType::Int64;
    try {
      x.reset(integer ? ops::ElemType::Int64 : ops::ElemType::Float32, shape);
    } catch (const std::exception&) {  // a fixed input size no memory holds (a damaged file)
      throw Error("ONNX model '" + graph->path() + "': its input '" + graph->inputs().front().name + "' " +
                  ops::to_string(shape) + " (a trial batch) needs more memory than this rank can allocate");
    }
    std::uint32_t state = 12345;
    const auto next = [&state] { return (state = state * 1664525u + 1013904223u) >> 8; };
    if (integer) for (auto& v : x.i) v = next() >> 23;
    else for (auto& v : x.f) v = static_cast<float>(next()) * 0x1p-24f;
    const std::int64_t size = product(row);
    if (fixed_batch > 0 && pass == 0)
      for (std::int64_t r = 1; r < rows; ++r) {
        if (integer) std::copy_n(x.i.begin(), size, x.i.begin() + r * size);
        else std::copy_n(x.f.begin(), size, x.f.begin() + r * size);
      }
    // Beside row 0 in the second run, a row of the largest value and one of the smallest (still
    // inputs the first run could have drawn): a statistic over the whole batch (its maximum, its
    // range: x / x.max(), a dynamic quantization's scale) then differs from row 0's alone, which
    // random rows would leave to chance.
    for (std::int64_t r = 1; pass == 1 && r < std::min<std::int64_t>(rows, 3); ++r) {
      if (integer) std::fill_n(x.i.begin() + r * size, size, r == 1 ? 1 : 0);
      else std::fill_n(x.f.begin() + r * size, size, r == 1 ? 0x1.fffffep-1f : 0.0f);
    }
    std::size_t node = 0;
    runner.run([&](const ops::OpCall& call) { trace.observe(pass, rows, node++, call); });
    const ops::Tensor& y = runner.output(0);
    // The classes along one dimension after the batch, the others 1 ([batch, C], [batch, C, 1, 1]
    // after a 1x1 convolution, [batch, 1, C] from a kept class token); none: one score.
    const std::int64_t beyond_one =
        y.shape.empty() ? 0 : std::count_if(y.shape.begin() + 1, y.shape.end(), [](std::int64_t d) { return d != 1; });
    const bool ok = y.type == ops::ElemType::Float32 && !y.shape.empty() && y.shape[0] == rows && beyond_one <= 1;
    const std::int64_t width = ok ? y.size() / rows : 0;
    if (!ok || width < 1)
      throw Error("ONNX model '" + graph->path() + "': output '" + graph->outputs().front().name + "' is " +
                  ops::to_string(y.shape) + " for a batch of " + std::to_string(rows) +
                  "; a classifier gives [batch, classes >= 2] (other dimensions 1, as [batch, classes, 1, 1]), or "
                  "[batch] / [batch, 1]: a binary classifier's one score");
    if (classes && width != classes)
      throw Error("ONNX model '" + graph->path() + "': its classes change with the batch size");
    classes = width;
    const std::size_t per_row = static_cast<std::size_t>(y.size() / rows);
    if (pass == 0) first_output.assign(y.f.begin(), y.f.begin() + static_cast<std::ptrdiff_t>(per_row));
    else if (std::memcmp(first_output.data(), y.f.data(), per_row * sizeof(float)) != 0)
      throw Error("ONNX model '" + graph->path() + "' mixes the rows of a batch: an example's output changes when another "
                  "example shares its batch (first at " + (trace.first_difference.empty() ? "its output" : trace.first_difference) +
                  ": a reduction or normalisation over the batch axis?). "
                  "spmd eval needs each example's result to depend on that example alone, whatever its batch, padding and layout");
    bytes[pass] = runner.tensor_bytes() + ops::scratch_bytes();  // the ops' scratch is per image: fixed
  }
  // classes holds the output's width here: 1 means a binary classifier's score.
  Trial trial{classes == 1 ? 2 : static_cast<int>(classes), static_cast<int>(classes), 0, 0};
  if (fixed_batch > 0) {  // the same whatever the rows asked for, with the chunk's staging
    trial.fixed_bytes = std::max(bytes[0], bytes[1]) + fixed_batch * product(row) * 4;
  } else {
    trial.row_bytes = std::max<std::int64_t>(0, bytes[1] - bytes[0]) / 2;  // 3 rows against 1
    trial.fixed_bytes = std::max<std::int64_t>(0, bytes[0] - trial.row_bytes);
  }
  return trial;
}

// The trials where the batch is free, else (a file whose input fixes its batch, as
// torch.onnx.export writes it without dynamic_axes: often a Reshape holds that number) at the
// batch the file fixes, or one row where a node computes over the whole batch (whole_batch_node);
// fixed_batch says which held (0: free).
Trial load_trials(const std::shared_ptr<const OnnxGraph>& graph, const Dims& row, std::int64_t& fixed_batch) {
  fixed_batch = 0;
  const std::int64_t file_batch = graph->inputs().front().dims.at(0);
  if (file_batch < 1 && !whole_batch_node(*graph).empty()) {
    fixed_batch = 1;
    return trial_runs(graph, row, 1);
  }
  try {
    return trial_runs(graph, row, 0);
  } catch (const std::exception&) {
    if (file_batch < 1) throw;
  }
  Trial trial = trial_runs(graph, row, file_batch);
  fixed_batch = file_batch;
  return trial;
}

}  // namespace

std::string onnx_unsupported_on(const OnnxGraph& graph, const runtime::DeviceInfo& device) {
  if (device.is_host()) return "";
  if (!graph.inputs().empty() && graph.inputs().front().stored_as != "float" && graph.inputs().front().stored_as != "double")
    return "its input '" + graph.inputs().front().name + "' is " + graph.inputs().front().stored_as +
           "; its executor takes float inputs (and the CPU rounds to float16 / bfloat16 ones)";
  const DeviceModels& models = device_models(device);
  if (!models.provides(OnnxSupportKind::name) || !models.provides(OnnxPredictorKind::name))
    return "this " + std::string(device.backend()) + " module runs no ONNX graph (rebuild it with this spmd)";
  return models.factory<OnnxSupportKind>(device.backend())(graph);
}

std::string onnx_file_unsupported_on(const std::string& path, const runtime::DeviceInfo& device,
                                     const std::string& output_name) {
  if (device.is_host()) return "";
  std::shared_ptr<const OnnxGraph> graph;
  try {
    graph = OnnxGraph::load(path, output_name);
  } catch (const std::exception&) {
    return "";
  }
  return onnx_unsupported_on(*graph, device);
}

std::unique_ptr<Classifier> make_onnx_classifier(const std::string& path, const OnnxOutputChoice& choice,
                                                 const OnnxInputNorm& norm, const runtime::DeviceInfo* device,
                                                 const std::function<std::vector<std::int64_t>()>& data_sample_shape) {
  auto graph = OnnxGraph::load(path, choice.name);
  OnnxOutput output = choice.holds;
  if (graph->inputs().size() != 1) {
    std::string names;
    for (std::size_t k = 0; k < graph->inputs().size() && k < 4; ++k) names += (k ? ", '" : "'") + graph->inputs()[k].name + "'";
    if (graph->inputs().size() > 4) names += ", ...";
    // PyTorch's export_params=False leaves every weight an input without a value.
    const std::string no_weights = graph->parameter_floats() == 0 && graph->inputs().size() > 1
                                       ? "; the file holds no weights: exported with export_params=False? (re-export "
                                         "with torch.onnx.export's default, export_params=True)"
                                       : "";
    throw Error("ONNX model '" + path + "' has " + std::to_string(graph->inputs().size()) + " inputs (" + names +
                "); spmd eval feeds one (the features)" + no_weights);
  }
  const auto& in = graph->inputs().front();
  if (in.stored_as == "bool") throw Error("ONNX model '" + path + "': input '" + in.name + "' is bool; spmd eval feeds features");
  const bool integer = in.type == ops::ElemType::Int64;
  if (integer && !(norm.mean.empty() && norm.std.empty()))
    throw Error("ONNX model '" + path + "': input '" + in.name + "' is " + in.stored_as +
                ": it takes the stored values as they are; --input-mean / --input-std do not apply");
  if (in.dims.empty()) throw Error("ONNX model '" + path + "': input '" + in.name + "' has no batch dimension");
  Dims row(in.dims.begin() + 1, in.dims.end());
  std::string bound;  // what the data's sample shape gave the symbolic dimensions, for the start-up line
  if (std::any_of(row.begin(), row.end(), [](std::int64_t d) { return d < 1; })) {
    if (!data_sample_shape) {
      const auto k = std::find_if(row.begin(), row.end(), [](std::int64_t d) { return d < 1; }) - row.begin();
      throw Error("ONNX model '" + path + "': dimension " + std::to_string(k + 1) + " of input '" + in.name +
                  "' is not a fixed size; spmd eval takes it from the data's sample shape");
    }
    const Dims stored = data_sample_shape();
    row = bind_symbolic_dims(row, stored, path, in.name);
    bound = " (its symbolic sizes from the data's samples)";
  }
  std::int64_t fixed_batch = 0;
  const Trial trial = load_trials(graph, row, fixed_batch);
  const int classes = trial.classes;
  std::string said = "as the file says: ";
  const std::string last = graph->output_kind(0);
  const bool binary = trial.width == 1;
  // A probability-giving last op: Softmax over classes, or Sigmoid on a binary classifier's score.
  const std::string gives_probabilities = binary ? "Sigmoid" : "Softmax";
  if (output == OnnxOutput::Auto) {
    output = last == gives_probabilities ? OnnxOutput::Probabilities
             : last == "LogSoftmax" && !binary ? OnnxOutput::LogProbabilities : OnnxOutput::Logits;
    said += output != OnnxOutput::Logits ? "the graph ends in " + last
                                         : "the graph ends in " + (last.empty() ? std::string("a constant") : last) + ": logits";
  } else {
    said = "--model-output";
  }
  if (binary) said += "; one score per example: a binary classifier, the score is class 1's, class 0 its complement";
  OnnxPredictorSpec spec{graph, plan_normalisation(norm, row, path), output, classes, trial.width, fixed_batch};
  spec.input.integer = integer;
  if (in.stored_as == "float16" || in.stored_as == "bfloat16") spec.input.rounded_to = in.stored_as;
  if (device != nullptr && !device->is_host()) {
    const std::string why = onnx_unsupported_on(*graph, *device);
    if (!why.empty())
      throw Error("ONNX model '" + path + "' cannot run on the " + std::string(device->backend()) + " backend: " + why +
                  ". Run it with --backend cpu (or auto, which then takes the CPU)");
  }
  return std::make_unique<OnnxClassifier>(std::move(spec), said, bound, !choice.name.empty(), trial.fixed_bytes,
                                          trial.row_bytes);
}

}  // namespace spmd::models
