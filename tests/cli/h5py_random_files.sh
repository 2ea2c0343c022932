#!/usr/bin/env bash
# Random HDF5 files as h5py users write them (tests/support/h5py_random_files.py): every dtype
# in either byte order, feature shapes of 1-3 dimensions, labels as integers, bool or an enum,
# [N] or [N, 1], and each dataset contiguous, compact, chunked (over rows or over rows and
# columns, gzip / shuffle / fletcher32 / scale-offset), partly written (fill values) or virtual
# over several files or in external raw files, found by spmd's key rules or named. Each runs on its own layout of ranks x
# devices, batch and strategy:
#  - spmd eval --model logreg: every example counted once; probabilities within 1e-4 of numpy's
#    on the values h5py reads, the same classes but for ties, the same labels;
#  - spmd logreg: the objective has the bits of the same run on a native contiguous copy of the
#    values, as float32 (float64 kept) at the root: how a file stores its values changes nothing.
source "$(dirname "$0")/../support/cli_lib.sh"
PY=/usr/bin/python3
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
GEN="$ROOT/tests/support/h5py_random_files.py"
D=$WORK/files
mkdir -p "$D"
run make 0 300 $PY "$GEN" make "$D" "${SPMD_RANDOM_FILES_FIRST:-0}" "${SPMD_RANDOM_FILES:-24}"
mapfile -t FILES < "$D/files.txt"
value() { $PY -c "import json; print(repr(json.load(open('$1'))['value']))"; }
for entry in "${FILES[@]}"; do
  read -r seed ranks devices batch strategy scale fkey lkey <<<"$entry"
  keys=()
  [ "$fkey" != - ] && keys=(--features-key "$fkey" --labels-key "$lkey")
  # Half the runs from the files' folder (where HDF5 itself finds external raw files), half from
  # elsewhere (where spmd finds them beside the HDF5 file).
  launch=(mpirun -np "$ranks" --oversubscribe)
  [ $((seed % 2)) = 1 ] && launch=(env -C "$D" "${launch[@]}")
  n=$($PY -c "import json; print(json.load(open('$D/f$seed.json'))['n'])")
  run "eval_f$seed" 0 120 "${launch[@]}" "$SPMD" eval --data "$D/f$seed.h5" "${keys[@]}" --model logreg \
    --weights "$D/f${seed}_w.h5" --input-scale "$scale" --devices "$devices" --per-device-batch "$batch" \
    --strategy "$strategy" --predictions "$D/p$seed.h5" --hang-timeout 30
  expect_in "f$seed ($ranks x $devices, batch $batch, $strategy) counts every example once" " $strategy +[0-9]+ +$n "
  run "f${seed}_vs_numpy" 0 60 $PY "$GEN" check "$seed" "$D" "$D/p$seed.h5"
  cat "$LAST_OUT"
  [ "$n" -lt 5 ] && continue
  # The reference holds the values as float32 (float64 kept): auto's factor given as such.
  ref_scale=$scale
  if [ "$scale" = auto ]; then
    ref_scale=none; grep -q '"x_dtype": "[<>]u1"' "$D/f$seed.json" && ref_scale=1/255
  fi
  run "logreg_f$seed" 0 120 "${launch[@]}" "$SPMD" logreg --data "$D/f$seed.h5" "${keys[@]}" --input-scale "$scale" \
    --maxiter 4 --json "$D/l$seed.json" --quiet --hang-timeout 30
  run "logreg_f${seed}_ref" 0 120 mpi "$ranks" "$SPMD" logreg --data "$D/f${seed}_ref.h5" --input-scale "$ref_scale" \
    --maxiter 4 --json "$D/l${seed}_ref.json" --quiet --hang-timeout 30
  checks=$((checks + 1))
  if [ "$(value "$D/l$seed.json")" = "$(value "$D/l${seed}_ref.json")" ]; then
    echo "ok   logreg f$seed on $ranks rank(s): the objective of its native contiguous copy"
  else fail "logreg f$seed: objective $(value "$D/l$seed.json"), native copy $(value "$D/l${seed}_ref.json")"; fi
done
finish
