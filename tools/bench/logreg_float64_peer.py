#!/usr/bin/python3
"""bench_logreg_kernel's Python peer: one evaluation of the logistic-regression loss and
gradient in float64 as scipy's L-BFGS-B sees it from numpy (X @ W, softmax, X.T @ R, all
float64, the features stored as float32 and widened once, outside the timing), on one
thread. Prints {"ms_per_eval": median, "repeats": k} as JSON.

  logreg_float64_peer.py ROWS FEATURES CLASSES REPEATS
Needs Debian's python3-numpy (and python3-scipy for the objective's logsumexp)."""
import os
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
import json  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from scipy.special import logsumexp  # noqa: E402


def main():
    n, F, C, repeats = (int(v) for v in sys.argv[1:5])
    rng = np.random.default_rng(42)
    X = rng.uniform(-1, 1, size=(n, F)).astype(np.float32).astype(np.float64)
    y = rng.integers(0, C, size=n)
    W = 0.05 * rng.uniform(-1, 1, size=(F, C))
    rows = np.arange(n)

    def value_and_grad(w):
        Z = X @ w
        lse = logsumexp(Z, axis=1)
        R = np.exp(Z - lse[:, None])
        R[rows, y] -= 1.0
        return (lse - Z[rows, y]).mean(), X.T @ R / n

    value_and_grad(W)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        value_and_grad(W)
        times.append(1e3 * (time.perf_counter() - t))
    print(json.dumps({"ms_per_eval": float(np.median(times)), "repeats": repeats}))


if __name__ == "__main__":
    main()
