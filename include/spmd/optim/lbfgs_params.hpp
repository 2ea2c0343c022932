#pragma once
// Parameters and outcomes of the L-BFGS solver (optim/lbfgs.hpp). Defaults follow the
// JAXopt + pjit data-parallel example: history 10, maxiter 100, tol 1e-3 on the gradient's L2
// norm, stepsize 0 (line search), at most 30 objective evaluations per line search.
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "spmd/runtime/error.hpp"

namespace spmd::optim {

enum class LineSearchKind {
  zoom,          // strong Wolfe: bracketing, then zoom with safeguarded cubic interpolation
  backtracking,  // Armijo sufficient decrease, step multiplied by backtrack_factor
};

inline const char* to_string(LineSearchKind kind) {
  return kind == LineSearchKind::zoom ? "zoom" : "backtracking";
}

// "zoom" or "backtracking"; throws spmd::Error naming the option otherwise.
inline LineSearchKind parse_line_search(std::string_view name) {
  if (name == "zoom") return LineSearchKind::zoom;
  if (name == "backtracking") return LineSearchKind::backtracking;
  throw Error("'linesearch' must be 'zoom' or 'backtracking' (got '" + std::string(name) + "')");
}

enum class LBFGSStatus {
  converged,          // error = ||grad|| <= tol
  max_iterations,     // maxiter iterations done without converging
  linesearch_failed,  // no acceptable step within max_linesearch evaluations
  non_finite,         // the objective gave a NaN/Inf value or gradient where a step had to be taken
  // The line search found no step because the decrease it could make lies below what the
  // objective's floating-point type can represent at this value: the iterate is as
  // accurate as that arithmetic allows (error = the gradient norm reached; tol was tighter).
  precision_limit,
  stopped,  // the caller's stop predicate held between iterations (a signal): x is the last iterate
};

inline const char* to_string(LBFGSStatus status) {
  switch (status) {
    case LBFGSStatus::converged: return "converged";
    case LBFGSStatus::max_iterations: return "max_iterations";
    case LBFGSStatus::linesearch_failed: return "linesearch_failed";
    case LBFGSStatus::non_finite: return "non_finite";
    case LBFGSStatus::precision_limit: return "precision_limit";
    case LBFGSStatus::stopped: return "stopped";
  }
  return "unknown";
}

template <class Scalar>
struct LBFGSParams {
  int history = 10;        // m: number of (s, y) pairs kept
  int maxiter = 100;       // iterations (accepted steps) at most
  Scalar tol = Scalar(1e-3);  // stop when the gradient's L2 norm is <= tol
  // > 0: fixed step x += stepsize * d, no line search (JAXopt's stepsize); 0: line search.
  Scalar stepsize = Scalar(0);
  LineSearchKind linesearch = LineSearchKind::zoom;
  int max_linesearch = 30;             // objective evaluations per line search at most
  Scalar c1 = Scalar(1e-4);            // sufficient decrease (Armijo) constant
  Scalar c2 = Scalar(0.9);             // curvature constant (zoom only)
  Scalar backtrack_factor = Scalar(0.5);  // step *= factor after a rejected trial (backtracking)
  // Relative precision of the objective's own arithmetic (0: that of Scalar). An objective
  // computed in float32 and accumulated in double (the logreg kernels) says float32's
  // epsilon: below that, a failed line search is reported as precision_limit.
  double objective_precision = 0;
  Scalar initial_step = Scalar(1);     // first trial step of every line search (see lbfgs.hpp)
};

namespace detail {
template <class T>
std::string describe(T value) {
  std::ostringstream out;
  out << value;
  return out.str();
}
}  // namespace detail

// Throws spmd::Error naming the first parameter that breaks its constraint. NaN fails every
// check (each is written so that a NaN compares false).
template <class Scalar>
void validate(const LBFGSParams<Scalar>& p) {
  using detail::describe;
  auto fail = [](const std::string& what, const std::string& got) {
    throw Error("L-BFGS parameter " + what + " (got " + got + ")");
  };
  if (!(p.history >= 1)) fail("'history' must be >= 1", describe(p.history));
  if (!(p.maxiter >= 1)) fail("'maxiter' must be >= 1", describe(p.maxiter));
  if (!(p.tol >= 0)) fail("'tol' must be >= 0", describe(p.tol));
  if (!(p.stepsize >= 0) || !(p.stepsize < std::numeric_limits<Scalar>::infinity()))
    fail("'stepsize' must be >= 0 and finite (0 selects the line search)", describe(p.stepsize));
  if (!(p.max_linesearch >= 1)) fail("'max_linesearch' must be >= 1", describe(p.max_linesearch));
  if (!(0 < p.c1 && p.c1 < p.c2 && p.c2 < 1))
    fail("'c1' must satisfy 0 < c1 < c2 < 1", "c1=" + describe(p.c1) + ", c2=" + describe(p.c2));
  if (!(0 < p.backtrack_factor && p.backtrack_factor < 1))
    fail("'backtrack_factor' must satisfy 0 < backtrack_factor < 1", describe(p.backtrack_factor));
  if (!(p.initial_step > 0) || !(p.initial_step < std::numeric_limits<Scalar>::infinity()))
    fail("'initial_step' must be > 0 and finite", describe(p.initial_step));
}

// What one iteration reports to the callback (values in double whatever Scalar is).
struct LBFGSIteration {
  int iteration = 0;           // 1 for the first accepted step
  double value = 0.0;          // f at the new iterate
  double error = 0.0;          // ||grad f|| at the new iterate
  double stepsize = 0.0;       // accepted step along the search direction
  std::int64_t evaluations = 0;  // objective evaluations so far, the initial one included
};

template <class Scalar>
struct LBFGSResult {
  LBFGSStatus status = LBFGSStatus::max_iterations;
  int iterations = 0;            // accepted steps
  Scalar value = Scalar(0);      // f(x) at the returned x (always finite unless status is
                                 // non_finite at iteration 0)
  Scalar error = Scalar(0);      // ||grad f(x)||
  std::int64_t evaluations = 0;  // objective evaluations in total
  std::vector<Scalar> x;         // the last accepted iterate (x0 if none was accepted)
};

}  // namespace spmd::optim
