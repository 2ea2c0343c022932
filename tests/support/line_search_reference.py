#!/usr/bin/python3
"""scipy.optimize.line_search (strong Wolfe, Nocedal & Wright Alg. 3.5/3.6) on the cases that
tests/unit/optim_line_search_test.cpp writes, for that test to compare its zoom search with.

Usage: line_search_reference.py CASES.json RESULT.json

CASES.json: {"cases": [{"name", "function": spec, "x0", "direction", "initial_step", "c1", "c2"}]}
with the function specs of tests/support/line_search_functions.hpp (same formulas here).
RESULT.json: {"scipy": version, "results": [{"name", "step", "evaluations", "gradient_evaluations"}]}
where step is null when scipy found none. scipy's first trial is alpha = 1 (no previous
value given), so the direction is scaled by initial_step and the step scaled back.
"""
import json
import sys
import warnings

import numpy as np
import scipy
from scipy.optimize import line_search


def make_function(spec):
    kind = spec["kind"]
    if kind == "quadratic":
        scale, target = np.array(spec["scale"]), np.array(spec["target"])
        return (lambda x: 0.5 * np.sum(scale * (x - target) ** 2), lambda x: scale * (x - target))
    if kind == "rosenbrock":
        def f(x):
            return 100 * (x[1] - x[0] ** 2) ** 2 + (1 - x[0]) ** 2

        def g(x):
            a = x[1] - x[0] ** 2
            return np.array([-400 * a * x[0] - 2 * (1 - x[0]), 200 * a])
        return f, g
    if kind == "more_thuente1":
        beta = spec["beta"]
        return (lambda x: -x[0] / (x[0] ** 2 + beta),
                lambda x: np.array([(x[0] ** 2 - beta) / (x[0] ** 2 + beta) ** 2]))
    if kind == "more_thuente2":
        beta = spec["beta"]
        return (lambda x: (x[0] + beta) ** 5 - 2 * (x[0] + beta) ** 4,
                lambda x: np.array([5 * (x[0] + beta) ** 4 - 8 * (x[0] + beta) ** 3]))
    if kind == "logistic":
        F, C, l2 = spec["features"], spec["classes"], spec["l2"]
        X = np.array(spec["X"]).reshape(-1, F)
        onehot = np.eye(C)[np.array(spec["labels"])]

        def parts(w):
            W = w.reshape(F, C)
            z = X @ W
            m = z.max(axis=1, keepdims=True)
            s = np.exp(z - m).sum(axis=1, keepdims=True)
            loss = np.mean(m[:, 0] + np.log(s[:, 0]) - (z * onehot).sum(axis=1)) + 0.5 * l2 * np.sum(w * w)
            grad = X.T @ (np.exp(z - m) / s - onehot) / X.shape[0] + l2 * W
            return loss, grad.ravel()
        return (lambda w: parts(w)[0], lambda w: parts(w)[1])
    raise ValueError("unknown function kind " + kind)


def main():
    cases = json.load(open(sys.argv[1]))["cases"]
    results = []
    for case in cases:
        f, g = make_function(case["function"])
        x0 = np.array(case["x0"], dtype=float)
        a0 = case["initial_step"]
        direction = a0 * np.array(case["direction"], dtype=float)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            alpha, fc, gc, *_ = line_search(f, g, x0, direction, gfk=g(x0), old_fval=f(x0),
                                            c1=case["c1"], c2=case["c2"], maxiter=30)
        results.append({"name": case["name"], "step": None if alpha is None else alpha * a0,
                        "evaluations": fc, "gradient_evaluations": gc})
    json.dump({"scipy": scipy.__version__, "results": results}, open(sys.argv[2], "w"), indent=1)


if __name__ == "__main__":
    main()
