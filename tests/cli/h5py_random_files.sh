#!/usr/bin/env bash
# Random HDF5 files as h5py users write them (tests/support/h5py_random_files.py): every dtype
# in either byte order, feature shapes of 1-3 dimensions, labels as integers, bool or an enum,
# [N] or [N, 1], and each dataset contiguous, compact, chunked (over rows or over rows and
# columns, gzip / shuffle / fletcher32 / scale-offset), partly written (fill values) or virtual
# over several files or in external raw files, found by spmd's key rules or named. Each runs on its own layout of ranks x
# devices, batch and strategy:
#  - spmd eval --model logreg: every example counted once; probabilities within 1e-4 of numpy's
#    on the values h5py reads, the same classes but for ties, the same labels;
#  - spmd logreg (with or without --fit-intercept, --precision float64, --l2): the objective has
#    the bits of the same run on a native contiguous copy of the values, as float32 (float64
#    kept) at the root: how a file stores its values changes nothing;
#  - spmd ensemble, where the rows are images ([N, H, W] or [N, H, W, C], H and W >= 2): the
#    epochs' losses and accuracies have the bits of the same members on the native copy, or both
#    are refused alike (unscaled images, one class, a loss or outputs past float32); eval --model cnn of its checkpoint on the file (its layout
#    and strategy) gives the bits of the native copy's predictions on one rank.
source "$(dirname "$0")/../support/cli_lib.sh"
PY=/usr/bin/python3
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
GEN="$ROOT/tests/support/h5py_random_files.py"
D=$WORK/files
mkdir -p "$D"
run make 0 300 $PY "$GEN" make "$D" "${SPMD_RANDOM_FILES_FIRST:-0}" "${SPMD_RANDOM_FILES:-24}"
mapfile -t FILES < "$D/files.txt"
value() { $PY -c "import json; print(repr(json.load(open('$1'))['value']))"; }
# The epochs' results of an ensemble's --json (not their times).
epochs() {
  $PY -c "import json; print([[e[k] for k in ('train_loss', 'train_accuracy', 'test_loss', 'test_accuracy', 'member_test_accuracy')]
             for e in json.load(open('$1'))['epochs']])"
}
# cnn_case SEED: the ensemble and eval --model cnn on fSEED.h5 against its native copy.
cnn_case() {
  local seed=$1 cnn train_batch ref_scale=$scale rc rc_ref
  read -r cnn train_batch < <($PY -c "import json; j = json.load(open('$D/f$seed.json')); print(j['cnn'], j['cnn_batch'])")
  [ "$cnn" = True ] || return 0
  # The copy is float32 (or float64): auto's rule for the CNN's images holds for it too, only
  # uint8's 1/255 is given as a factor.
  grep -q '"x_dtype": "[<>]u1"' "$D/f$seed.json" && [ "$scale" = auto ] && ref_scale=1/255
  local train=(--conv-features 3 --dense-features none --batch-size "$train_batch" --epochs 2 --quiet --hang-timeout 30
    --devices "$devices" --overwrite)
  timeout -k 5 120 "${launch[@]}" "$SPMD" ensemble --train "$D/f$seed.h5" --test "$D/f$seed.h5" "${keys[@]}" \
    --input-scale "$scale" "${train[@]}" --checkpoint "$D/c$seed.h5" --json "$D/e$seed.json" >"$WORK/ens_f$seed.out" 2>&1
  rc=$?
  timeout -k 5 120 mpirun -np "$ranks" --oversubscribe "$SPMD" ensemble --train "$D/f${seed}_ref.h5" \
    --test "$D/f${seed}_ref.h5" --input-scale "$ref_scale" "${train[@]}" --checkpoint "$D/c${seed}_ref.h5" \
    --json "$D/e${seed}_ref.json" >"$WORK/ens_f${seed}_ref.out" 2>&1
  rc_ref=$?
  LAST_OUT=$WORK/ens_f$seed.out
  checks=$((checks + 1))
  if [ $rc != 0 ] || [ $rc_ref != 0 ]; then
    # Refused alike: as unscaled images (the message names each file's own dataset), or with the
    # same words (unscaled values that --input-scale none keeps make the loss non-finite at the
    # same step).
    local error error_ref
    error=$(grep -m1 '^spmd ensemble: error:' "$WORK/ens_f$seed.out")
    error_ref=$(grep -m1 '^spmd ensemble: error:' "$WORK/ens_f${seed}_ref.out" | sed -e "s#f${seed}_ref\.h5#f$seed.h5#g" -e "s#c${seed}_ref\.h5#c$seed.h5#g")
    if [ $rc != 0 ] && [ $rc_ref != 0 ] && [ -n "$error" ] && { [ "$error" = "$error_ref" ] || {
      [[ $error == *"look unscaled"* ]] && [[ $error_ref == *"look unscaled"* ]]; }; }; then
      error=${error#spmd ensemble: error: }
      echo "ok   ensemble f$seed: refused as its native copy is (${error:0:100})"
    else
      fail "ensemble f$seed: rc=$rc, on the native copy rc=$rc_ref"
      sed 's/^/     | ref: /' "$WORK/ens_f${seed}_ref.out" | head -20
    fi
    return 0
  fi
  if [ "$(epochs "$D/e$seed.json")" = "$(epochs "$D/e${seed}_ref.json")" ]; then
    echo "ok   ensemble f$seed ($ranks x $devices members, batch $train_batch): the epochs of its native copy"
  else fail "ensemble f$seed: epochs $(epochs "$D/e$seed.json"), native copy $(epochs "$D/e${seed}_ref.json")"; fi
  run "eval_cnn_f$seed" 0 120 "${launch[@]}" "$SPMD" eval --data "$D/f$seed.h5" "${keys[@]}" --model cnn \
    --weights "$D/c$seed.h5" --input-scale "$scale" --devices "$devices" --per-device-batch "$batch" \
    --strategy "$strategy" --predictions "$D/pc$seed.h5" --hang-timeout 30 || return 0
  expect_in "eval --model cnn f$seed counts every example once" " $strategy +[0-9]+ +$n "
  run "eval_cnn_f${seed}_ref" 0 120 "$SPMD" eval --data "$D/f${seed}_ref.h5" --model cnn --weights "$D/c$seed.h5" \
    --input-scale "$ref_scale" --predictions "$D/pc${seed}_ref.h5" --hang-timeout 30 || return 0
  run "eval_cnn_f${seed}_same" 0 60 $PY "$GEN" same "$D/pc$seed.h5" "$D/pc${seed}_ref.h5"
}
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
  cnn_case "$seed"
  [ "$n" -lt 5 ] && continue
  # The reference holds the values as float32 (float64 kept): auto's factor given as such.
  ref_scale=$scale
  if [ "$scale" = auto ]; then
    ref_scale=none; grep -q '"x_dtype": "[<>]u1"' "$D/f$seed.json" && ref_scale=1/255
  fi
  read -r -a options < <($PY -c "import json; print(' '.join(json.load(open('$D/f$seed.json'))['logreg_options']))")
  run "logreg_f$seed" 0 120 "${launch[@]}" "$SPMD" logreg --data "$D/f$seed.h5" "${keys[@]}" --input-scale "$scale" \
    "${options[@]}" --maxiter 4 --json "$D/l$seed.json" --quiet --hang-timeout 30
  run "logreg_f${seed}_ref" 0 120 mpi "$ranks" "$SPMD" logreg --data "$D/f${seed}_ref.h5" --input-scale "$ref_scale" \
    "${options[@]}" --maxiter 4 --json "$D/l${seed}_ref.json" --quiet --hang-timeout 30
  checks=$((checks + 1))
  if [ "$(value "$D/l$seed.json")" = "$(value "$D/l${seed}_ref.json")" ]; then
    echo "ok   logreg f$seed on $ranks rank(s), ${options[*]:-default options}: the objective of its native contiguous copy"
  else fail "logreg f$seed: objective $(value "$D/l$seed.json"), native copy $(value "$D/l${seed}_ref.json")"; fi
done
finish
