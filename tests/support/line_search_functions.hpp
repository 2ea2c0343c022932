#pragma once
// Known functions for the line-search tests, in double, each described by a JSON spec that
// tests/support/line_search_reference.py turns into the same function for
// scipy.optimize.line_search (the formulas here and there must stay the same):
//   quadratic:  0.5 sum_i scale_i (x_i - target_i)^2
//   rosenbrock: 100 (x_1 - x_0^2)^2 + (1 - x_0)^2
//   logistic:   mean softmax cross-entropy of rows X [rows, features] with labels, weights
//               W [features, classes] flattened row-major, plus 0.5 l2 ||W||^2
//   more_thuente1: -x / (x^2 + beta)                    (Moré & Thuente 1994, function 1)
//   more_thuente2: (x + beta)^5 - 2 (x + beta)^4         (function 2)
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

namespace spmd::test {

struct LineSearchFunction {
  std::string kind;
  std::vector<double> scale, target;  // quadratic
  std::vector<double> X;              // logistic: [rows, features]
  std::vector<int> labels;            // logistic: [rows]
  int features = 0, classes = 0;
  double l2 = 0.0;
  double beta = 0.0;  // more_thuente1 / more_thuente2
  int evaluations = 0;

  double value_and_grad(std::span<const double> x, std::span<double> g) {
    ++evaluations;
    if (kind == "quadratic") {
      double f = 0;
      for (std::size_t i = 0; i < x.size(); ++i) {
        const double r = x[i] - target[i];
        f += 0.5 * scale[i] * r * r;
        g[i] = scale[i] * r;
      }
      return f;
    }
    if (kind == "rosenbrock") {
      const double a = x[1] - x[0] * x[0], b = 1 - x[0];
      g[0] = -400 * a * x[0] - 2 * b;
      g[1] = 200 * a;
      return 100 * a * a + b * b;
    }
    if (kind == "more_thuente1") {
      const double q = x[0] * x[0] + beta;
      g[0] = (x[0] * x[0] - beta) / (q * q);
      return -x[0] / q;
    }
    if (kind == "more_thuente2") {
      const double y = x[0] + beta;
      g[0] = 5 * std::pow(y, 4) - 8 * std::pow(y, 3);
      return std::pow(y, 5) - 2 * std::pow(y, 4);
    }
    return logistic(x, g);
  }

  nlohmann::json spec() const {
    return {{"kind", kind},         {"scale", scale},     {"target", target}, {"X", X},      {"labels", labels},
            {"features", features}, {"classes", classes}, {"l2", l2},         {"beta", beta}};
  }

 private:
  double logistic(std::span<const double> W, std::span<double> g) {
    const std::size_t rows = labels.size(), F = static_cast<std::size_t>(features),
                      C = static_cast<std::size_t>(classes);
    std::vector<double> z(C);
    double loss = 0;
    std::fill(g.begin(), g.end(), 0.0);
    for (std::size_t i = 0; i < rows; ++i) {
      for (std::size_t c = 0; c < C; ++c) {
        z[c] = 0;
        for (std::size_t f = 0; f < F; ++f) z[c] += X[i * F + f] * W[f * C + c];
      }
      const double m = *std::max_element(z.begin(), z.end());
      double s = 0;
      for (double v : z) s += std::exp(v - m);
      const std::size_t label = static_cast<std::size_t>(labels[i]);
      loss += m + std::log(s) - z[label];
      for (std::size_t c = 0; c < C; ++c) {
        const double delta = std::exp(z[c] - m) / s - (c == label ? 1.0 : 0.0);
        for (std::size_t f = 0; f < F; ++f) g[f * C + c] += X[i * F + f] * delta / static_cast<double>(rows);
      }
    }
    double squares = 0;
    for (std::size_t k = 0; k < W.size(); ++k) {
      g[k] += l2 * W[k];
      squares += W[k] * W[k];
    }
    return loss / static_cast<double>(rows) + 0.5 * l2 * squares;
  }
};

inline LineSearchFunction quadratic(std::vector<double> scale, std::vector<double> target) {
  LineSearchFunction f;
  f.kind = "quadratic";
  f.scale = std::move(scale);
  f.target = std::move(target);
  return f;
}

// Scales spread geometrically over [1, condition]: the Hessian's condition number.
inline LineSearchFunction conditioned_quadratic(std::size_t n, double condition) {
  std::vector<double> scale(n), target(n);
  for (std::size_t i = 0; i < n; ++i) {
    scale[i] = n == 1 ? 1.0 : std::pow(condition, static_cast<double>(i) / static_cast<double>(n - 1));
    target[i] = (i % 2 == 0 ? 1.0 : -1.0) * (1.0 + static_cast<double>(i));
  }
  return quadratic(std::move(scale), std::move(target));
}

inline LineSearchFunction named(const std::string& kind, double beta = 0.0) {
  LineSearchFunction f;
  f.kind = kind;
  f.beta = beta;
  return f;
}

// A small multiclass problem with overlapping classes; deterministic without an RNG, so
// that the same rows are easy to state in any language (they travel in the spec anyway).
inline LineSearchFunction small_logistic(int rows, int features, int classes, double l2) {
  LineSearchFunction f;
  f.kind = "logistic";
  f.features = features;
  f.classes = classes;
  f.l2 = l2;
  for (int i = 0; i < rows; ++i) {
    for (int k = 0; k < features; ++k) f.X.push_back(std::sin(1.3 * i + 0.7 * k + 0.1) + 0.3 * (k == i % classes));
    f.labels.push_back(i % classes);
  }
  return f;
}

}  // namespace spmd::test
