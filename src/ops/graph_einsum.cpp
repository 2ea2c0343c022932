// Einsum (opset 12: what torch.einsum exports): the equation's operands as letters, with an
// ellipsis for leading dimensions and the implicit output (the ellipsis, then the letters seen
// once, in alphabetical order). Two operands whose letters are each batch (in both and the
// output), free (in one and the output) or contracted (in both, not the output) are one
// batched GEMM after permuting A to [batch, A's free, contracted] and B to [batch, contracted,
// B's free]; anything else (one operand, a diagonal, a letter summed within one operand) is
// summed directly, in the order of the letters. Each output element is reduced in an order
// fixed by the equation, not by the batch: row independent where the batch letter is kept.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "spmd/models/cnn_kernels.hpp"
#include "spmd/ops/graph_op.hpp"
#include "strided_copy.hpp"

namespace spmd::ops {
namespace {

using Dims = std::vector<std::int64_t>;

struct Equation {
  std::vector<std::string> inputs;  // one letter per dimension (ellipsis dimensions as '0' + k)
  std::string output;
  std::map<char, std::int64_t> size;
};

// An operand's term with its ellipsis written out as the last `count` of `total` digit letters.
std::string expand_ellipsis(const OpCall& c, const std::string& term, std::size_t rank, std::size_t total) {
  const std::size_t at = term.find("...");
  if (at == std::string::npos) {
    if (term.size() != rank) c.fail("term '" + term + "' has " + std::to_string(term.size()) + " letters for rank " + std::to_string(rank));
    return term;
  }
  const std::size_t letters = term.size() - 3;
  if (rank < letters) c.fail("term '" + term + "' has more letters than rank " + std::to_string(rank));
  const std::size_t count = rank - letters;
  std::string dims;
  for (std::size_t k = total - count; k < total; ++k) dims += static_cast<char>('0' + k);
  return term.substr(0, at) + dims + term.substr(at + 3);
}

Equation parse(const OpCall& c) {
  std::string text;
  for (const char ch : c.node.attrs.s("equation", "")) if (ch != ' ') text += ch;
  const std::size_t arrow = text.find("->");
  const std::string lhs = text.substr(0, arrow);
  std::vector<std::string> terms;
  for (std::size_t from = 0;;) {
    const std::size_t comma = lhs.find(',', from);
    terms.push_back(lhs.substr(from, comma - from));
    if (comma == std::string::npos) break;
    from = comma + 1;
  }
  if (terms.size() != c.in.size()) c.fail("the equation '" + text + "' has " + std::to_string(terms.size()) + " operands for " + std::to_string(c.in.size()) + " inputs");
  std::size_t ellipsis = 0;  // the most dimensions any operand's ellipsis stands for
  for (std::size_t k = 0; k < terms.size(); ++k)
    if (terms[k].find("...") != std::string::npos && c.input(k).shape.size() + 3 >= terms[k].size())
      ellipsis = std::max(ellipsis, c.input(k).shape.size() + 3 - terms[k].size());
  Equation e;
  std::map<char, int> seen;
  for (std::size_t k = 0; k < terms.size(); ++k) {
    e.inputs.push_back(expand_ellipsis(c, terms[k], c.input(k).shape.size(), ellipsis));
    for (std::size_t d = 0; d < e.inputs[k].size(); ++d) {
      const char l = e.inputs[k][d];
      const std::int64_t n = c.input(k).shape[d];
      auto [it, fresh] = e.size.emplace(l, n);
      if (!fresh && it->second != n && it->second != 1 && n != 1)
        c.fail(std::string("letter '") + l + "' is " + std::to_string(it->second) + " in one operand and " + std::to_string(n) + " in another");
      it->second = std::max(it->second, n);
      ++seen[l];
    }
  }
  if (arrow != std::string::npos) {
    const std::string rhs = text.substr(arrow + 2);
    const std::size_t at = rhs.find("...");
    std::string dims;
    for (std::size_t k = 0; k < ellipsis; ++k) dims += static_cast<char>('0' + k);
    e.output = at == std::string::npos ? rhs : rhs.substr(0, at) + dims + rhs.substr(at + 3);
  } else {  // implicit: the ellipsis, then the letters that appear once, alphabetically
    for (std::size_t k = 0; k < ellipsis; ++k) e.output += static_cast<char>('0' + k);
    for (const auto& [l, count] : seen)
      if (count == 1 && !(l >= '0' && l <= '9')) e.output += l;
  }
  for (const char l : e.output)
    if (!e.size.count(l)) c.fail(std::string("output letter '") + l + "' is in no operand");
  return e;
}

// Strides of an operand's letters over `order` (0 where the operand lacks the letter or holds it
// broadcast as 1; repeated letters add up: a diagonal).
Dims strides_over(const std::string& letters, const Dims& shape, const std::string& order) {
  Dims own(letters.size(), 1);
  for (std::size_t d = letters.size(); d-- > 1;) own[d - 1] = own[d] * shape[d];
  Dims s(order.size(), 0);
  for (std::size_t d = 0; d < letters.size(); ++d)
    if (shape[d] != 1) s[order.find(letters[d])] += own[d];
  return s;
}

// y[out letters] = sum over the others of the product of the operands, by odometer.
void direct(const Equation& e, const OpCall& c, Tensor& y) {
  std::string order = e.output;
  for (const auto& [l, n] : e.size)
    if (order.find(l) == std::string::npos) order += l;
  std::vector<Dims> strides;
  for (std::size_t k = 0; k < e.inputs.size(); ++k) strides.push_back(strides_over(e.inputs[k], c.input(k).shape, order));
  Dims dims;
  for (const char l : order) dims.push_back(e.size.at(l));
  std::int64_t inner = 1;
  for (std::size_t d = e.output.size(); d < order.size(); ++d) inner *= dims[d];
  Dims index(order.size(), 0);
  const std::int64_t size = y.size();
  for (std::int64_t o = 0; o < size; ++o) {
    float acc = 0.0f;
    for (std::int64_t r = 0; r < inner; ++r) {
      float product = 1.0f;
      for (std::size_t k = 0; k < e.inputs.size(); ++k) {
        std::int64_t off = 0;
        for (std::size_t d = 0; d < order.size(); ++d) off += index[d] * strides[k][d];
        product *= c.input(k).f[static_cast<std::size_t>(off)];
      }
      acc += product;
      for (std::size_t d = order.size(); d-- > 0;) {
        if (++index[d] < dims[d]) break;
        index[d] = 0;
      }
    }
    y.f[static_cast<std::size_t>(o)] = acc;
  }
}

// An operand's values laid out in the letters of `order` (each of which it holds): the
// operand itself where that is its own layout, else a strided copy into `buffer`.
const float* laid_out(const Tensor& t, const std::string& letters, const std::string& order, FloatBuffer& buffer) {
  if (letters == order) return t.f.data();
  Dims dims;
  for (const char l : order) dims.push_back(t.shape[letters.find(l)]);
  buffer.resize(static_cast<std::size_t>(t.size()));
  strided_copy(dims, strides_over(letters, t.shape, order), 0, t.f.data(), buffer.data());
  return buffer.data();
}

// Two operands as a batched GEMM, when every letter is batch, free or contracted (and not
// broadcast, nor repeated within an operand); false otherwise.
bool as_gemm(const Equation& e, const OpCall& c, Tensor& y) {
  if (e.inputs.size() != 2) return false;
  const std::string &a = e.inputs[0], &b = e.inputs[1];
  std::string batch, free_a, free_b, contracted;
  for (const auto& [l, n] : e.size) {
    const bool in_a = a.find(l) != std::string::npos, in_b = b.find(l) != std::string::npos;
    const bool out = e.output.find(l) != std::string::npos;
    if (std::count(a.begin(), a.end(), l) > 1 || std::count(b.begin(), b.end(), l) > 1) return false;
    if ((in_a && c.input(0).shape[a.find(l)] != n) || (in_b && c.input(1).shape[b.find(l)] != n)) return false;
    if (in_a && in_b) (out ? batch : contracted) += l;
    else if (!out) return false;  // summed within one operand
    else (in_a ? free_a : free_b) += l;
  }
  const auto product = [&](const std::string& letters) {
    std::int64_t p = 1;
    for (const char l : letters) p *= e.size.at(l);
    return p;
  };
  const std::int64_t batches = product(batch), m = product(free_a), n = product(free_b), k = product(contracted);
  // The operands' and the product's layouts, kept per thread: no allocation once seen.
  thread_local FloatBuffer a_buffer, b_buffer, gemm_out;
  const float* pa = laid_out(c.input(0), a, batch + free_a + contracted, a_buffer);
  const float* pb = laid_out(c.input(1), b, batch + contracted + free_b, b_buffer);
  const std::string order = batch + free_a + free_b;
  const bool in_place = order == e.output;
  if (!in_place) gemm_out.resize(static_cast<std::size_t>(batches * m * n));
  float* full = in_place ? y.f.data() : gemm_out.data();
  const auto& kernels = models::cnn_cpu::kernels_for(models::cnn_cpu::resolve_isa(models::cnn_cpu::Isa::Auto));
  for (std::int64_t q = 0; q < batches; ++q) {
    if (k == 0) {
      std::fill_n(full + q * m * n, m * n, 0.0f);
      continue;
    }
    kernels.gemm(false, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), pa + q * m * k, k, pb + q * k * n, n,
                 full + q * m * n, n, false, {});
  }
  if (!in_place) {
    Dims shape, out_dims;
    for (const char l : order) shape.push_back(e.size.at(l));
    for (const char l : e.output) out_dims.push_back(e.size.at(l));
    strided_copy(out_dims, strides_over(order, shape, e.output), 0, gemm_out.data(), y.f.data());
  }
  return true;
}

void einsum(const OpCall& c) {
  for (std::size_t k = 0; k < c.in.size(); ++k) c.float_input(k);
  const Equation e = parse(c);
  Dims shape;
  for (const char l : e.output) shape.push_back(e.size.at(l));
  Tensor& y = *c.out[0];
  y.reset(ElemType::Float32, shape);
  if (!as_gemm(e, c, y)) direct(e, c, y);
}

}  // namespace

SPMD_REGISTER_GRAPH_OP("Einsum", einsum);

}  // namespace spmd::ops
