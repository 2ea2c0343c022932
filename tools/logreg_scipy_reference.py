#!/usr/bin/python3
"""Reference minimum of the multiclass logistic-regression objective with scipy's L-BFGS-B.

Reads a problem file written by the SPMD Kit tests, minimises (in float64)

    f(W) = mean_i [logsumexp(x_i W) - (x_i W)_{y_i}] + l2/2 ||W||^2,   W [F, C], from W = 0,

and writes the result as JSON: {"value": f(W*), "iterations": k, "gradient_norm": ||grad||,
"converged": bool}.

Problem file (little endian): 8 bytes b"SPMDLR1\\0", int64 n, int64 F, int64 C, float64 l2,
then X as n*F float32 (row-major), then y as n int32.

Uses Debian's python3-numpy and python3-scipy (/usr/bin/python3).
Usage: logreg_scipy_reference.py PROBLEM.bin RESULT.json
"""
import json
import sys

import numpy as np
from scipy.optimize import minimize

MAGIC = b"SPMDLR1\0"


def read_problem(path):
    with open(path, "rb") as f:
        if f.read(8) != MAGIC:
            sys.exit(f"{path}: not an SPMD Kit logistic-regression problem file (bad magic)")
        n, features, classes = np.frombuffer(f.read(24), dtype="<i8")
        (l2,) = np.frombuffer(f.read(8), dtype="<f8")
        X = np.frombuffer(f.read(4 * n * features), dtype="<f4").reshape(n, features)
        y = np.frombuffer(f.read(4 * n), dtype="<i4")
    if y.size != n or (y.size and (y.min() < 0 or y.max() >= classes)):
        sys.exit(f"{path}: truncated file or labels outside [0, {classes})")
    return X.astype(np.float64), y.astype(np.int64), int(classes), float(l2)


def objective(w, X, y, classes, l2):
    n, features = X.shape
    W = w.reshape(features, classes)
    Z = X @ W
    m = Z.max(axis=1, keepdims=True)
    lse = m[:, 0] + np.log(np.exp(Z - m).sum(axis=1))
    value = (lse - Z[np.arange(n), y]).mean() + 0.5 * l2 * np.dot(w, w)
    P = np.exp(Z - lse[:, None])
    P[np.arange(n), y] -= 1.0
    grad = X.T @ P / n + l2 * W
    return value, grad.ravel()


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    X, y, classes, l2 = read_problem(sys.argv[1])
    w0 = np.zeros(X.shape[1] * classes)
    result = minimize(objective, w0, args=(X, y, classes, l2), jac=True, method="L-BFGS-B",
                      options={"maxiter": 10000, "maxcor": 10, "ftol": 1e-15, "gtol": 1e-10})
    value, grad = objective(result.x, X, y, classes, l2)
    with open(sys.argv[2], "w") as out:
        json.dump({"value": float(value), "iterations": int(result.nit),
                   "gradient_norm": float(np.linalg.norm(grad)), "converged": bool(result.success)}, out)


if __name__ == "__main__":
    main()
