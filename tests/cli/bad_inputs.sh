#!/usr/bin/env bash
# Bad input (issue 7), for every workload it applies to: eval --model zero|cnn|logreg,
# logreg, ensemble (--train and --test). Each case checks that the job fails within 20 s,
# that EVERY rank exits non-zero by itself (mpirun is told not to kill the others, so a
# rank left waiting shows up as a timeout) or is ended by MPI_Abort, that the message names
# the culprit (file, dataset, option or rank), and that no output file (--json,
# --weights-out, --metrics-csv, --checkpoint) appears. Also what must work: more ranks
# than examples. The malformed files come from tests/support/make_bad_inputs.py.
source "$(dirname "$0")/../support/cli_lib.sh"
BAD=$WORK/bad
OUT=$WORK/out      # where every command is told to write; must stay empty on failure
RC=$WORK/rc        # each rank's exit status, one file per rank
mkdir -p "$OUT" "$RC"
/usr/bin/python3 "$(dirname "$0")/../support/make_bad_inputs.py" "$BAD" || { echo "FAIL make_bad_inputs.py"; exit 1; }
# A CNN checkpoint for eval --model cnn, trained in a second; and foreign ones made from it.
"$SPMD" ensemble --train "$BAD/img_good.h5" --test "$BAD/img_good.h5" --epochs 1 --checkpoint "$BAD/ck.h5" >"$WORK/ck.out" 2>&1 ||
  { cat "$WORK/ck.out"; echo "FAIL training the checkpoint"; exit 1; }
/usr/bin/python3 "$(dirname "$0")/../support/make_bad_inputs.py" "$BAD" "$BAD/ck.h5" || { echo "FAIL checkpoint variants"; exit 1; }

source "$(dirname "$0")/../support/rank_exits.sh"
bad_inputs=0

# refuse NAME NP CULPRIT CMD...: the job fails (every rank, within 20 s), the output names
# CULPRIT (grep -E), no output file appears.
refuse() {
  local name=$1 np=$2 culprit=$3; shift 3
  bad_inputs=$((bad_inputs + 1))
  rm -rf "$OUT" "$RC/$name"; mkdir -p "$OUT" "$RC/$name"
  run "$name" nonzero 30 job "$RC/$name" "$np" "$@" || return 0
  expect_in "$name: names the culprit" "$culprit"
  every_rank_failed "$name" "$np"
  no_outputs "$name"
}

# The workloads, each with every output option pointed into $OUT. "$@" is the input.
CK=$BAD/ck.h5
eval_zero() { "$SPMD" eval --model zero --json "$OUT/r.json" --data "$@"; }
eval_cnn() { "$SPMD" eval --model cnn --weights "$CK" --json "$OUT/r.json" --data "$@"; }
eval_logreg() { "$SPMD" eval --model logreg --weights "$BAD/weights_good.h5" --features-key X --labels-key y --json "$OUT/r.json" --data "$@"; }
logreg() { "$SPMD" logreg --classes 3 --json "$OUT/r.json" --weights-out "$OUT/w.h5" --metrics-csv "$OUT/m.csv" --data "$@"; }
ens_train() { "$SPMD" ensemble --classes 10 --batch-size 4 --test "$BAD/img_good.h5" --json "$OUT/r.json" --checkpoint "$OUT/ck.h5" --metrics-csv "$OUT/m.csv" --train "$@"; }
ens_test() { "$SPMD" ensemble --classes 10 --batch-size 4 --train "$BAD/img_good.h5" --json "$OUT/r.json" --checkpoint "$OUT/ck.h5" --metrics-csv "$OUT/m.csv" --test "$@"; }
export -f eval_zero eval_cnn eval_logreg logreg ens_train ens_test
export SPMD OUT BAD CK
IMAGE_WORKLOADS="eval_zero eval_cnn ens_train ens_test"
TABLE_WORKLOADS="eval_logreg logreg"
# NP alternates between 2 and 3 ranks.
np_for() { [ $((${#1} % 2)) = 0 ] && echo 2 || echo 3; }
for_all() {  # for_all IMAGE_FILE TABLE_FILE CULPRIT LABEL [EXTRA...]
  local img=$1 tab=$2 culprit=$3 label=$4 w; shift 4
  for w in $IMAGE_WORKLOADS; do [ -n "$img" ] && refuse "$label[$w]" "$(np_for "$w")" "$culprit" bash -c "$w \"\$@\"" _ "$img" "$@"; done
  for w in $TABLE_WORKLOADS; do [ -n "$tab" ] && refuse "$label[$w]" "$(np_for "$w")" "$culprit" bash -c "$w \"\$@\"" _ "$tab" "$@"; done
}

# --- Files ---
for_all "$BAD/nope.h5" "$BAD/nope.h5" "nope\.h5'.*(does not exist|not readable)" missing_file
for_all "$BAD/not_hdf5.h5" "$BAD/not_hdf5.h5" "not_hdf5\.h5'.*not an HDF5 file" not_hdf5
for_all "$BAD/img_truncated.h5" "$BAD/img_truncated.h5" "img_truncated\.h5" truncated_hdf5
for_all "$BAD/img_truncated_header.h5" "" "img_truncated_header\.h5" truncated_superblock
# No labels: a named key is refused naming its option; left out, detection finds none.
for_all "$BAD/img_no_labels.h5" "$BAD/tab_no_y.h5" "has no dataset 'y' \(the labels, from --labels-key\)|no labels-like dataset" missing_key
for_all "$BAD/img_rank1.h5" "$BAD/tab_rank1.h5" "features dataset '(images|X)' has shape \[[0-9]+\] \(1-D\)" features_1d
for_all "$BAD/img_labels_2col.h5" "$BAD/tab_labels_2col.h5" "labels dataset '(labels|y)' has shape \[37, 2\] \(2-D\); labels must be 1-D \[N\] \(or \[N, 1\]\): one-hot labels\? store their class indices" labels_2d
for_all "$BAD/img_label_huge.h5" "$BAD/tab_label_huge.h5" "rank [0-9]+: .*row 33 has label 1000000000, (above the largest class index .*np.unique|outside \[0, (10|3)\))" label_huge
# LZF: h5py writes it without a plugin; this HDF5 needs one (an empty plugin path hides any installed).
HDF5_PLUGIN_PATH=$WORK/no-plugins for_all "$BAD/img_lzf.h5" "$BAD/tab_lzf.h5" "features dataset '(images|X)' is compressed with the HDF5 filter 'lzf' \(id 32000\).*hdf5-plugin-lzf.*h5repack" lzf_without_plugin
for_all "$BAD/img_n_mismatch.h5" "$BAD/tab_n_mismatch.h5" "has 37 rows but labels dataset '(labels|y)' has 36" n_mismatch
for_all "$BAD/img_empty.h5" "$BAD/tab_empty.h5" "_empty\.h5.*empty \(N = 0" empty_dataset
for_all "$BAD/img_label_neg.h5" "$BAD/tab_label_neg.h5" "rank [0-9]+: .*row 33 has label -1, outside \[0, (10|3)\)" label_negative
for_all "$BAD/img_label_big.h5" "$BAD/tab_label_big.h5" "rank [0-9]+: .*row 33 has label (10|3), outside \[0, (10|3)\)" label_too_big
for_all "$BAD/img_string_features.h5" "$BAD/tab_string_features.h5" "features dataset '(images|X)' has dtype string" string_features
for_all "$BAD/img_string_labels.h5" "$BAD/tab_string_labels.h5" "labels dataset '(labels|y)' has dtype string; .*class names\? store their indices .*np\.unique\(labels, return_inverse=True\)" string_labels
for_all "" "$BAD/tab_float_labels.h5" "labels dataset 'y': row [0-9]+ has label [0-9]+\.5; float labels must be whole numbers" float_labels
for kind in nan_f32 inf_f32 nan_f64 inf_f64; do
  for_all "$BAD/img_$kind.h5" "$BAD/tab_$kind.h5" "rank [0-9]+: .*_$kind\.h5'.*row 33 has a non-finite value" "$kind"
done
# Images the CNN cannot take (eval --model zero evaluates any shape: not a bad input there):
# another shape than the checkpoint's (eval) or than the training set's (the test set).
IMAGE_WORKLOADS="eval_cnn ens_test"
for_all "$BAD/img_32x32.h5" "" "28x28x1.*32, ?32, ?1" image_32x32
for_all "$BAD/img_28x28x3.h5" "" "28x28x1.*28, ?28, ?3" image_28x28x3
# Unscaled float images in the last rank's rows only (the other ranks' rows lie in [0, 1]):
# the range is agreed over the ranks, so every rank refuses, not only the one that saw them.
/usr/bin/python3 -c "
import h5py, sys
with h5py.File(sys.argv[1]) as f, h5py.File(sys.argv[2], 'w') as g:
    x = f['images'][...]
    x[-5:] *= 255
    g['images'], g['labels'] = x, f['labels'][...]" "$BAD/img_good_f32.h5" "$BAD/img_partly_unscaled.h5"
refuse "partly_unscaled[eval_cnn]" 3 "img_partly_unscaled\.h5'.*float32 images with values in \[0, [0-9.]+\]: images are expected in \[0, 1\]" \
  bash -c 'eval_cnn "$@"' _ "$BAD/img_partly_unscaled.h5"
IMAGE_WORKLOADS="ens_train"
for_all "$BAD/img_32x32.h5" "" "needs images of 32x32x1, got samples of shape \[28, ?28, ?1\]" image_32x32
for_all "$BAD/img_28x28x3.h5" "" "needs images of 28x28x3, got samples of shape \[28, ?28, ?1\]" image_28x28x3
IMAGE_WORKLOADS="eval_zero eval_cnn ens_train ens_test"

# Unreadable file: root reads anything, so these jobs run without the capabilities that
# let root ignore file permissions.
if command -v capsh >/dev/null && capsh --has-p=cap_dac_override 2>/dev/null; then
  cp "$BAD/img_good.h5" "$BAD/img_unreadable.h5"; cp "$BAD/tab_good.h5" "$BAD/tab_unreadable.h5"
  chmod 000 "$BAD/img_unreadable.h5" "$BAD/tab_unreadable.h5"
  NO_DAC=1 for_all "$BAD/img_unreadable.h5" "$BAD/tab_unreadable.h5" "_unreadable\.h5'.*not readable" unreadable
else
  echo "SKIP unreadable-file cases: capsh cannot drop cap_dac_override here (root would read a chmod 000 file)"
fi

# --- Model files ---
refuse weights_wrong_features 2 "weights_wrong_features\.h5' expect 5 features.*tab_good\.h5' has 4" \
  "$SPMD" eval --model logreg --weights "$BAD/weights_wrong_features.h5" --features-key X --labels-key y --data "$BAD/tab_good.h5" --json "$OUT/r.json"
refuse weights_1d 3 "weights_1d\.h5'.*'W' must be 2-D" \
  "$SPMD" eval --model logreg --weights "$BAD/weights_1d.h5" --features-key X --labels-key y --data "$BAD/tab_good.h5" --json "$OUT/r.json"
refuse weights_sklearn_layout 2 "weights_sklearn\.h5': the intercept 'b' must be \[classes\] = \[4\].*W looks transposed.*coef_\.T" \
  "$SPMD" eval --model logreg --weights "$BAD/weights_sklearn.h5" --features-key X --labels-key y --data "$BAD/tab_good.h5" --json "$OUT/r.json"
refuse weights_nan 2 "weights_nan\.h5'.*(NaN|nan|non-finite)" \
  "$SPMD" eval --model logreg --weights "$BAD/weights_nan.h5" --features-key X --labels-key y --data "$BAD/tab_good.h5" --json "$OUT/r.json"
refuse weights_for_other_data 3 "weights_good\.h5' expect 4 features.*img_good\.h5' has 784" \
  "$SPMD" eval --model logreg --weights "$BAD/weights_good.h5" --data "$BAD/img_good.h5" --json "$OUT/r.json"
refuse cnn_weights_not_checkpoint 2 "weights_good\.h5' is not an spmd ensemble checkpoint" \
  "$SPMD" eval --model cnn --weights "$BAD/weights_good.h5" --data "$BAD/img_good.h5" --json "$OUT/r.json"
refuse cnn_other_shape 3 "ck_other_shape\.h5'.*824458" \
  "$SPMD" eval --model cnn --weights "$BAD/ck_other_shape.h5" --data "$BAD/img_good.h5" --json "$OUT/r.json"
refuse cnn_nan_params 2 "ck_nan\.h5'.*(NaN|nan|non-finite)" \
  "$SPMD" eval --model cnn --weights "$BAD/ck_nan.h5" --data "$BAD/img_good.h5" --json "$OUT/r.json"
refuse cnn_no_params 3 "ck_no_params\.h5' has no dataset '/params'" \
  "$SPMD" eval --model cnn --weights "$BAD/ck_no_params.h5" --data "$BAD/img_good.h5" --json "$OUT/r.json"
refuse cnn_truncated_weights 2 "img_truncated\.h5" \
  "$SPMD" eval --model cnn --weights "$BAD/img_truncated.h5" --data "$BAD/img_good.h5" --json "$OUT/r.json"
for ck in ck_other_shape ck_nan ck_no_params weights_good; do
  cp "$BAD/$ck.h5" "$WORK/resume_$ck.h5"   # --resume would overwrite it on success
  refuse "resume[$ck]" 2 "resume_$ck\.h5" "$SPMD" ensemble --train "$BAD/img_good.h5" --test "$BAD/img_good.h5" --batch-size 4 \
    --epochs 2 --checkpoint "$WORK/resume_$ck.h5" --resume --json "$OUT/r.json"
done

# --- Options ---
# Each command with every output it can write pointed into $OUT.
E=("$SPMD" eval --data "$BAD/img_good.h5" --json "$OUT/r.json")
L=("$SPMD" logreg --data "$BAD/tab_good.h5" --json "$OUT/r.json" --weights-out "$OUT/w.h5" --metrics-csv "$OUT/m.csv")
N=("$SPMD" ensemble --train "$BAD/img_good.h5" --test "$BAD/img_good.h5" --json "$OUT/r.json" --checkpoint "$OUT/ck.h5" \
   --metrics-csv "$OUT/m.csv")
refuse "eval[--per-device-batch -1]" 2 "per-device-batch must be > 0" "${E[@]}" --per-device-batch -1
refuse "ensemble[--batch-size -4]" 3 "batch-size must be > 0" "${N[@]}" --batch-size -4
refuse "ensemble[--eval-batch 0]" 2 "eval-batch must be > 0" "${N[@]}" --eval-batch 0
for d in 0 -2; do
  refuse "eval[--devices $d]" 2 "devices must be between 1" "${E[@]}" --devices $d
  refuse "logreg[--devices $d]" 3 "devices must be between 1" "${L[@]}" --devices $d
  refuse "ensemble[--devices $d]" 2 "devices must be between 1" "${N[@]}" --devices $d
done
for w in 0 4097; do
  refuse "eval[--count-window $w]" 2 "count-window must be between 1 and 4096" "${E[@]}" --strategy infinite-pad --count-window $w
done
refuse "eval[--strategy pad-everything]" 3 "strategy must be one of.*pad-everything" "${E[@]}" --strategy pad-everything
refuse "logreg[--linesearch armijo]" 2 "linesearch.*armijo" "${L[@]}" --linesearch armijo
for cmd in E L N; do
  declare -n argv=$cmd
  refuse "${cmd}[--backend opencl]" 2 "backend must be one of.*opencl" "${argv[@]}" --backend opencl
done
refuse "logreg[--maxiter -5]" 2 "maxiter.*>= 1.*-5" "${L[@]}" --maxiter -5
refuse "logreg[--history 0]" 3 "history.*>= 1" "${L[@]}" --history 0
refuse "logreg[--history -1]" 2 "history.*>= 1" "${L[@]}" --history -1
for lr in 0 -0.01 nan; do refuse "ensemble[--learning-rate $lr]" 2 "learning.rate" "${N[@]}" --learning-rate $lr; done
for m in -0.1 1 1.5; do refuse "ensemble[--momentum $m]" 3 "momentum" "${N[@]}" --momentum $m; done
refuse "eval[keep-remainder, 2 ranks]" 2 "keep-remainder needs exactly one device" "${E[@]}" --strategy keep-remainder
refuse "eval[keep-remainder, 2 devices]" 1 "keep-remainder needs exactly one device" "${E[@]}" --strategy keep-remainder --devices 2
if nvidia-smi -L >/dev/null 2>&1; then
  echo "SKIP --backend cuda without a GPU: this machine has one"
else
  for cmd in E L N; do
    declare -n argv=$cmd
    refuse "${cmd}[--backend cuda, no GPU]" 2 "rank 0 .*--backend cuda but no GPU" "${argv[@]}" --backend cuda
  done
fi

# Ranks launched with different arguments (MPMD): options-hash mismatch.
mpmd() {  # mpmd NAME DIFFERING_OPTION CMD...: rank 1 gets the extra option
  local name=$1 extra=$2; shift 2
  bad_inputs=$((bad_inputs + 1))
  rm -rf "$OUT"; mkdir -p "$OUT"
  run "$name" nonzero 20 mpirun --oversubscribe -np 1 "$@" : -np 1 "$@" $extra || return 0
  expect_in "$name: names both ranks' values" "different options.*rank 1 has '${extra#--}"
  no_outputs "$name"
}
mpmd "mpmd[eval]" "--per-device-batch=8" "${E[@]}"
mpmd "mpmd[logreg]" "--maxiter=5" "${L[@]}"
mpmd "mpmd[ensemble]" "--seed=5" "${N[@]}"
# Different input files behind the same path are caught too: each rank sees its own copy.
mkdir -p "$WORK/r0" "$WORK/r1"; cp "$BAD/img_good.h5" "$WORK/r0/d.h5"; cp "$BAD/img_label_big.h5" "$WORK/r1/d.h5"
touch -d '2020-01-01' "$WORK/r1/d.h5"
refuse "mpmd[same path, other file]" 2 "different options or input files.*data=" bash -c \
  'cd "$0/r$OMPI_COMM_WORLD_RANK" && "$SPMD" eval --data d.h5 --json "$OUT/r.json"' "$WORK"

# Output paths in a missing folder, or a read-only one: refused before any work. The
# command keeps its other outputs (in $OUT), so a late failure would leave them there.
# with_output CMD OPTION PATH: sets WITH to the command array CMD with the value of OPTION
# replaced by PATH.
with_output() {
  local -n from=$1
  local i
  WITH=()
  for ((i = 0; i < ${#from[@]}; i++)); do
    if [ "${from[i]}" = "$2" ]; then WITH+=("$2" "$3"); i=$((i + 1)); else WITH+=("${from[i]}"); fi
  done
}
OUTPUTS="E:--json L:--json L:--weights-out L:--metrics-csv N:--json N:--checkpoint N:--metrics-csv"
for spec in $OUTPUTS; do
  cmd=${spec%%:*}; opt=${spec#*:}
  with_output $cmd $opt "$OUT/nowhere/f"
  refuse "missing_folder[$cmd $opt]" 2 "${opt#--} '.*nowhere/f': folder .* does not exist" "${WITH[@]}"
  expect_not_in "missing_folder[$cmd $opt]: no work done" '^ +1 +[0-9]|every example counted|step 1/'
done
if command -v capsh >/dev/null && capsh --has-p=cap_dac_override 2>/dev/null; then
  RO=$WORK/readonly; mkdir -p "$RO"; chmod 555 "$RO"
  for spec in $OUTPUTS; do
    cmd=${spec%%:*}; opt=${spec#*:}
    with_output $cmd $opt "$RO/f"
    name="readonly_folder[$cmd $opt]"
    NO_DAC=1 refuse "$name" 2 "${opt#--} '.*readonly/f'.*(not writable|read-only|Permission denied)" "${WITH[@]}"
    expect_not_in "$name: fails before any work" '^ +1 +[0-9]|every example counted|step 1/'
    [ -z "$(ls -A "$RO")" ] || fail "$name: left $(ls -A "$RO") in the read-only folder"
  done
  chmod 755 "$RO"
else
  echo "SKIP read-only folder cases: capsh cannot drop cap_dac_override here"
fi

# --- What must work: more ranks than examples (ranks with zero rows) ---
py() { /usr/bin/python3 -c "$1"; }
run more_ranks_eval_zero 0 60 mpi 6 "$SPMD" eval --data "$BAD/img_rows4.h5" --json "$WORK/m1.json"
run more_ranks_eval_zero_total 0 10 py "import json; j=json.load(open('$WORK/m1.json')); assert j['total']==4 and j['examples_per_rank']==[1,1,1,1,0,0], j"
run more_ranks_eval_cnn 0 60 mpi 6 "$SPMD" eval --data "$BAD/img_rows4.h5" --model cnn --weights "$CK" --strategy infinite-pad \
  --per-device-batch 1 --json "$WORK/m2.json"
run more_ranks_eval_cnn_total 0 10 py "import json; j=json.load(open('$WORK/m2.json')); assert j['total']==4, j"
run more_ranks_eval_logreg 0 60 mpi 6 "$SPMD" eval --data "$BAD/tab_rows4.h5" --features-key X --labels-key y --model logreg \
  --weights "$BAD/weights_good.h5" --json "$WORK/m3.json"
run more_ranks_eval_logreg_total 0 10 py "import json; j=json.load(open('$WORK/m3.json')); assert j['total']==4, j"
run more_ranks_logreg_np1 0 60 "$SPMD" logreg --data "$BAD/tab_rows4.h5" --maxiter 20 --metrics-csv "$WORK/l1.csv" --json "$WORK/l1.json"
run more_ranks_logreg_np6 0 60 mpi 6 "$SPMD" logreg --data "$BAD/tab_rows4.h5" --maxiter 20 --metrics-csv "$WORK/l6.csv" --json "$WORK/l6.json"
run more_ranks_logreg_same_iterates 0 10 py "
import csv, json
a=[r[:5] for r in csv.reader(open('$WORK/l1.csv'))]; b=[r[:5] for r in csv.reader(open('$WORK/l6.csv'))]
assert len(a)>2 and a==b, (a[:3], b[:3]); assert json.load(open('$WORK/l6.json'))['ranks']==6"
run more_ranks_ensemble 0 60 mpi 6 "$SPMD" ensemble --train "$BAD/img_rows4.h5" --test "$BAD/img_rows4.h5" --batch-size 2 --json "$WORK/m4.json"
run more_ranks_ensemble_members 0 10 py "import json; j=json.load(open('$WORK/m4.json')); assert len(j['epochs'][0]['member_test_accuracy'])==6, j"

echo "bad inputs tried: $bad_inputs"
finish
