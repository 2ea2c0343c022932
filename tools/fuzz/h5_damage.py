#!/usr/bin/python3
"""Damaged HDF5 data files through `spmd eval`: every failure must be a refusal.

  tools/fuzz/h5_damage.py SPMD DATA.h5 MODEL.onnx OUT_DIR FIRST_SEED COUNT [RANKS]

Each seed damages a copy of DATA.h5 one way: bits flipped in its first 4 KiB (the superblock,
object headers, B-trees of a small file), bytes overwritten anywhere, a run of bytes zeroed, or
the file cut short; then runs `spmd eval --model onnx` on it (RANKS ranks through mpirun; as
root set OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1). A run passes when it exits
0 (the damage hit unused bytes or pixel values) or non-zero within 60 s with an `error:` line and
no predictions file. A signal, a time-out, a bare C++ exception or a silent failure is printed
as BUG and its file kept in OUT_DIR. Session 26: 60 seeds on an h5py file with gzip chunks (1
rank) and 40 on a contiguous one (2 ranks), all passed; a refusal of the HDF5 library names the
file in its hint line.
"""
import os
import random
import subprocess
import sys

SIGNS = ("terminate called", "bad_alloc", "what()", "Segmentation", "AddressSanitizer")


def damage(src, rng):
    b = bytearray(src)
    kind = rng.choice(["header bits", "header bits", "bytes", "zeros", "cut"])
    if kind == "header bits":
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(min(len(b), 4096))] ^= 1 << rng.randrange(8)
    elif kind == "bytes":
        for _ in range(rng.randint(1, 8)):
            b[rng.randrange(len(b))] = rng.randrange(256)
    elif kind == "zeros":
        at, n = rng.randrange(len(b)), rng.randint(1, 64)
        b[at:at + n] = bytes(len(b[at:at + n]))
    else:
        b = b[:rng.randrange(len(b))]
    return kind, bytes(b)


def main():
    spmd, data, model, out = sys.argv[1:5]
    first, count = int(sys.argv[5]), int(sys.argv[6])
    ranks = int(sys.argv[7]) if len(sys.argv) > 7 else 1
    os.makedirs(out, exist_ok=True)
    src = open(data, "rb").read()
    bugs = 0
    for seed in range(first, first + count):
        kind, damaged = damage(src, random.Random(seed))
        path = os.path.join(out, f"seed_{seed}.h5")
        pred = path + ".pred.h5"
        open(path, "wb").write(damaged)
        cmd = ([spmd] if ranks == 1 else ["mpirun", "--oversubscribe", "-np", str(ranks), spmd]) + [
            "eval", "--data", path, "--model", "onnx", "--weights", model, "--predictions", pred, "--per-device-batch", "8"]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=60, errors="replace")
            rc, err = p.returncode, p.stderr
        except subprocess.TimeoutExpired:
            rc, err = "timeout", ""
        bad = (rc == "timeout" or rc < 0 or rc >= 128 or any(s in err for s in SIGNS) or
               (rc != 0 and ("error:" not in err or os.path.exists(pred))))
        said = [line for line in err.splitlines() if "error:" in line][:1]
        print(f"{'BUG' if bad else 'ok '} seed {seed} {kind} rc {rc} | {(said[0] if said else err.strip()[-200:])[:220]}",
              flush=True)
        if os.path.exists(pred):
            os.remove(pred)
        if not bad:
            os.remove(path)
        bugs += bad
    sys.exit(1 if bugs else 0)


if __name__ == "__main__":
    main()
