#include "onnx_fusion.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace spmd::models {

namespace {

using ops::ElemType;
using ops::GraphNode;
using ops::Tensor;

class Fuser {
 public:
  explicit Fuser(GraphDraft d) : d_(d) {}

  void run() {
    count_readers();
    for (std::size_t n = 0; n < d_.nodes.size(); ++n) {
      GraphNode& node = d_.nodes[n];
      if (node.op == "Gemm") untranspose_gemm_weights(node);
      if (node.op == "Erf") fuse_gelu(n);
      if (node.op == "DequantizeLinear") fuse_quantize_dequantize(n);
      GraphNode* producer = sole_producer(node);
      if (!producer) continue;
      if (node.op == "BatchNormalization" && producer->op != "Add" && fold_batch_norm(*producer, node))
        absorb(*producer, n);
      else if (node.op == "Relu" && producer->attrs.i("spmd_relu", 0) == 0) {
        producer->attrs.ints["spmd_relu"] = 1;
        absorb(*producer, n);
      }
    }
    drop_unread_nodes();
    std::vector<GraphNode> nodes;
    std::vector<ops::GraphOpFn> fns;
    for (std::size_t n = 0; n < d_.nodes.size(); ++n)
      if (!removed_[n]) {
        nodes.push_back(std::move(d_.nodes[n]));
        fns.push_back(d_.fns[n]);
      }
    d_.nodes = std::move(nodes);
    d_.fns = std::move(fns);
  }

 private:
  void count_readers() {
    readers_.assign(d_.constant.size(), 0);
    producer_.assign(d_.constant.size(), -1);
    for (std::size_t n = 0; n < d_.nodes.size(); ++n) {
      for (const int k : d_.nodes[n].inputs)
        if (k >= 0) ++readers_[static_cast<std::size_t>(k)];
      for (const int k : d_.nodes[n].outputs) producer_[static_cast<std::size_t>(k)] = static_cast<int>(n);
    }
    for (const int k : d_.outputs) ++readers_[static_cast<std::size_t>(k)];
    removed_.assign(d_.nodes.size(), false);
  }

  // A node none of whose results reaches a graph output does not run (the outputs eval does not
  // read when one is chosen: OnnxGraph::load). The nodes are in execution order: one pass back.
  void drop_unread_nodes() {
    std::vector<char> needed(d_.constant.size(), 0);
    for (const int k : d_.outputs) needed[static_cast<std::size_t>(k)] = 1;
    for (std::size_t n = d_.nodes.size(); n-- > 0;) {
      if (removed_[n]) continue;
      const GraphNode& node = d_.nodes[n];
      if (std::none_of(node.outputs.begin(), node.outputs.end(),
                       [&](int k) { return k >= 0 && needed[static_cast<std::size_t>(k)]; })) {
        removed_[n] = true;
        continue;
      }
      for (const int k : node.inputs)
        if (k >= 0) needed[static_cast<std::size_t>(k)] = 1;
    }
  }

  // QuantizeLinear -> DequantizeLinear with the same scale, zero point and axis (the pairs
  // quantize_static writes on every activation): the DequantizeLinear reads the float values and
  // quantizes them itself (attribute spmd_quantize_first, the type in spmd_to), one pass with
  // the same bits instead of an int64 tensor written and read.
  // PyTorch's exports put a Cast to the quantized type between the two (a no-op): it goes too.
  void fuse_quantize_dequantize(std::size_t n) {
    GraphNode& dq = d_.nodes[n];
    if (dq.inputs.size() < 2 || dq.inputs[0] < 0) return;
    const int cast_at = sole_producer_of(dq.inputs[0], "Cast");
    const int q_at = sole_producer_of(cast_at < 0 ? dq.inputs[0] : d_.nodes[static_cast<std::size_t>(cast_at)].inputs.at(0),
                                      "QuantizeLinear");
    if (q_at < 0) return;
    const GraphNode& q = d_.nodes[static_cast<std::size_t>(q_at)];
    if (q.inputs.size() != dq.inputs.size() || q.attrs.i("spmd_to", 0) == 0) return;
    if (cast_at >= 0 && d_.nodes[static_cast<std::size_t>(cast_at)].attrs.i("to", 0) != q.attrs.i("spmd_to", 0)) return;
    for (std::size_t k = 1; k < q.inputs.size(); ++k)
      if (!same_values(q.inputs[k], dq.inputs[k])) return;
    if (q.attrs.i("axis", 1) != dq.attrs.i("axis", 1) || q.attrs.i("block_size", 0) != 0 || q.opset != dq.opset) return;
    dq.attrs.ints["spmd_quantize_first"] = 1;
    dq.attrs.ints["spmd_to"] = q.attrs.i("spmd_to", 0);
    dq.inputs[0] = q.inputs[0];
    for (std::size_t k = 1; k < q.inputs.size(); ++k)
      if (q.inputs[k] >= 0) --readers_[static_cast<std::size_t>(q.inputs[k])];
    removed_[static_cast<std::size_t>(q_at)] = true;
    if (cast_at >= 0) removed_[static_cast<std::size_t>(cast_at)] = true;
  }

  // The node of kind `op` (one input, one output) that makes tensor t, which nothing else reads; else -1.
  int sole_producer_of(int t, const char* op) const {
    if (t < 0 || readers_[static_cast<std::size_t>(t)] != 1) return -1;
    const int at = producer_[static_cast<std::size_t>(t)];
    if (at < 0 || removed_[static_cast<std::size_t>(at)]) return -1;
    const GraphNode& node = d_.nodes[static_cast<std::size_t>(at)];
    return node.op == op && node.outputs.size() == 1 && !node.inputs.empty() && node.inputs[0] >= 0 ? at : -1;
  }

  // The same slot, or two constants holding the same values.
  bool same_values(int a, int b) const {
    if (a == b) return true;
    if (a < 0 || b < 0) return false;
    const auto ua = static_cast<std::size_t>(a), ub = static_cast<std::size_t>(b);
    if (!d_.constant[ua] || !d_.constant[ub]) return false;
    const Tensor &x = d_.values[ua], &y = d_.values[ub];
    return x.type == y.type && x.shape == y.shape && x.f == y.f && x.i == y.i;
  }

  // The Conv, Gemm or Add whose single output only `node` reads (as its first input), if any.
  GraphNode* sole_producer(const GraphNode& node) {
    if (node.inputs.empty() || node.inputs[0] < 0) return nullptr;
    const auto t = static_cast<std::size_t>(node.inputs[0]);
    if (readers_[t] != 1 || producer_[t] < 0) return nullptr;
    GraphNode& p = d_.nodes[static_cast<std::size_t>(producer_[t])];
    if ((p.op != "Conv" && p.op != "Gemm" && p.op != "Add") || p.outputs.size() != 1) return nullptr;
    return &p;
  }

  // node (at index n) disappears: the producer writes node's output instead of its own.
  void absorb(GraphNode& producer, std::size_t n) {
    producer.outputs[0] = d_.nodes[n].outputs.at(0);
    producer_[static_cast<std::size_t>(producer.outputs[0])] = static_cast<int>(&producer - d_.nodes.data());
    removed_[n] = true;
  }

  const Tensor* constant_input(const GraphNode& node, std::size_t k) const {
    if (k >= node.inputs.size() || node.inputs[k] < 0) return nullptr;
    const auto t = static_cast<std::size_t>(node.inputs[k]);
    return d_.constant[t] && d_.values[t].type == ElemType::Float32 ? &d_.values[t] : nullptr;
  }

  // Input k of node now reads slot `to`; a constant nothing reads any more gives its storage
  // back (its slot stays, empty).
  void replace_input(GraphNode& node, std::size_t k, int to) {
    const int from = node.inputs[k];
    node.inputs[k] = to;
    ++readers_[static_cast<std::size_t>(to)];
    if (from < 0) return;
    const auto f = static_cast<std::size_t>(from);
    if (--readers_[f] == 0 && d_.constant[f]) d_.values[f] = Tensor{};
  }

  int add_constant(Tensor t) {
    d_.constant.push_back(true);
    d_.values.push_back(std::move(t));
    readers_.push_back(0);  // replace_input counts the reader
    producer_.push_back(-1);
    return static_cast<int>(d_.constant.size() - 1);
  }

  // Gemm with a constant B and transB = 1: B stored as [K, N] once instead of transposed at
  // every call.
  void untranspose_gemm_weights(GraphNode& gemm) {
    const Tensor* b = constant_input(gemm, 1);
    if (!b || b->shape.size() != 2 || gemm.attrs.i("transB", 0) == 0) return;
    const std::int64_t n = b->shape[0], k = b->shape[1];
    Tensor t;
    t.reset(ElemType::Float32, {k, n});
    for (std::int64_t r = 0; r < n; ++r)
      for (std::int64_t c = 0; c < k; ++c) t.f[static_cast<std::size_t>(c * n + r)] = b->f[static_cast<std::size_t>(r * k + c)];
    replace_input(gemm, 1, add_constant(std::move(t)));
    gemm.attrs.ints["transB"] = 0;
  }

  // BatchNormalization (inference, constant statistics) after a Conv or Gemm with constant
  // weights: y = (P - mean) * a + bias with a = scale / sqrt(var + epsilon) per channel, that
  // is weights * a and bias' = (bias_P - mean) * a + bias. False (nothing changed) otherwise.
  bool fold_batch_norm(GraphNode& p, const GraphNode& bn) {
    if (bn.outputs.size() != 1 || bn.attrs.i("training_mode", 0) != 0 || bn.inputs.size() < 5) return false;
    const Tensor *scale = constant_input(bn, 1), *shift = constant_input(bn, 2), *mean = constant_input(bn, 3),
                 *var = constant_input(bn, 4), *w = constant_input(p, 1);
    if (!scale || !shift || !mean || !var || !w || w->shape.size() < 2) return false;
    const bool gemm = p.op == "Gemm";
    if (gemm && (w->shape.size() != 2 || p.attrs.i("transA", 0) != 0)) return false;
    const bool columns = gemm && p.attrs.i("transB", 0) == 0;  // B [K, N]: channel = column
    const std::int64_t channels = columns ? w->shape[1] : w->shape[0];
    for (const Tensor* t : {scale, shift, mean, var})
      if (t->size() != channels) return false;
    const Tensor* old_bias = p.inputs.size() > 2 && p.inputs[2] >= 0 ? constant_input(p, 2) : nullptr;
    if (p.inputs.size() > 2 && p.inputs[2] >= 0 && (!old_bias || (old_bias->size() != channels && old_bias->size() != 1)))
      return false;
    const float eps = bn.attrs.f("epsilon", 1e-5f);
    const float alpha = gemm ? p.attrs.f("alpha", 1.0f) : 1.0f, beta = gemm ? p.attrs.f("beta", 1.0f) : 1.0f;
    Tensor weights = *w, bias;
    bias.reset(ElemType::Float32, {channels});
    const std::int64_t per_channel = w->size() / channels;
    for (std::int64_t c = 0; c < channels; ++c) {
      const auto u = static_cast<std::size_t>(c);
      const float a = scale->f[u] / std::sqrt(var->f[u] + eps);
      for (std::int64_t e = 0; e < per_channel; ++e)
        weights.f[static_cast<std::size_t>(columns ? e * channels + c : c * per_channel + e)] *= alpha * a;
      const float b0 = old_bias ? beta * old_bias->f[old_bias->size() == 1 ? 0 : u] : 0.0f;
      bias.f[u] = (b0 - mean->f[u]) * a + shift->f[u];
    }
    replace_input(p, 1, add_constant(std::move(weights)));
    if (p.inputs.size() < 3) p.inputs.resize(3, -1);
    replace_input(p, 2, add_constant(std::move(bias)));
    if (gemm) {
      p.attrs.floats["alpha"] = 1.0f;
      p.attrs.floats["beta"] = 1.0f;
    }
    return true;
  }

  // A scalar float constant input of node, or nullptr.
  const float* scalar_input(const GraphNode& node, std::size_t k) const {
    const Tensor* t = constant_input(node, k);
    return t && t->size() == 1 ? &t->f[0] : nullptr;
  }

  // The node that alone reads tensor t (not a graph output), or -1.
  int sole_reader(int t) const {
    if (t < 0 || readers_[static_cast<std::size_t>(t)] != 1) return -1;
    for (std::size_t n = 0; n < d_.nodes.size(); ++n)
      if (!removed_[n] && std::find(d_.nodes[n].inputs.begin(), d_.nodes[n].inputs.end(), t) != d_.nodes[n].inputs.end())
        return static_cast<int>(n);
    return -1;
  }

  // GELU as PyTorch exports it, Mul(Mul(x, Add(Erf(Div(x, d)), a)), h) (operands of Add and
  // the Muls in either order), becomes one Gelu node computing the same expression in the same
  // order: one pass over the tensor instead of five.
  void fuse_gelu(std::size_t e) {
    const GraphNode& erf = d_.nodes[e];
    const int div_at = erf.inputs.empty() || erf.inputs[0] < 0 ? -1 : producer_[static_cast<std::size_t>(erf.inputs[0])];
    if (div_at < 0 || readers_[static_cast<std::size_t>(erf.inputs[0])] != 1) return;
    const GraphNode& div = d_.nodes[static_cast<std::size_t>(div_at)];
    const float* d = div.op == "Div" && div.inputs.size() == 2 ? scalar_input(div, 1) : nullptr;
    const int add_at = sole_reader(erf.outputs[0]);
    if (!d || add_at < 0 || d_.nodes[static_cast<std::size_t>(add_at)].op != "Add") return;
    const GraphNode& add = d_.nodes[static_cast<std::size_t>(add_at)];
    const float* a = scalar_input(add, add.inputs[0] == erf.outputs[0] ? 1 : 0);
    const int mul_at = sole_reader(add.outputs[0]);
    if (!a || mul_at < 0 || d_.nodes[static_cast<std::size_t>(mul_at)].op != "Mul") return;
    const GraphNode& mul = d_.nodes[static_cast<std::size_t>(mul_at)];
    const int x = div.inputs[0];
    if (mul.inputs.size() != 2 || mul.inputs[mul.inputs[0] == add.outputs[0] ? 1 : 0] != x) return;
    const int half_at = sole_reader(mul.outputs[0]);
    if (half_at < 0 || d_.nodes[static_cast<std::size_t>(half_at)].op != "Mul") return;
    GraphNode& half = d_.nodes[static_cast<std::size_t>(half_at)];
    const float* h = scalar_input(half, half.inputs[0] == mul.outputs[0] ? 1 : 0);
    const ops::GraphOpFn gelu = ops::find_graph_op("Gelu");
    // Only GELU's own constants: another executor (the CUDA one) computes a Gelu node as GELU.
    if (!h || !gelu || std::fabs(*d - 1.41421356f) > 1e-6f || *a != 1.0f || *h != 0.5f) return;
    const float divisor = *d, addend = *a, factor = *h;
    for (const int at : {div_at, static_cast<int>(e), add_at, mul_at}) removed_[static_cast<std::size_t>(at)] = true;
    --readers_[static_cast<std::size_t>(x)];  // read by Div and the first Mul before, by Gelu now
    const int out = half.outputs[0];
    half = GraphNode{"Gelu", half.name, half.opset, {}, {x}, {out}};
    half.attrs.floats = {{"spmd_divisor", divisor}, {"spmd_addend", addend}, {"spmd_factor", factor}};
    d_.fns[static_cast<std::size_t>(half_at)] = gelu;
  }

  GraphDraft d_;
  std::vector<int> readers_, producer_;
  std::vector<bool> removed_;
};

}  // namespace

void fuse_for_inference(GraphDraft draft) { Fuser(draft).run(); }

}  // namespace spmd::models
