// Recurrent graph ops: LSTM, GRU and RNN as ONNX defines them (opsets 7 to 14): forward, reverse
// or bidirectional; the optional inputs B, sequence_lens, initial_h, initial_c and P (peepholes)
// and outputs Y, Y_h, Y_c; layout 1 (batch first, opset 14); activations with their alpha / beta,
// clip, GRU's linear_before_reset, LSTM's input_forget.
//
// Each direction projects every step's input in one GEMM (X W^T + bias, all steps and batch
// rows at once), then steps through time with one GEMM of the hidden states by R^T per step
// (two for a GRU whose reset gate applies before R). The batch is X's axis 1 (axis 0 under
// layout 1); a batch row is the same bits whichever rows share its batch because the CPU
// backend's GEMMs reduce every output row in an order fixed by k alone, whatever m is, and the
// gates' element-wise arithmetic runs row by row, the same loop for every row.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>
#include <vector>

#include "spmd/models/cnn_kernels.hpp"
#include "spmd/ops/graph_op.hpp"
#include "vector_math.hpp"

namespace spmd::ops {
namespace {

const models::cnn_cpu::Kernels& kernels() {
  return models::cnn_cpu::kernels_for(models::cnn_cpu::resolve_isa(models::cnn_cpu::Isa::Auto));
}

enum class Fn { Sigmoid, Tanh, Relu, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign, Softplus };

struct Activation {
  Fn fn = Fn::Sigmoid;
  float alpha = 0.0f, beta = 0.0f;
};

// ONNX's RNN activation functions: how many of activation_alpha / activation_beta each takes
// (0: none, 1: alpha, 2: alpha and beta), and the defaults ONNX Runtime uses when they run out.
struct FnInfo {
  const char* name;  // lower case: the attribute is matched case-insensitively
  Fn fn;
  int params;
  float alpha, beta;
};
constexpr FnInfo kFns[] = {
    {"sigmoid", Fn::Sigmoid, 0, 0.0f, 0.0f},           {"tanh", Fn::Tanh, 0, 0.0f, 0.0f},
    {"relu", Fn::Relu, 0, 0.0f, 0.0f},                 {"affine", Fn::Affine, 2, 1.0f, 0.0f},
    {"leakyrelu", Fn::LeakyRelu, 1, 0.01f, 0.0f},      {"thresholdedrelu", Fn::ThresholdedRelu, 1, 1.0f, 0.0f},
    {"scaledtanh", Fn::ScaledTanh, 2, 1.0f, 1.0f},     {"hardsigmoid", Fn::HardSigmoid, 2, 0.2f, 0.5f},
    {"elu", Fn::Elu, 1, 1.0f, 0.0f},                   {"softsign", Fn::Softsign, 0, 0.0f, 0.0f},
    {"softplus", Fn::Softplus, 0, 0.0f, 0.0f},
};

// In place over n values; the switch is outside the loops so that each loop vectorises.
void apply(const Activation& a, float* v, std::int64_t n) {
  const float al = a.alpha, be = a.beta;
  switch (a.fn) {
    case Fn::Sigmoid: map_floats(v, v, n, [](float x) { return fast_sigmoid(x); }); break;
    case Fn::Tanh: map_floats(v, v, n, [](float x) { return fast_tanh(x); }); break;
    case Fn::Relu: for (std::int64_t k = 0; k < n; ++k) v[k] = std::max(v[k], 0.0f); break;
    case Fn::Affine: for (std::int64_t k = 0; k < n; ++k) v[k] = al * v[k] + be; break;
    case Fn::LeakyRelu: for (std::int64_t k = 0; k < n; ++k) v[k] = v[k] >= 0.0f ? v[k] : al * v[k]; break;
    case Fn::ThresholdedRelu: for (std::int64_t k = 0; k < n; ++k) v[k] = v[k] > al ? v[k] : 0.0f; break;
    case Fn::ScaledTanh: for (std::int64_t k = 0; k < n; ++k) v[k] = al * std::tanh(be * v[k]); break;
    case Fn::HardSigmoid: for (std::int64_t k = 0; k < n; ++k) v[k] = std::clamp(al * v[k] + be, 0.0f, 1.0f); break;
    case Fn::Elu: for (std::int64_t k = 0; k < n; ++k) v[k] = v[k] >= 0.0f ? v[k] : al * (std::exp(v[k]) - 1.0f); break;
    case Fn::Softsign: for (std::int64_t k = 0; k < n; ++k) v[k] = v[k] / (1.0f + std::fabs(v[k])); break;
    case Fn::Softplus:  // log(1 + e^x), which is x in float32 beyond 20 (and e^x would overflow later)
      for (std::int64_t k = 0; k < n; ++k) v[k] = v[k] > 20.0f ? v[k] : std::log1p(std::exp(v[k]));
      break;
  }
}

enum class Cell { Rnn, Gru, Lstm };

struct CellInfo {
  int gates;      // blocks of hidden_size rows in W and R: 1, 3 (z r h), 4 (i o f c)
  int functions;  // activations per direction: f; f g; f g h
  std::vector<std::string> defaults;
};
CellInfo info_of(Cell cell) {
  if (cell == Cell::Lstm) return {4, 3, {"Sigmoid", "Tanh", "Tanh"}};
  if (cell == Cell::Gru) return {3, 2, {"Sigmoid", "Tanh"}};
  return {1, 1, {"Tanh"}};
}

// The activations of every direction, in order (forward's, then reverse's), alpha and beta taken
// from their lists in turn by the functions that have them.
std::vector<Activation> activations(const OpCall& c, const CellInfo& cell, std::int64_t dirs) {
  const Attrs& at = c.node.attrs;
  const auto listed = at.string_lists.find("activations");
  const std::vector<std::string> names = listed == at.string_lists.end() ? cell.defaults : listed->second;
  const auto per_dir = static_cast<std::size_t>(cell.functions);
  if (names.size() != per_dir && names.size() != per_dir * static_cast<std::size_t>(dirs))
    c.fail("activations lists " + std::to_string(names.size()) + " functions; it takes " + std::to_string(per_dir) +
           " per direction");
  const auto floats = [&](const char* name) {
    const auto it = at.tensors.find(name);
    return it == at.tensors.end() ? FloatBuffer{} : it->second.f;
  };
  const FloatBuffer alphas = floats("activation_alpha"), betas = floats("activation_beta");
  std::size_t next_alpha = 0, next_beta = 0;
  std::vector<Activation> acts;
  for (const auto& name : names) {
    std::string lower = name;
    for (auto& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    const auto* info = std::find_if(std::begin(kFns), std::end(kFns), [&](const FnInfo& f) { return lower == f.name; });
    if (info == std::end(kFns))
      c.fail("activation '" + name + "' is not one spmd runs (Sigmoid, Tanh, Relu, Affine, LeakyRelu, ThresholdedRelu, "
             "ScaledTanh, HardSigmoid, Elu, Softsign, Softplus)");
    Activation a{info->fn, info->alpha, info->beta};
    if (info->params >= 1 && next_alpha < alphas.size()) a.alpha = alphas[next_alpha++];
    if (info->params >= 2 && next_beta < betas.size()) a.beta = betas[next_beta++];
    acts.push_back(a);
  }
  if (acts.size() == per_dir && dirs == 2) acts.insert(acts.end(), acts.begin(), acts.end());  // one set for both
  return acts;
}

// The node's sizes, its inputs checked against them.
struct Dims {
  std::int64_t seq = 0, batch = 0, input = 0, hidden = 0, dirs = 1, gates = 1;
  bool batch_first = false;  // layout 1
  bool reverse_only = false;
  std::int64_t gh() const { return gates * hidden; }
  std::vector<std::int64_t> state_shape() const {
    return batch_first ? std::vector<std::int64_t>{batch, dirs, hidden} : std::vector<std::int64_t>{dirs, batch, hidden};
  }
};

Dims check_shapes(const OpCall& c, Cell cell) {
  const Tensor& x = c.float_input(0);
  const Tensor& r = c.float_input(2);
  const Attrs& at = c.node.attrs;
  Dims d;
  const std::int64_t layout = at.i("layout", 0);
  if (layout != 0 && layout != 1) c.fail("layout " + std::to_string(layout) + " is neither 0 nor 1");
  d.batch_first = layout == 1;
  if (x.shape.size() != 3)
    c.fail("X " + to_string(x.shape) + " is not 3-D: " +
           (d.batch_first ? "[batch_size, seq_length, input_size]" : "[seq_length, batch_size, input_size]"));
  d.seq = x.shape[d.batch_first ? 1 : 0];
  d.batch = x.shape[d.batch_first ? 0 : 1];
  d.input = x.shape[2];
  const std::string direction = at.s("direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    c.fail("direction '" + direction + "' is not forward, reverse or bidirectional");
  d.dirs = direction == "bidirectional" ? 2 : 1;
  d.reverse_only = direction == "reverse";
  if (at.i("input_forget", 0) != 0 && cell != Cell::Lstm) c.fail("input_forget is an LSTM attribute");
  if (r.shape.size() != 3) c.fail("R " + to_string(r.shape) + " is not 3-D");
  d.hidden = at.i("hidden_size", r.shape[2]);
  d.gates = info_of(cell).gates;
  const auto expect = [&](std::size_t k, const char* name, const std::vector<std::int64_t>& shape) {
    if (k > 2 && !c.has_input(k)) return;  // the optional inputs
    const Tensor& t = k == 4 ? c.input(k) : c.float_input(k);
    const bool flat = k == 4;  // sequence_lens: only its count matters
    if (flat ? t.size() != d.batch : t.shape != shape)
      c.fail(std::string(name) + " " + to_string(t.shape) + " should be " + to_string(shape) + " (hidden_size " +
             std::to_string(d.hidden) + ", " + std::to_string(d.dirs) + " direction(s), batch " + std::to_string(d.batch) + ")");
  };
  expect(1, "W", {d.dirs, d.gh(), d.input});
  expect(2, "R", {d.dirs, d.gh(), d.hidden});
  expect(3, "B", {d.dirs, 2 * d.gh()});
  expect(4, "sequence_lens", {d.batch});
  expect(5, "initial_h", d.state_shape());
  if (cell == Cell::Lstm) {
    expect(6, "initial_c", d.state_shape());
    expect(7, "P", {d.dirs, 3 * d.hidden});
  }
  return d;
}

// The per-call working set, carved from one scratch buffer that keeps its capacity: nothing is
// allocated per time step, nor per call once the largest shape has run.
struct Work {
  float* wt;     // W^T of one direction [input, G*H]
  float* rt;     // R^T [H, G*H]
  float* bias;   // the input projection's bias [G*H]: Wb + Rb (GRU's h gate: Wbh, + Rbh unless linear_before_reset)
  float* proj;   // X W^T + bias for every step and batch row [seq * batch, G*H], in X's row order
  float* gates;  // one step's H R^T [batch, G*H]
  float* h;      // hidden state [batch, H]
  float* c;      // cell state [batch, H] (LSTM)
  float* rh;     // r (.) H [batch, H] (GRU without linear_before_reset)
};

Work carve(const Dims& d) {
  const std::int64_t gh = d.gh();
  const std::int64_t sizes[] = {d.input * gh, d.hidden * gh, gh, d.seq * d.batch * gh, d.batch * gh,
                                d.batch * d.hidden, d.batch * d.hidden, d.batch * d.hidden};
  std::int64_t total = 0;
  for (const auto s : sizes) total += s;
  FloatBuffer& buf = scratch(Scratch::Recurrent, total);
  float* p[8];
  float* next = buf.data();
  for (int k = 0; k < 8; ++k) {
    p[k] = next;
    next += sizes[k];
  }
  return {p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]};
}

// [rows, cols] -> [cols, rows].
void transpose(const float* src, std::int64_t rows, std::int64_t cols, float* dst) {
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t k = 0; k < cols; ++k) dst[k * rows + r] = src[r * cols + k];
}

// Adds the step's input projection p to the recurrent product g and clips (when clip > 0).
void pre_activation(float* g, const float* p, std::int64_t n, float clip) {
  for (std::int64_t k = 0; k < n; ++k) g[k] += p[k];
  if (clip > 0.0f)
    for (std::int64_t k = 0; k < n; ++k) g[k] = std::clamp(g[k], -clip, clip);
}

void clip_values(float* g, std::int64_t n, float clip) {
  if (clip > 0.0f)
    for (std::int64_t k = 0; k < n; ++k) g[k] = std::clamp(g[k], -clip, clip);
}

// One batch row of one LSTM step: gates g [i o f c] (H R^T on entry), its projection p, the
// states h and c updated in place; peep [i o f] or nullptr; act: f, g, h.
void lstm_row(float* g, const float* p, float* h, float* c, const float* peep, const Activation* act, std::int64_t n,
              float clip, bool input_forget) {
  float *gi = g, *go = g + n, *gf = g + 2 * n, *gc = g + 3 * n;
  for (std::int64_t k = 0; k < 4 * n; ++k) g[k] += p[k];
  if (peep)
    for (std::int64_t k = 0; k < n; ++k) {
      gi[k] += peep[k] * c[k];
      gf[k] += peep[2 * n + k] * c[k];
    }
  clip_values(gi, n, clip);
  clip_values(gf, n, clip);
  clip_values(gc, n, clip);
  apply(act[0], gi, n);
  if (input_forget)  // the forget gate coupled to the input gate, as ONNX Runtime computes it
    for (std::int64_t k = 0; k < n; ++k) gf[k] = 1.0f - gi[k];
  else
    apply(act[0], gf, n);
  apply(act[1], gc, n);
  for (std::int64_t k = 0; k < n; ++k) c[k] = gf[k] * c[k] + gi[k] * gc[k];
  if (peep)
    for (std::int64_t k = 0; k < n; ++k) go[k] += peep[n + k] * c[k];
  clip_values(go, n, clip);
  apply(act[0], go, n);
  std::copy_n(c, n, h);
  apply(act[2], h, n);
  for (std::int64_t k = 0; k < n; ++k) h[k] *= go[k];
}

struct Node {  // what a direction's run reads besides its Work
  const OpCall& call;
  Cell cell;
  const Dims& d;
  const Activation* act;  // this direction's
  float clip;
  bool linear_before_reset, input_forget;
};

void gemm(int m, int n, int k, const float* a, long lda, const float* b, long ldb, float* c, long ldc, const float* bias) {
  kernels().gemm(false, m, n, k, a, lda, b, ldb, c, ldc, false, {bias, false});
}

// This direction's weights transposed for the GEMMs, the projection's bias, the projection of
// every step, and the states from initial_h / initial_c (zeros without).
void prepare(const Node& nd, std::int64_t dir, const Work& w) {
  const OpCall& c = nd.call;
  const Dims& d = nd.d;
  const std::int64_t gh = d.gh(), n = d.hidden;
  transpose(c.float_input(1).f.data() + dir * gh * d.input, gh, d.input, w.wt);
  transpose(c.float_input(2).f.data() + dir * gh * n, gh, n, w.rt);
  std::fill_n(w.bias, gh, 0.0f);
  if (c.has_input(3)) {
    const float* wb = c.float_input(3).f.data() + dir * 2 * gh;
    const float* rb = wb + gh;
    const bool gru_h_apart = nd.cell == Cell::Gru && nd.linear_before_reset;
    for (std::int64_t k = 0; k < gh; ++k) w.bias[k] = gru_h_apart && k >= 2 * n ? wb[k] : wb[k] + rb[k];
  }
  const Tensor& x = c.float_input(0);
  gemm(static_cast<int>(d.seq * d.batch), static_cast<int>(gh), static_cast<int>(d.input), x.f.data(), d.input, w.wt, gh,
       w.proj, gh, w.bias);
  const auto load = [&](std::size_t k, float* state) {
    for (std::int64_t b = 0; b < d.batch; ++b) {
      const std::int64_t at = d.batch_first ? (b * d.dirs + dir) * n : (dir * d.batch + b) * n;
      if (c.has_input(k)) std::copy_n(c.float_input(k).f.data() + at, n, state + b * n);
      else std::fill_n(state + b * n, n, 0.0f);
    }
  };
  load(5, w.h);
  if (nd.cell == Cell::Lstm) load(6, w.c);
}

// GRU's update gate z and reset gate r of one row (H R^T's first 2H columns on entry).
void gru_zr(const Node& nd, float* g, const float* p) {
  pre_activation(g, p, 2 * nd.d.hidden, nd.clip);
  apply(nd.act[0], g, 2 * nd.d.hidden);
}

// GRU's candidate and new state of one row; gh holds (r (.) H) Rh^T, or H Rh^T when
// linear_before_reset.
void gru_h(const Node& nd, float* g, const float* p, float* h, const float* rbh) {
  const std::int64_t n = nd.d.hidden;
  float *z = g, *r = g + n, *gh = g + 2 * n;
  const float* ph = p + 2 * n;
  if (nd.linear_before_reset)
    for (std::int64_t k = 0; k < n; ++k) gh[k] = ph[k] + r[k] * (gh[k] + (rbh ? rbh[k] : 0.0f));
  else
    for (std::int64_t k = 0; k < n; ++k) gh[k] += ph[k];
  clip_values(gh, n, nd.clip);
  apply(nd.act[1], gh, n);
  for (std::int64_t k = 0; k < n; ++k) h[k] = (1.0f - z[k]) * gh[k] + z[k] * h[k];
}

// The row of X (and of the projection) holding step t of batch row b.
std::int64_t x_row(const Dims& d, std::int64_t t, std::int64_t b) { return d.batch_first ? b * d.seq + t : t * d.batch + b; }

// Steps one direction through time; each batch row stops after its sequence_lens steps (a
// reverse run starts at its own last step), and Y gets every step's hidden state.
void run_direction(const Node& nd, std::int64_t dir, bool reverse, const std::vector<std::int64_t>& lens, const Work& w,
                   Tensor& y) {
  const OpCall& c = nd.call;
  const Dims& d = nd.d;
  const std::int64_t gh = d.gh(), n = d.hidden;
  const float* peep = nd.cell == Cell::Lstm && c.has_input(7) ? c.float_input(7).f.data() + dir * 3 * n : nullptr;
  const float* rbh = nd.cell == Cell::Gru && nd.linear_before_reset && c.has_input(3)
                         ? c.float_input(3).f.data() + dir * 2 * gh + gh + 2 * n : nullptr;
  const bool reset_first = nd.cell == Cell::Gru && !nd.linear_before_reset;  // r (.) H before Rh: two GEMMs
  const int m = static_cast<int>(d.batch), hn = static_cast<int>(n);
  for (std::int64_t i = 0; i < d.seq; ++i) {
    const auto step_of = [&](std::int64_t b) -> std::int64_t {
      const std::int64_t len = lens.empty() ? d.seq : lens[static_cast<std::size_t>(b)];
      return i >= len ? -1 : reverse ? len - 1 - i : i;
    };
    gemm(m, static_cast<int>(reset_first ? 2 * n : gh), hn, w.h, n, w.rt, gh, w.gates, gh, nullptr);
    if (reset_first) {
      for (std::int64_t b = 0; b < d.batch; ++b) {
        const std::int64_t t = step_of(b);
        float *g = w.gates + b * gh, *rh = w.rh + b * n;
        if (t < 0) {
          std::fill_n(rh, n, 0.0f);
          continue;
        }
        gru_zr(nd, g, w.proj + x_row(d, t, b) * gh);
        for (std::int64_t k = 0; k < n; ++k) rh[k] = g[n + k] * w.h[b * n + k];
      }
      gemm(m, hn, hn, w.rh, n, w.rt + 2 * n, gh, w.gates + 2 * n, gh, nullptr);
    }
    for (std::int64_t b = 0; b < d.batch; ++b) {
      const std::int64_t t = step_of(b);
      if (t < 0) continue;
      float *g = w.gates + b * gh, *h = w.h + b * n;
      const float* p = w.proj + x_row(d, t, b) * gh;
      if (nd.cell == Cell::Lstm) {
        lstm_row(g, p, h, w.c + b * n, peep, nd.act, n, nd.clip, nd.input_forget);
      } else if (nd.cell == Cell::Gru) {
        if (!reset_first) gru_zr(nd, g, p);
        gru_h(nd, g, p, h, rbh);
      } else {
        pre_activation(g, p, n, nd.clip);
        apply(nd.act[0], g, n);
        std::copy_n(g, n, h);
      }
      const std::int64_t at = d.batch_first ? (b * d.seq + t) * d.dirs + dir : (t * d.dirs + dir) * d.batch + b;
      std::copy_n(h, n, y.f.data() + at * n);
    }
  }
}

// Y_h / Y_c from the final states of one direction.
void store_state(const Dims& d, std::int64_t dir, const float* state, Tensor& out) {
  for (std::int64_t b = 0; b < d.batch; ++b) {
    const std::int64_t at = d.batch_first ? b * d.dirs + dir : dir * d.batch + b;
    std::copy_n(state + b * d.hidden, d.hidden, out.f.data() + at * d.hidden);
  }
}

template <Cell kCell>
void recurrent(const OpCall& c) {
  const Dims d = check_shapes(c, kCell);
  const CellInfo cell = info_of(kCell);
  const std::vector<Activation> acts = activations(c, cell, d.dirs);
  std::vector<std::int64_t> lens;
  if (c.has_input(4)) lens = c.input(4).as_ints();
  for (const auto len : lens)
    if (len < 0 || len > d.seq)
      c.fail("sequence_lens holds " + std::to_string(len) + ", outside [0, seq_length " + std::to_string(d.seq) + "]");
  const Attrs& at = c.node.attrs;
  const float clip = at.f("clip", 0.0f);
  if (at.floats.count("clip") && !(clip > 0.0f)) c.fail("clip " + std::to_string(clip) + " is not positive");
  Node nd{c, kCell, d, nullptr, clip, at.i("linear_before_reset", 0) != 0, at.i("input_forget", 0) != 0};
  Tensor& y = *c.out[0];
  y.reset(ElemType::Float32, d.batch_first ? std::vector<std::int64_t>{d.batch, d.seq, d.dirs, d.hidden}
                                           : std::vector<std::int64_t>{d.seq, d.dirs, d.batch, d.hidden});
  if (!lens.empty()) std::fill(y.f.begin(), y.f.end(), 0.0f);  // steps past a row's length are zeros
  Tensor* y_h = c.out.size() > 1 ? c.out[1] : nullptr;
  Tensor* y_c = kCell == Cell::Lstm && c.out.size() > 2 ? c.out[2] : nullptr;
  for (Tensor* t : {y_h, y_c})
    if (t) t->reset(ElemType::Float32, d.state_shape());
  const Work w = carve(d);
  for (std::int64_t dir = 0; dir < d.dirs; ++dir) {
    nd.act = acts.data() + dir * cell.functions;
    prepare(nd, dir, w);
    run_direction(nd, dir, d.reverse_only || dir == 1, lens, w, y);
    if (y_h) store_state(d, dir, w.h, *y_h);
    if (y_c) store_state(d, dir, w.c, *y_c);
  }
}

}  // namespace

SPMD_REGISTER_GRAPH_OP("LSTM", recurrent<Cell::Lstm>);
SPMD_REGISTER_GRAPH_OP("GRU", recurrent<Cell::Gru>);
SPMD_REGISTER_GRAPH_OP("RNN", recurrent<Cell::Rnn>);

}  // namespace spmd::ops
