#!/usr/bin/python3
"""Checks that logreg runs on other layouts gave the same bits as the first.

  logreg_same_bits.py MIN_ITERATIONS PREFIX REF OTHER...

Each run K wrote PREFIX K.csv (--metrics-csv), PREFIX K.json (--json) and PREFIX K.h5
(--weights-out, with an intercept 'b'). Every iterate's row of the CSV (value, error and step
as %.17g), the final value (hex) and W and b (bytes) must equal REF's; REF must have more than
MIN_ITERATIONS iterations (else the check would prove little). Exits 1 naming the first
difference.
"""
import csv
import json
import sys

import h5py


def bits(prefix, k):
    with h5py.File(prefix + k + ".h5", "r") as f:
        weights = f["W"][()].tobytes(), f["b"][()].tobytes()
    with open(prefix + k + ".csv") as rows:
        iterates = [r[:5] for r in csv.reader(rows)]
    with open(prefix + k + ".json") as j:
        value = json.load(j)["value"].hex()
    return iterates, value, weights


def main():
    minimum, prefix, ref_key, others = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
    ref = bits(prefix, ref_key)
    if len(ref[0]) <= minimum:
        sys.exit("run %s has %d iterations, not more than %d" % (ref_key, len(ref[0]) - 1, minimum))
    for k in others:
        got = bits(prefix, k)
        if got[0] != ref[0]:
            sys.exit("run %s: iterates differ from %s's: %s" %
                     (k, ref_key, next(((a, b) for a, b in zip(ref[0], got[0]) if a != b), "lengths")))
        if got[1:] != ref[1:]:
            sys.exit("run %s: final value, W or b differ from %s's" % (k, ref_key))
    print("runs %s: the same bits as run %s (%d iterates)" % (" ".join(others), ref_key, len(ref[0]) - 1))


if __name__ == "__main__":
    main()
