#!/usr/bin/python3
"""Sparse logistic regression on real text no one here wrote: SPMD Kit beside scikit-learn.

The data: TF-IDF (scikit-learn's TfidfVectorizer, unigrams and bigrams, min_df 3) of the
long descriptions of this machine's Debian package lists (`apt-cache dumpavail`), labels =
each package's Section, the K largest sections kept. Written as a scipy CSR group with h5py.
Then, on the same problem (L2, reg R: sklearn's C = 1 / (R N), with intercept, float64):
  - spmd logreg on 1 and 2 ranks (one thread each), float64 and float32;
  - scikit-learn's LogisticRegression lbfgs (multinomial, one thread) to the same gradient tol;
and prints per solver: seconds, objective, its gap to the best, and the time ratio to spmd on 1
rank (> 1: spmd is faster). The repeats are interleaved; medians are printed, with the range.

Usage: tools/bench/logreg_sparse_peers.py [--spmd build/spmd] [--classes 8] [--reg 1e-5]
       [--repeats 3] [--tol 1e-6] [--json FILE]
Needs Debian's python3-sklearn, python3-scipy, python3-h5py and apt-cache.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import h5py  # noqa: E402
import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402
from sklearn.feature_extraction.text import TfidfVectorizer  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def package_descriptions():
    text = subprocess.run(["apt-cache", "dumpavail"], capture_output=True, text=True, check=True).stdout
    docs, sections = [], []
    for stanza in text.split("\n\n"):
        fields, last = {}, None
        for line in stanza.splitlines():
            if line.startswith((" ", "\t")) and last:
                fields[last] += "\n" + line.strip()
            elif ":" in line:
                last, _, value = line.partition(":")
                fields[last] = value.strip()
        if "Description" in fields and "Section" in fields:
            docs.append(fields["Description"])
            sections.append(fields["Section"].split("/")[-1])
    return docs, sections


def objective(X, y, W, b, reg):
    Z = X @ W + b
    m = Z.max(axis=1, keepdims=True)
    lse = m[:, 0] + np.log(np.exp(Z - m).sum(axis=1))
    return float((lse - Z[np.arange(len(y)), y]).mean() + 0.5 * reg * (W * W).sum())


def run_spmd(args, data, ranks, precision, out):
    cmd = [args.spmd, "logreg", "--data", data, "--features-key", "X", "--labels-key", "y", "--fit-intercept",
           "--l2", str(args.reg), "--precision", precision, "--tol", str(args.tol), "--maxiter", "5000",
           "--weights-out", out + ".h5", "--json", out + ".json", "--quiet"]
    if ranks > 1:
        cmd = ["mpirun", "--oversubscribe", "-np", str(ranks)] + (["--allow-run-as-root"] if os.geteuid() == 0 else []) + cmd
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    seconds = time.perf_counter() - start
    j = json.load(open(out + ".json"))
    with h5py.File(out + ".h5", "r") as f:
        return seconds, j, f["W"][()].astype(np.float64), f["b"][()].astype(np.float64)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--spmd", default=os.path.join(ROOT, "build", "spmd"))
    p.add_argument("--classes", type=int, default=8)
    p.add_argument("--reg", type=float, default=1e-5)
    p.add_argument("--tol", type=float, default=1e-6)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--json")
    args = p.parse_args()

    docs, sections = package_descriptions()
    top = [s for s, _ in sorted(((s, sections.count(s)) for s in set(sections)), key=lambda t: -t[1])[: args.classes]]
    keep = [i for i, s in enumerate(sections) if s in top]
    y = np.array([top.index(sections[i]) for i in keep])
    X = TfidfVectorizer(ngram_range=(1, 2), min_df=3, dtype=np.float32).fit_transform([docs[i] for i in keep]).tocsr()
    N, F = X.shape
    print(f"# data: TF-IDF of {N} Debian package descriptions, {F} terms, {X.nnz} non-zeros "
          f"({100 * X.nnz / (N * F):.3f} %), {args.classes} sections: {', '.join(top)}")
    work = tempfile.mkdtemp(prefix="spmd-sparse-bench-")
    data = os.path.join(work, "tfidf.h5")
    with h5py.File(data, "w") as f:
        g = f.create_group("X")
        g["data"], g["indices"], g["indptr"] = X.data, X.indices, X.indptr
        g.attrs["shape"] = X.shape
        f["y"] = y
    X64 = X.astype(np.float64)

    runs = {}
    for _ in range(args.repeats):
        for name, ranks, precision in (("spmd 1 rank float64", 1, "float64"), ("spmd 2 ranks float64", 2, "float64"),
                                       ("spmd 1 rank float32", 1, "float32")):
            s, j, W, b = run_spmd(args, data, ranks, precision, os.path.join(work, "fit"))
            runs.setdefault(name, []).append((s, objective(X64, y, W, b, args.reg), j["status"], j["iterations"]))
        start = time.perf_counter()
        m = LogisticRegression(C=1.0 / (args.reg * N), solver="lbfgs", tol=args.tol, max_iter=5000,
                               multi_class="multinomial").fit(X64, y)
        s = time.perf_counter() - start
        runs.setdefault("sklearn lbfgs float64", []).append(
            (s, objective(X64, y, m.coef_.T, m.intercept_, args.reg), "n_iter", int(m.n_iter_[0])))
    best = min(v[1] for r in runs.values() for v in r)
    base = statistics.median(v[0] for v in runs["spmd 1 rank float64"])
    print(f"# {'solver':24} {'seconds':>8} {'range':>17} {'objective':>20} {'gap':>10} {'iters':>6} {'ratio':>6}")
    record = {"rows": N, "features": F, "nonzeros": int(X.nnz), "classes": args.classes, "reg": args.reg, "runs": {}}
    for name, r in runs.items():
        t = statistics.median(v[0] for v in r)
        value = r[-1][1]
        print(f"  {name:24} {t:8.3f} {min(v[0] for v in r):8.3f}-{max(v[0] for v in r):8.3f} {value:20.15f} "
              f"{(value - best) / best:10.2e} {r[-1][3]:6d} {t / base:6.2f}")
        record["runs"][name] = {"seconds": t, "objective": value, "iterations": r[-1][3]}
    print("# ratio: seconds / spmd on 1 rank in float64 (> 1: spmd is faster); gap: to the best objective")
    if args.json:
        json.dump(record, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    sys.exit(main())
