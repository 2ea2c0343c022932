#!/usr/bin/env python3
"""h5py's time to read a features dataset in blocks of whole rows (X[a:b], a memory array of
the rows' own shape), the peer of bench_h5_read. Prints JSON {"FILE": seconds, ...}: the
fastest of --runs passes over all rows, for each file."""
import argparse
import json
import time

import h5py


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--key", default="x")
    ap.add_argument("--block", type=int, required=True, help="rows per read")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    out = {}
    for path in a.files:
        best = float("inf")
        with h5py.File(path, "r") as f:
            x = f[a.key]
            for _ in range(a.runs):
                t0 = time.perf_counter()
                for first in range(0, x.shape[0], a.block):
                    x[first:first + a.block]
                best = min(best, time.perf_counter() - t0)
        out[path] = best
    print(json.dumps(out))


if __name__ == "__main__":
    main()
