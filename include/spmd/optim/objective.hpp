#pragma once
// What the optimizers minimise: a smooth function of a flat parameter vector that returns
// its value and writes its gradient in one call (one pass over the data for the models
// here). Data parallelism lives inside the objective (it reduces its sums over ranks), so
// the solvers know nothing of MPI; an objective used under SPMD must return bitwise
// identical values and gradients on every rank, which makes every solver decision identical.
#include <concepts>
#include <span>

namespace spmd::optim {

// `value_and_grad(x, grad)`: x has n entries, grad has n entries and is overwritten with
// df/dx at x; returns f(x). Non-finite values or gradients are allowed (the solvers reject
// such points) but must not throw for ordinary outcomes.
template <class F, class Scalar>
concept Objective = std::floating_point<Scalar> &&
                    requires(F& f, std::span<const Scalar> x, std::span<Scalar> grad) {
                      { f.value_and_grad(x, grad) } -> std::convertible_to<Scalar>;
                    };

// Adapts a callable `Scalar(std::span<const Scalar>, std::span<Scalar>)` (a lambda in tests)
// to the Objective concept. Holds a reference: the callable must outlive the adapter.
template <class Scalar, class Fn>
class FunctionObjective {
 public:
  explicit FunctionObjective(Fn& fn) : fn_(fn) {}
  Scalar value_and_grad(std::span<const Scalar> x, std::span<Scalar> grad) { return fn_(x, grad); }

 private:
  Fn& fn_;
};

template <class Scalar, class Fn>
FunctionObjective<Scalar, Fn> make_objective(Fn& fn) {
  return FunctionObjective<Scalar, Fn>(fn);
}

}  // namespace spmd::optim
