// The recurrent graph ops (LSTM, GRU, RNN) by definition: one- and two-step cells worked out from
// ONNX's equations with scalars, random nodes (directions, layout 1, sequence_lens, peepholes,
// clip, input_forget, linear_before_reset, Relu) against a double-precision reference that
// follows the equations step by step without GEMMs, and a batch row's outputs the same bits
// alone as in a batch of 5 (eval's layout promise).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "spmd/ops/graph_op.hpp"
#include "spmd/runtime/error.hpp"

namespace {

using spmd::ops::ElemType;
using spmd::ops::GraphNode;
using spmd::ops::Tensor;

Tensor tensor(std::vector<std::int64_t> shape, std::vector<float> values) {
  Tensor t;
  t.reset(ElemType::Float32, std::move(shape));
  std::copy(values.begin(), values.end(), t.f.begin());
  return t;
}

// Y, Y_h, Y_c of one call; inputs[k] nullptr where omitted.
std::vector<Tensor> run(const GraphNode& node, const std::vector<const Tensor*>& inputs) {
  std::vector<Tensor> y(3);
  std::vector<Tensor*> out{&y[0], &y[1], &y[2]};
  if (node.op != "LSTM") out.pop_back();
  spmd::ops::find_graph_op(node.op)(spmd::ops::OpCall{node, inputs, out});
  return y;
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

TEST(GraphRecurrent, LstmTwoStepsByHand) {
  // input_size 1, hidden_size 1; W, R gates i o f c; Wb given, Rb zero; h0 0, c0 0.5.
  const Tensor x = tensor({2, 1, 1}, {1.0f, -1.0f});
  const Tensor w = tensor({1, 4, 1}, {0.5f, 1.0f, -1.0f, 2.0f});
  const Tensor r = tensor({1, 4, 1}, {0.25f, -0.5f, 0.75f, 1.0f});
  const Tensor b = tensor({1, 8}, {0.1f, 0.2f, 0.3f, 0.4f, 0, 0, 0, 0});
  const Tensor h0 = tensor({1, 1, 1}, {0.0f}), c0 = tensor({1, 1, 1}, {0.5f});
  const double c1 = sigmoid(-1.0 + 0.3) * 0.5 + sigmoid(0.5 + 0.1) * std::tanh(2.0 + 0.4);
  const double h1 = sigmoid(1.0 + 0.2) * std::tanh(c1);
  const double c2 = sigmoid(1.0 + 0.3 + 0.75 * h1) * c1 + sigmoid(-0.5 + 0.1 + 0.25 * h1) * std::tanh(-2.0 + 0.4 + h1);
  const double h2 = sigmoid(-1.0 + 0.2 - 0.5 * h1) * std::tanh(c2);
  GraphNode node{"LSTM", "lstm", 14, {}, {}, {}};
  node.attrs.ints["hidden_size"] = 1;
  const auto y = run(node, {&x, &w, &r, &b, nullptr, &h0, &c0});
  ASSERT_EQ(y[0].shape, (std::vector<std::int64_t>{2, 1, 1, 1}));
  EXPECT_NEAR(y[0].f[0], h1, 1e-6);
  EXPECT_NEAR(y[0].f[1], h2, 1e-6);
  EXPECT_NEAR(y[1].f[0], h2, 1e-6);
  EXPECT_NEAR(y[2].f[0], c2, 1e-6);
}

TEST(GraphRecurrent, GruTwoStepsByHandBothResetOrders) {
  // W, R gates z r h; Rb only on h (where the reset orders differ); h0 0.5.
  const Tensor x = tensor({2, 1, 1}, {1.0f, -1.0f});
  const Tensor w = tensor({1, 3, 1}, {0.5f, -1.0f, 2.0f});
  const Tensor r = tensor({1, 3, 1}, {1.0f, 0.5f, -0.75f});
  const Tensor b = tensor({1, 6}, {0.1f, 0.2f, 0.3f, 0.0f, 0.0f, 0.4f});
  const Tensor h0 = tensor({1, 1, 1}, {0.5f});
  for (const bool linear_before_reset : {false, true}) {
    double h = 0.5, expected[2];
    for (int t = 0; t < 2; ++t) {
      const double xt = t == 0 ? 1.0 : -1.0;
      const double z = sigmoid(0.5 * xt + 0.1 + h), rr = sigmoid(-xt + 0.2 + 0.5 * h);
      const double hh = linear_before_reset ? std::tanh(2 * xt + 0.3 + rr * (-0.75 * h + 0.4))
                                            : std::tanh(2 * xt + 0.3 + -0.75 * (rr * h) + 0.4);
      h = (1 - z) * hh + z * h;
      expected[t] = h;
    }
    GraphNode node{"GRU", "gru", 14, {}, {}, {}};
    node.attrs.ints["linear_before_reset"] = linear_before_reset;
    const auto y = run(node, {&x, &w, &r, &b, nullptr, &h0});
    ASSERT_EQ(y[1].shape, (std::vector<std::int64_t>{1, 1, 1}));
    EXPECT_NEAR(y[0].f[0], expected[0], 1e-6) << "linear_before_reset " << linear_before_reset;
    EXPECT_NEAR(y[0].f[1], expected[1], 1e-6) << "linear_before_reset " << linear_before_reset;
    EXPECT_NEAR(y[1].f[0], expected[1], 1e-6) << "linear_before_reset " << linear_before_reset;
  }
}

// A random node and its inputs (every optional one given unless switched off).
struct Case {
  std::string op;
  std::string direction = "forward";
  bool batch_first = false, peepholes = false, bias = true, input_forget = false, linear_before_reset = false;
  float clip = 0.0f;
  std::string activation;  // RNN's f when not the default Tanh
  int seq = 6, batch = 5, input = 7, hidden = 19;
  int dirs() const { return direction == "bidirectional" ? 2 : 1; }
  int gates() const { return op == "LSTM" ? 4 : op == "GRU" ? 3 : 1; }
};

struct Inputs {
  Tensor x, w, r, b, lens, h0, c0, p;
  std::vector<const Tensor*> list(const Case& c) const {
    return {&x, &w, &r, c.bias ? &b : nullptr, &lens, &h0, c.op == "LSTM" ? &c0 : nullptr,
            c.peepholes ? &p : nullptr};
  }
};

Tensor uniform(std::vector<std::int64_t> shape, std::mt19937& rng, float scale) {
  Tensor t;
  t.reset(ElemType::Float32, std::move(shape));
  std::uniform_real_distribution<float> u(-scale, scale);
  for (auto& v : t.f) v = u(rng);
  return t;
}

Inputs make_inputs(const Case& c, std::mt19937& rng) {
  const std::int64_t d = c.dirs(), gh = c.gates() * c.hidden;
  Inputs in;
  in.x = uniform(c.batch_first ? std::vector<std::int64_t>{c.batch, c.seq, c.input} : std::vector<std::int64_t>{c.seq, c.batch, c.input}, rng, 1.0f);
  in.w = uniform({d, gh, c.input}, rng, 0.6f);
  in.r = uniform({d, gh, c.hidden}, rng, 0.4f);
  in.b = uniform({d, 2 * gh}, rng, 0.3f);
  const std::vector<std::int64_t> state = c.batch_first ? std::vector<std::int64_t>{c.batch, d, c.hidden}
                                                        : std::vector<std::int64_t>{d, c.batch, c.hidden};
  in.h0 = uniform(state, rng, 0.5f);
  in.c0 = uniform(state, rng, 0.5f);
  in.p = uniform({d, 3 * c.hidden}, rng, 0.5f);
  in.lens.reset(ElemType::Int64, {c.batch});
  for (int b = 0; b < c.batch; ++b) in.lens.i[static_cast<std::size_t>(b)] = b == 0 ? c.seq : static_cast<int>(rng() % (c.seq + 1));
  return in;
}

GraphNode make_node(const Case& c) {
  GraphNode node{c.op, "node_" + c.op, 14, {}, {}, {}};
  node.attrs.ints["hidden_size"] = c.hidden;
  node.attrs.ints["layout"] = c.batch_first;
  node.attrs.strings["direction"] = c.direction;
  if (c.clip > 0) node.attrs.floats["clip"] = c.clip;
  if (c.input_forget) node.attrs.ints["input_forget"] = 1;
  if (c.linear_before_reset) node.attrs.ints["linear_before_reset"] = 1;
  if (!c.activation.empty()) node.attrs.string_lists["activations"] = std::vector<std::string>(c.dirs(), c.activation);
  return node;
}

// Y, Y_h (and Y_c) by ONNX's equations in double: one row, direction and step at a time.
std::vector<std::vector<double>> reference(const Case& c, const Inputs& in) {
  const int n = c.hidden, gh = c.gates() * n, dirs = c.dirs(), ni = c.input;
  std::vector<std::vector<double>> out(c.op == "LSTM" ? 3 : 2, std::vector<double>(static_cast<std::size_t>(dirs * c.batch * n)));
  out[0].assign(static_cast<std::size_t>(c.seq * dirs * c.batch * n), 0.0);
  const auto at = [](const Tensor& t, int k) { return static_cast<double>(t.f[static_cast<std::size_t>(k)]); };
  const auto x_at = [&](int t, int b) { return c.batch_first ? (b * c.seq + t) * ni : (t * c.batch + b) * ni; };
  const auto state_at = [&](int d, int b) { return c.batch_first ? (b * dirs + d) * n : (d * c.batch + b) * n; };
  const auto y_at = [&](int t, int d, int b) { return c.batch_first ? ((b * c.seq + t) * dirs + d) * n : ((t * dirs + d) * c.batch + b) * n; };
  const auto clip = [&](double v) { return c.clip > 0 ? std::clamp(v, -double{c.clip}, double{c.clip}) : v; };
  const auto sig = [&](double v) { return sigmoid(clip(v)); };
  const auto th = [&](double v) { return std::tanh(clip(v)); };
  for (int d = 0; d < dirs; ++d)
    for (int b = 0; b < c.batch; ++b) {
      std::vector<double> h(static_cast<std::size_t>(n)), cs(h.size()), a(static_cast<std::size_t>(gh)), rec(a.size()), next(h.size());
      for (int j = 0; j < n; ++j) {
        h[j] = at(in.h0, state_at(d, b) + j);
        cs[j] = c.op == "LSTM" ? at(in.c0, state_at(d, b) + j) : 0.0;
      }
      const int len = static_cast<int>(in.lens.i[static_cast<std::size_t>(b)]);
      for (int i = 0; i < len; ++i) {
        const int t = c.direction == "reverse" || d == 1 ? len - 1 - i : i;
        for (int q = 0; q < gh; ++q) {  // X W^T + Wb and H R^T + Rb
          a[q] = c.bias ? at(in.b, d * 2 * gh + q) : 0.0;
          rec[q] = c.bias ? at(in.b, d * 2 * gh + gh + q) : 0.0;
          for (int k = 0; k < ni; ++k) a[q] += at(in.x, x_at(t, b) + k) * at(in.w, (d * gh + q) * ni + k);
          for (int k = 0; k < n; ++k) rec[q] += h[k] * at(in.r, (d * gh + q) * n + k);
        }
        for (int j = 0; j < n; ++j) {
          const auto peep = [&](int g) { return c.peepholes ? at(in.p, d * 3 * n + g * n + j) : 0.0; };  // i o f
          if (c.op == "LSTM") {
            const double ig = sig(a[j] + rec[j] + peep(0) * cs[j]);
            const double fg = c.input_forget ? 1.0 - ig : sig(a[2 * n + j] + rec[2 * n + j] + peep(2) * cs[j]);
            cs[j] = fg * cs[j] + ig * th(a[3 * n + j] + rec[3 * n + j]);
            next[j] = sig(a[n + j] + rec[n + j] + peep(1) * cs[j]) * std::tanh(cs[j]);
          } else if (c.op == "GRU") {
            const double z = sig(a[j] + rec[j]);
            double hh = a[2 * n + j];
            if (c.linear_before_reset) {
              hh += sig(a[n + j] + rec[n + j]) * rec[2 * n + j];
            } else {  // (r (.) H) Rh^T + Rbh
              hh += c.bias ? at(in.b, d * 2 * gh + gh + 2 * n + j) : 0.0;
              for (int k = 0; k < n; ++k) hh += sig(a[n + k] + rec[n + k]) * h[k] * at(in.r, (d * gh + 2 * n + j) * n + k);
            }
            next[j] = (1.0 - z) * th(hh) + z * h[j];
          } else {
            next[j] = c.activation == "Relu" ? std::max(clip(a[j] + rec[j]), 0.0) : th(a[j] + rec[j]);
          }
        }
        h = next;
        for (int j = 0; j < n; ++j) out[0][static_cast<std::size_t>(y_at(t, d, b) + j)] = h[j];
      }
      for (int j = 0; j < n; ++j) {
        out[1][static_cast<std::size_t>(state_at(d, b) + j)] = h[j];
        if (c.op == "LSTM") out[2][static_cast<std::size_t>(state_at(d, b) + j)] = cs[j];
      }
    }
  return out;
}

std::vector<Case> cases() {
  std::vector<Case> all(6);
  all[0].op = "LSTM", all[0].direction = "bidirectional", all[0].peepholes = true, all[0].clip = 0.8f;
  all[1].op = "LSTM", all[1].batch_first = true, all[1].input_forget = true, all[1].bias = false;
  all[2].op = "GRU", all[2].direction = "reverse";
  all[3].op = "GRU", all[3].direction = "bidirectional", all[3].batch_first = true, all[3].linear_before_reset = true;
  all[4].op = "RNN", all[4].direction = "bidirectional", all[4].activation = "Relu", all[4].clip = 1.5f;
  all[5].op = "LSTM", all[5].clip = 0.5f;  // clipped without peepholes: the i, o, f gates in one pass
  return all;
}

TEST(GraphRecurrent, RandomNodesMatchTheEquations) {
  std::mt19937 rng(11);
  for (const Case& c : cases()) {
    const Inputs in = make_inputs(c, rng);
    const auto got = run(make_node(c), in.list(c));
    const auto want = reference(c, in);
    for (std::size_t k = 0; k < want.size(); ++k) {
      ASSERT_EQ(got[k].size(), static_cast<std::int64_t>(want[k].size())) << c.op << " output " << k;
      for (std::size_t e = 0; e < want[k].size(); ++e)
        ASSERT_NEAR(got[k].f[e], want[k][e], 2e-5) << c.op << " " << c.direction << " output " << k << " element " << e;
    }
  }
}

// Row b of a [.., batch, ..] tensor (batch at axis `axis`) as a batch of one.
Tensor row_of(const Tensor& t, std::size_t axis, std::int64_t b) {
  std::int64_t outer = 1, inner = 1;
  for (std::size_t k = 0; k < t.shape.size(); ++k)
    if (k != axis) (k < axis ? outer : inner) *= t.shape[k];
  Tensor r;
  auto shape = t.shape;
  shape[axis] = 1;
  r.reset(t.type, shape);
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t k = 0; k < inner; ++k) {
      const std::int64_t from = (o * t.shape[axis] + b) * inner + k, to = o * inner + k;
      if (t.type == ElemType::Int64) r.i[static_cast<std::size_t>(to)] = t.i[static_cast<std::size_t>(from)];
      else r.f[static_cast<std::size_t>(to)] = t.f[static_cast<std::size_t>(from)];
    }
  return r;
}

TEST(GraphRecurrent, ARowIsTheSameBitsAloneAsInABatchOfFive) {
  std::mt19937 rng(5);
  for (const Case& c : cases()) {
    const Inputs in = make_inputs(c, rng);
    const GraphNode node = make_node(c);
    const auto batch = run(node, in.list(c));
    const std::size_t x_axis = c.batch_first ? 0 : 1, y_axis = c.batch_first ? 0 : 2, state_axis = c.batch_first ? 0 : 1;
    for (std::int64_t b = 0; b < c.batch; ++b) {
      Inputs one = in;
      one.x = row_of(in.x, x_axis, b);
      one.lens = row_of(in.lens, 0, b);
      one.h0 = row_of(in.h0, state_axis, b);
      one.c0 = row_of(in.c0, state_axis, b);
      Case alone = c;
      alone.batch = 1;
      const auto single = run(node, one.list(alone));
      for (std::size_t k = 0; k < (c.op == "LSTM" ? 3u : 2u); ++k) {
        const Tensor want = row_of(batch[k], k == 0 ? y_axis : state_axis, b);
        ASSERT_EQ(single[k].shape, want.shape);
        for (std::int64_t e = 0; e < want.size(); ++e)  // bit equality: NaN never occurs here
          ASSERT_EQ(single[k].f[static_cast<std::size_t>(e)], want.f[static_cast<std::size_t>(e)])
              << c.op << " " << c.direction << " row " << b << " output " << k << " element " << e;
      }
    }
  }
}

TEST(GraphRecurrent, RefusalsNameTheNode) {
  Case c;
  c.op = "LSTM";
  std::mt19937 rng(1);
  const Inputs in = make_inputs(c, rng);
  GraphNode node = make_node(c);
  node.attrs.string_lists["activations"] = {"Sigmoid", "Swish", "Tanh"};
  EXPECT_THROW(
      {
        try {
          run(node, in.list(c));
        } catch (const spmd::Error& e) {
          EXPECT_NE(std::string(e.what()).find("ONNX node 'node_LSTM' (LSTM): activation 'Swish' is not one spmd runs"),
                    std::string::npos) << e.what();
          throw;
        }
      },
      spmd::Error);
  node = make_node(c);
  node.attrs.ints["hidden_size"] = 20;
  EXPECT_THROW(run(node, in.list(c)), spmd::Error);
}

}  // namespace
