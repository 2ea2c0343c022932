#!/usr/bin/env bash
# spmd's CPU kernels at every instruction-set level this host allows (SPMD_MAX_CPU_ISA:
# avx512, avx2, portable; spmd/runtime/cpu_features.hpp) give the same bits: an ensemble's
# checkpoint, its ONNX export evaluated by --model onnx (the graph ops' kernels), and L-BFGS
# logistic regression's weights, in float32 and float64, on 1 and 2 ranks. That is what makes
# an answer the same on an AVX-512 host (Zen 4, Xeon) and an AVX2-only one (Zen 3, older Xeons,
# client CPUs), and is checked here on one host by capping it. The start-up table names the
# level used and the cap; a cap that is not a level is refused on every rank, naming the variable.
source "$(dirname "$0")/../support/cli_lib.sh"
source "$(dirname "$0")/../support/rank_exits.sh"
PY=/usr/bin/python3
RC=$WORK/rc
OUT=$WORK/refused
SUB=$WORK/sub.h5
run inputs 0 60 fashion_subset 600 "$SUB"
run classification 0 60 "$SPMD" data make-classification --out "$WORK/mc.h5" --samples 3001 --features 37 --informative 6 \
  --classes 5 --seed 3

# Under an outer cap (the suite run as an AVX2 host's: tests/README.md) its level is the top one.
outer_cap=${SPMD_MAX_CPU_ISA:-}
host_level=$("$SPMD" logreg --data "$WORK/mc.h5" --maxiter 1 --quiet | sed -n 's/.*x cpu (.*; kernels \([a-z0-9]*\).*/\1/p' | head -1)
case "$host_level" in
  avx512) levels="avx512 avx2 portable" ;;
  avx2) levels="avx2 portable" ;;
  *) levels="portable" ;;
esac
echo "host level: $host_level; checking $levels"

same_datasets() {  # A B: every dataset of the two HDF5 files holds the same bits (timings aside)
  $PY - "$@" <<'PYEOF'
import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1]), h5py.File(sys.argv[2])
names = []
a.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
timing = ("seconds", "images_per_second")
differ = [n for n in names if not n.endswith(timing) and not np.array_equal(a[n][...], b[n][...], equal_nan=True)]
print(f"{sys.argv[1]} vs {sys.argv[2]}: {len(names)} datasets, differing: {differ or 'none'}")
sys.exit(1 if differ or not names else 0)
PYEOF
}

for level in $levels; do
  export SPMD_MAX_CPU_ISA=$level
  run "ensemble_$level" 0 300 mpi 2 "$SPMD" ensemble --train "$DATA/fashion/train.h5" --test "$SUB" --train-limit 768 \
    --epochs 1 --devices 2 --checkpoint "$WORK/ck_$level.h5"
  if [ "$level" = "$host_level" ] && [ -z "$outer_cap" ]; then
    expect_in "ensemble_$level names the level, uncapped" "x cpu \(.*; kernels $level\)"
  else
    expect_in "ensemble_$level names the level and the cap" "x cpu \(.*; kernels $level, capped by SPMD_MAX_CPU_ISA\)"
  fi
  [ "$level" = "$host_level" ] && run export 0 60 "$SPMD" export --weights "$WORK/ck_$level.h5" --out "$WORK/model.onnx"
  run "eval_onnx_$level" 0 120 mpi 2 "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/model.onnx" \
    --predictions "$WORK/eval_$level.h5"
  for precision in float32 float64; do
    run "logreg_${precision}_$level" 0 120 mpi 2 "$SPMD" logreg --data "$WORK/mc.h5" --maxiter 40 --fit-intercept --l2 0.01 \
      --precision "$precision" --quiet --weights-out "$WORK/w_${precision}_$level.h5"
  done
  run "logreg_1rank_$level" 0 120 "$SPMD" logreg --data "$WORK/mc.h5" --maxiter 40 --fit-intercept --l2 0.01 --quiet \
    --weights-out "$WORK/w_1rank_$level.h5"
done
if [ -n "$outer_cap" ]; then export SPMD_MAX_CPU_ISA=$outer_cap; else unset SPMD_MAX_CPU_ISA; fi

for level in $levels; do
  [ "$level" = "$host_level" ] && continue
  run "checkpoint_same_bits_$level" 0 60 same_datasets "$WORK/ck_$host_level.h5" "$WORK/ck_$level.h5"
  run "eval_same_bits_$level" 0 60 same_datasets "$WORK/eval_$host_level.h5" "$WORK/eval_$level.h5"
  for w in float32 float64 1rank; do
    run "logreg_${w}_same_bits_$level" 0 60 same_datasets "$WORK/w_${w}_$host_level.h5" "$WORK/w_${w}_$level.h5"
  done
done
run logreg_layouts_same_bits 0 60 same_datasets "$WORK/w_float32_$host_level.h5" "$WORK/w_1rank_$host_level.h5"

# The comparison can fail: another fit's weights are not these.
run other_fit 0 120 "$SPMD" logreg --data "$WORK/mc.h5" --maxiter 40 --fit-intercept --l2 0.02 --quiet --weights-out "$WORK/w_other.h5"
run other_fit_differs 1 60 same_datasets "$WORK/w_1rank_$host_level.h5" "$WORK/w_other.h5"

mkdir -p "$RC"
SPMD_MAX_CPU_ISA=sse2 refuse bad_cap 3 "SPMD_MAX_CPU_ISA='sse2' is not an instruction set level: expected one of portable, avx2, avx512" \
  "$SPMD" logreg --data "$WORK/mc.h5" --weights-out "$OUT/w.h5"
finish
