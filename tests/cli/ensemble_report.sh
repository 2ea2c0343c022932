#!/usr/bin/env bash
# What spmd ensemble says about its run (issue 18): a resumed run says so before it trains
# (not after its last epoch), and --json names both sets as eval's JSON names its data
# (data, keys, examples used, dataset_rows in the file).
source "$(dirname "$0")/../support/cli_lib.sh"
TRAIN=$DATA/fashion/train.h5
TEST=$DATA/fashion/test.h5
SMALL=(--train "$TRAIN" --test "$TEST" --train-limit 320 --test-limit 600 --eval-batch 128 --progress-every 1)
py() { /usr/bin/python3 -c "$1"; }
first_line() { grep -nE -m1 -- "$1" "$LAST_OUT" | cut -d: -f1; }

run first_epoch 0 300 mpi 2 "$SPMD" ensemble "${SMALL[@]}" --epochs 1 --checkpoint "$WORK/ck.h5"
expect_not_in "a fresh run says nothing of resuming" 'resumed from'
run resumed 0 300 mpi 2 "$SPMD" ensemble "${SMALL[@]}" --epochs 2 --checkpoint "$WORK/ck.h5" --resume \
  --json "$WORK/resumed.json"
expect_in "says where it resumed" "^# resumed from $WORK/ck.h5 at epoch 2 step 0$"
resumed_at=$(first_line '^# resumed from')
progress_at=$(first_line '^# epoch 2 step [0-9]+/')
row_at=$(first_line '^ +2 +[0-9.]+ +[0-9.]+')
checks=$((checks + 1))
if [ -n "$resumed_at" ] && [ -n "$progress_at" ] && [ -n "$row_at" ] && [ "$resumed_at" -lt "$progress_at" ] &&
   [ "$resumed_at" -lt "$row_at" ]; then
  echo "ok   resumed line (line $resumed_at) before the first progress line ($progress_at) and epoch row ($row_at)"
else
  fail "resumed line at '$resumed_at', first progress line at '$progress_at', first epoch row at '$row_at'"
fi
expect_in "the summary names the limits" '\(320 of 60000 examples\), test .* \(600 of 10000\)'

# The sets in --json as eval's JSON has its data: the same key names and keys structure.
run eval_json 0 60 "$SPMD" eval --data "$TEST" --json "$WORK/eval.json"
run json_sets 0 10 py "
import json
j = json.load(open('$WORK/resumed.json')); e = json.load(open('$WORK/eval.json'))
for name, path, used, rows in (('train', '$TRAIN', 320, 60000), ('test', '$TEST', 600, 10000)):
    s = j[name]
    assert s['data'] == path and s['examples'] == used and s['dataset_rows'] == rows, (name, s)
    assert set(s['keys']) == set(e['keys']), (name, s['keys'], e['keys'])
    assert (s['keys']['features'], s['keys']['labels']) == ('images', 'labels'), (name, s['keys'])
    assert (s['path'], s['features'], s['labels']) == (path, 'images', 'labels'), (name, s)  # the older names stay
assert e['data'] == '$TEST' and e['dataset_rows'] == 10000, e"
# --quiet, as eval's and logreg's: no progress lines, the epoch rows and summary stay;
# with --progress-every it is a contradiction, refused naming both.
QUIET=(--train "$TRAIN" --test "$TEST" --train-limit 320 --test-limit 600 --eval-batch 128)
run quiet 0 300 mpi 2 "$SPMD" ensemble "${QUIET[@]}" --epochs 1 --quiet
expect_not_in "--quiet: no progress lines" '^# epoch 1 step'
expect_in "--quiet: the epoch row stays" '^ +1 +[0-9.]+ +[0-9.]+'
expect_in "--quiet: the summary stays" 'training images/s per member'
run quiet_and_progress nonzero 30 mpi 2 "$SPMD" ensemble "${QUIET[@]}" --quiet --progress-every 3
expect_in "--quiet with --progress-every is refused naming both" '--quiet and --progress-every contradict'
# The label rule logreg and eval apply holds here too (issue 31): labels 0..9 plus one 12
# infer 13 classes, 2 of them without an example: said before training and in the JSON.
/usr/bin/python3 - "$TEST" "$WORK/gap.h5" <<'PY' || { echo "FAIL making gap.h5"; exit 1; }
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    images, labels = f["images"][:256], f["labels"][:256].copy()
labels[7] = 12
with h5py.File(sys.argv[2], "w") as g:
    g["images"], g["labels"] = images, labels
PY
run empty_classes 0 120 mpi 2 "$SPMD" ensemble --train "$WORK/gap.h5" --test "$WORK/gap.h5" --epochs 1 --quiet \
  --json "$WORK/gap.json"
expect_in "empty_classes: warned before the epochs" "^# WARNING: .*gap.h5.*labels.*: 2 of the 13 inferred classes \(1 \+ the largest label\) have no example"
expect_in "empty_classes: a 13-class model" "classes 13"
run empty_classes_json 0 10 /usr/bin/python3 -c "import json; w = json.load(open('$WORK/gap.json'))['warnings']; assert len(w) == 1 and '2 of the 13 inferred classes' in w[0], w"
# Each epoch's training loss and accuracy are that epoch's own: with a learning rate too small
# to move the model, every epoch sees the same 320 examples (in another order) through the
# same model, so its mean loss and accuracy repeat epoch 1's, whatever the epoch (a sum carried
# over from the epochs before would double them in epoch 2). The same through a resume.
run frozen_epochs 0 300 mpi 2 "$SPMD" ensemble "${SMALL[@]}" --epochs 3 --learning-rate 1e-12 --json "$WORK/frozen.json" \
  --checkpoint "$WORK/frozen.h5"
run frozen_resumed 0 300 mpi 2 "$SPMD" ensemble "${SMALL[@]}" --epochs 4 --learning-rate 1e-12 --json "$WORK/frozen4.json" \
  --checkpoint "$WORK/frozen.h5" --resume
run frozen_epochs_repeat 0 10 /usr/bin/python3 -c "
import json
e = json.load(open('$WORK/frozen.json'))['epochs'] + json.load(open('$WORK/frozen4.json'))['epochs'][-1:]
assert [x['epoch'] for x in e] == [1, 2, 3, 4], [x['epoch'] for x in e]
for x in e:
    print('epoch', x['epoch'], 'train loss', x['train_loss'], 'train accuracy', x['train_accuracy'])
    assert 0 <= x['train_accuracy'] <= 1, x
    assert abs(x['train_loss'] - e[0]['train_loss']) <= 1e-5 * e[0]['train_loss'], (x['train_loss'], e[0]['train_loss'])
    assert abs(x['train_accuracy'] - e[0]['train_accuracy']) <= 1 / 320, (x['train_accuracy'], e[0]['train_accuracy'])"
cat "$LAST_OUT"
finish
