#!/usr/bin/env bash
# --input-scale: uint8 images are scaled by 1/255 (auto), images stored in another dtype with
# values beyond [0, 1] are refused for the CNN (naming the range and the option) instead of
# silently trained unscaled, an explicit factor gives uint16 images the very bits of the
# uint8 ones, `none` keeps the values, logreg data (not images) keeps its values under auto.
source "$(dirname "$0")/../support/cli_lib.sh"
py() { /usr/bin/python3 -c "$1"; }
I=$WORK/scale
mkdir -p "$I"
run make_sets 0 60 /usr/bin/python3 - "$I" <<'PY'
import sys, h5py, numpy as np
d = sys.argv[1]
rng = np.random.default_rng(5)
x = rng.integers(0, 256, (160, 12, 12, 1)).astype(np.uint8)
y = (x[:, :6].mean(axis=(1, 2, 3)) > x[:, 6:].mean(axis=(1, 2, 3))).astype(np.int64)
for name, data in (("u8", x), ("u16", x.astype(np.uint16)), ("f32_255", x.astype(np.float32)),
                   ("f32_01", (x / 255.0).astype(np.float32))):
    with h5py.File(f"{d}/{name}.h5", "w") as f:
        f.create_dataset("images", data=data)
        f.create_dataset("labels", data=y)
PY
ENS=(--conv-features 4,8 --dense-features 8 --epochs 1 --batch-size 16)
digest() { py "import json; print(json.load(open('$1'))['params_digest'])"; }
run u8 0 120 mpi 2 "$SPMD" ensemble --train "$I/u8.h5" --test "$I/u8.h5" "${ENS[@]}" --json "$WORK/u8.json"
run u16_auto nonzero 60 mpi 2 "$SPMD" ensemble --train "$I/u16.h5" --test "$I/u16.h5" "${ENS[@]}" --json "$WORK/u16.json"
expect_in "uint16 images: the range seen and the option" "u16.h5': features dataset 'images' holds uint16 images with values in \[0, 255\].*--input-scale 1/255"
checks=$((checks + 1)); [ ! -e "$WORK/u16.json" ] && echo "ok   no output file" || fail "u16_auto left its JSON"
run u16_scaled 0 120 mpi 2 "$SPMD" ensemble --train "$I/u16.h5" --test "$I/u16.h5" "${ENS[@]}" --input-scale 1/255 --json "$WORK/u16s.json"
checks=$((checks + 1))
if [ "$(digest "$WORK/u16s.json")" = "$(digest "$WORK/u8.json")" ]; then echo "ok   uint16 / 255 trains the very bits of uint8 (auto)"
else fail "uint16 with --input-scale 1/255 differs from uint8"; fi
run f32_255_auto nonzero 60 mpi 2 "$SPMD" ensemble --train "$I/f32_255.h5" --test "$I/f32_255.h5" "${ENS[@]}"
expect_in "float32 images in 0..255: refused" "holds float32 images with values in \[0, 255\]"
run f32_01 0 120 mpi 2 "$SPMD" ensemble --train "$I/f32_01.h5" --test "$I/f32_01.h5" "${ENS[@]}" --json "$WORK/f01.json"
run f32_255_none 0 120 mpi 2 "$SPMD" ensemble --train "$I/f32_255.h5" --test "$I/f32_255.h5" "${ENS[@]}" --input-scale none
# eval --model cnn on uint16 images: the same check; --model zero does not care.
run ck 0 120 mpi 2 "$SPMD" ensemble --train "$I/u8.h5" --test "$I/u8.h5" "${ENS[@]}" --checkpoint "$WORK/ck.h5"
run eval_cnn_u16 nonzero 60 mpi 2 "$SPMD" eval --model cnn --weights "$WORK/ck.h5" --data "$I/u16.h5" --classes 2
expect_in "eval --model cnn refuses unscaled uint16 images" "holds uint16 images .*--input-scale 1/255"
run eval_cnn_u16_scaled 0 60 mpi 2 "$SPMD" eval --model cnn --weights "$WORK/ck.h5" --data "$I/u16.h5" --input-scale 1/255 --json "$WORK/e16.json"
run eval_cnn_u8 0 60 mpi 2 "$SPMD" eval --model cnn --weights "$WORK/ck.h5" --data "$I/u8.h5" --json "$WORK/e8.json"
run eval_same 0 10 py "import json; a, b = (json.load(open('$WORK/e%s.json' % k)) for k in ('16', '8')); assert a['correct'] == b['correct'], (a['correct'], b['correct'])"
run eval_zero_u16 0 60 "$SPMD" eval --model zero --data "$I/u16.h5" --classes 2
# logreg: not images, uint16 values kept under auto.
run logreg_u16 0 60 mpi 2 "$SPMD" logreg --data "$I/u16.h5" --features-key images --labels-key labels --maxiter 2
# Bad values are refused up front, naming the option.
for bad in -3 abc 1/0 0; do
  run "bad[${bad//\//:}]" nonzero 30 "$SPMD" ensemble --train "$I/u8.h5" --test "$I/u8.h5" --input-scale "$bad"
  expect_in "bad[${bad//\//:}] names the option" "--input-scale must be auto, none, or a positive factor"
done
finish
