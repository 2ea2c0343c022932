#!/usr/bin/env python3
"""CPU against CUDA for tools/device/run.sh: each comparison's figures go into the GPU record
(comparisons.NAME) whether it passes or not; the exit status is 1 when it fails.

  compare.py RECORD counts NAME CPU.json CUDA.json          eval: (correct, total) equal
  compare.py RECORD objective NAME CPU.json CUDA.json RTOL  logreg: final values within RTOL
  compare.py RECORD predictions NAME CPU.h5 CUDA.h5 bitwise eval --predictions: the same bytes
  compare.py RECORD predictions NAME CPU.h5 CUDA.h5 ATOL    probabilities within ATOL; a class may
                                                   differ only where the CPU's top two are within 2 ATOL
  compare.py RECORD ensemble NAME CPU.json CUDA.json        each epoch: test accuracy within 0.005,
                                                   train loss within 1e-3 relative (tests/cli/ensemble.sh)

Bitwise where the CUDA code follows the CPU's order of operations (logreg: fixed chunk trees;
byte-decoded images), a stated tolerance where it does not (cuBLAS GEMMs in the CNN).
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import record  # noqa: E402


def counts(a, b):
    x, y = record.load(a), record.load(b)
    pair = lambda j: [j["correct"], j["total"]]
    return {"cpu": pair(x), "cuda": pair(y), "rule": "equal"}, pair(x) == pair(y)


def objective(a, b, rtol):
    fa, fb = record.load(a)["value"], record.load(b)["value"]
    rel = abs(fa - fb) / max(abs(fa), 1e-300)
    return {"cpu": fa, "cuda": fb, "relative_difference": rel, "rtol": float(rtol)}, rel <= float(rtol)


def predictions(a, b, mode):
    import h5py
    import numpy as np
    with h5py.File(a, "r") as fa, h5py.File(b, "r") as fb:
        pa, pb = fa["probabilities"][...], fb["probabilities"][...]
        ca, cb = fa["predicted"][...], fb["predicted"][...]
    if pa.shape != pb.shape or ca.shape != cb.shape:
        return {"shapes": [list(pa.shape), list(pb.shape)]}, False
    diff = float(np.max(np.abs(pa.astype(np.float64) - pb))) if pa.size else 0.0
    differing = int(np.count_nonzero(ca != cb))
    figures = {"rows": int(ca.shape[0]), "max_abs_difference": diff, "classes_differing": differing}
    if mode == "bitwise":
        figures["rule"] = "bitwise"
        return figures, pa.tobytes() == pb.tobytes() and ca.tobytes() == cb.tobytes()
    atol = float(mode)
    top2 = np.sort(pa.reshape(pa.shape[0], -1), axis=1)[:, -2:] if pa.ndim > 1 and pa.shape[-1] > 1 else None
    near_tie = (top2[:, 1] - top2[:, 0] <= 2 * atol) if top2 is not None else np.zeros(ca.shape, bool)
    unexplained = int(np.count_nonzero((ca != cb) & ~near_tie))
    figures.update({"rule": f"probabilities within {atol:g}; classes equal unless the CPU's top two are within "
                            f"{2 * atol:g}", "atol": atol, "classes_differing_not_near_a_tie": unexplained})
    return figures, diff <= atol and unexplained == 0


def ensemble(a, b):
    ea, eb = record.load(a)["epochs"], record.load(b)["epochs"]
    rows, ok = [], len(ea) == len(eb)
    for x, y in zip(ea, eb):
        acc = abs(x["test_accuracy"] - y["test_accuracy"])
        loss = abs(x["train_loss"] - y["train_loss"]) / max(abs(x["train_loss"]), 1e-300)
        rows.append({"epoch": x["epoch"], "test_accuracy": [x["test_accuracy"], y["test_accuracy"]],
                     "train_loss": [x["train_loss"], y["train_loss"]], "loss_relative_difference": loss})
        ok = ok and acc <= 0.005 and loss <= 1e-3
    return {"epochs": rows, "rule": "test accuracy within 0.005, train loss within 1e-3 relative"}, ok


KINDS = {"counts": counts, "objective": objective, "predictions": predictions, "ensemble": ensemble}

if __name__ == "__main__":
    if len(sys.argv) < 6 or sys.argv[2] not in KINDS:
        sys.exit(__doc__)
    path, kind, name, args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    try:
        figures, passed = KINDS[kind](*args)
    except (OSError, KeyError, ValueError) as e:  # a missing or malformed output is a failed comparison
        figures, passed = {"error": f"{type(e).__name__}: {e}"}, False
    figures["passed"] = bool(passed)
    record.update(path, lambda r: record.set_path(r, "comparisons." + name, figures))
    print(f"{name}: {'same' if passed else 'DIFFERENT'} {json.dumps(figures)}")
    sys.exit(0 if passed else 1)
