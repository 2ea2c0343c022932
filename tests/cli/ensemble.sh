#!/usr/bin/env bash
# spmd ensemble end to end: layout independence (4 members as 1x4, 2x2, 4x1: bitwise the
# same parameters and metrics), resume = straight run bitwise, SIGTERM writes a checkpoint
# and exits cleanly, eval --model cnn of the checkpoint, refused checkpoints, bad options.
source "$(dirname "$0")/../support/cli_lib.sh"
TRAIN=$DATA/fashion/train.h5
TEST=$DATA/fashion/test.h5
SMALL=(--train "$TRAIN" --test "$TEST" --train-limit 320 --test-limit 600 --eval-batch 128)
py() { /usr/bin/python3 -c "$1"; }
same_results() {  # A.json B.json: the same digest and the same metrics (wall-clock fields aside)
  py "
import json
a=json.load(open('$1')); b=json.load(open('$2'))
strip=lambda j:[{k:v for k,v in e.items() if k not in ('seconds','images_per_second')} for e in j['epochs']]
assert a['params_digest']==b['params_digest'], (a['params_digest'], b['params_digest'])
assert strip(a)==strip(b), (strip(a), strip(b))"
}

for layout in "1 4" "2 2" "4 1"; do
  set -- $layout
  run "layout_${1}x${2}" 0 300 mpi $1 "$SPMD" ensemble "${SMALL[@]}" --epochs 1 --devices $2 --json "$WORK/l$1$2.json"
done
run layouts_identical_2x2 0 10 same_results "$WORK/l14.json" "$WORK/l22.json"
run layouts_identical_4x1 0 10 same_results "$WORK/l14.json" "$WORK/l41.json"
run members_differ 0 10 py "
import json; e=json.load(open('$WORK/l14.json'))['epochs'][0]
assert len(e['member_test_accuracy'])==4 and len(set(e['member_test_accuracy']))>1, e"

# Resume: 2 epochs straight == 1 epoch, stop, resume, 1 more.
run straight 0 300 mpi 2 "$SPMD" ensemble "${SMALL[@]}" --epochs 2 --json "$WORK/straight.json"
run first_half 0 300 mpi 2 "$SPMD" ensemble "${SMALL[@]}" --epochs 1 --checkpoint "$WORK/ck.h5"
# ...and resumed on another layout with the same number of members.
run resumed 0 300 mpi 1 "$SPMD" ensemble "${SMALL[@]}" --epochs 2 --devices 2 --checkpoint "$WORK/ck.h5" --resume --json "$WORK/resumed.json"
expect_in "says where it resumed" 'resumed from .* at epoch 2'
run resume_bitwise 0 10 same_results "$WORK/straight.json" "$WORK/resumed.json"

# The checkpoint evaluates with spmd eval --model cnn, to the same count as the training report.
run eval_cnn 0 120 mpi 2 "$SPMD" eval --data "$TEST" --model cnn --weights "$WORK/ck.h5" --strategy infinite-pad --json "$WORK/ev.json"
run eval_cnn_total 0 10 py "
import json; j=json.load(open('$WORK/ev.json')); assert j['total']==10000 and 0.3 < j['accuracy'] <= 1, j"

# SIGTERM (what Slurm sends at the time limit): checkpoint at the next step, clean exit,
# and the resumed run ends where an uninterrupted one does. The signal goes at the first
# progress line (step 20 of 200), and rank 1's steps take 5 ms longer (the same bits): at
# 5000 images/s the whole epoch is 1.3 s, and a signal sent a second later could land after it.
( timeout 300 mpirun -np 2 --oversubscribe "$SPMD" ensemble --train "$TRAIN" --test "$TEST" --train-limit 6400 --test-limit 600 \
    --eval-batch 128 --epochs 1 --checkpoint "$WORK/term.h5" --json "$WORK/term.json" --simulate-slow 1:0.005 \
    >"$WORK/term.out" 2>&1; echo $? >"$WORK/term.rc" ) &
for i in $(seq 1 300); do grep -q "step" "$WORK/term.out" 2>/dev/null && break; sleep 0.1; done
# Signal the ranks (as Slurm does at the time limit), not mpirun.
pkill -TERM -f "^$SPMD ensemble --train $TRAIN --test $TEST --train-limit 6400" || true
wait
LAST_OUT=$WORK/term.out
checks=$((checks + 1))
if [ "$(cat "$WORK/term.rc")" = 0 ]; then echo "ok   sigterm_clean_exit"; else fail "sigterm_clean_exit: rc=$(cat "$WORK/term.rc")"; fi
expect_in "sigterm says how to resume" 'stopped by SIGTERM at epoch 1 step [0-9]+ of 200: checkpoint written to .*--resume'
run sigterm_resume 0 300 mpi 2 "$SPMD" ensemble --train "$TRAIN" --test "$TEST" --train-limit 6400 --test-limit 600 \
    --eval-batch 128 --epochs 1 --checkpoint "$WORK/term.h5" --resume --json "$WORK/term2.json"
run sigterm_reference 0 300 mpi 2 "$SPMD" ensemble --train "$TRAIN" --test "$TEST" --train-limit 6400 --test-limit 600 \
    --eval-batch 128 --epochs 1 --json "$WORK/term_ref.json"
run sigterm_resume_bitwise 0 10 same_results "$WORK/term_ref.json" "$WORK/term2.json"

# Refused checkpoints: other options, other member count, corrupt.
run resume_other_lr nonzero 60 mpi 2 "$SPMD" ensemble "${SMALL[@]}" --epochs 2 --learning-rate 0.05 --checkpoint "$WORK/ck.h5" --resume
expect_in "names the differing option" "learning-rate=0.05.*learning-rate=0.1"
# The input scale changes what the members learn: derived from the options' declarations.
run resume_other_scale nonzero 60 mpi 2 "$SPMD" ensemble "${SMALL[@]}" --epochs 2 --input-scale none --checkpoint "$WORK/ck.h5" --resume
expect_in "names the input scale" "input-scale=none.*input-scale=auto"
run resume_other_members nonzero 60 mpi 3 "$SPMD" ensemble "${SMALL[@]}" --epochs 2 --checkpoint "$WORK/ck.h5" --resume
expect_in "names the member counts" 'holds 2 members; this run has 3'
head -c 100000 "$WORK/ck.h5" > "$WORK/corrupt.h5"
run resume_corrupt nonzero 60 mpi 2 "$SPMD" ensemble "${SMALL[@]}" --epochs 2 --checkpoint "$WORK/corrupt.h5" --resume
expect_in "names the corrupt file" 'corrupt.h5'
run resume_missing nonzero 60 mpi 2 "$SPMD" ensemble "${SMALL[@]}" --checkpoint "$WORK/none.h5" --resume
expect_in "names the missing checkpoint" 'none.h5'

# CPU and CUDA members agree within float tolerance (needs a GPU; skipped visibly without).
if "$SPMD" info --backend cuda >/dev/null 2>&1; then
  for backend in cpu cuda; do
    run "backend_$backend" 0 300 "$SPMD" ensemble "${SMALL[@]}" --epochs 1 --devices 1 --backend $backend --json "$WORK/b_$backend.json"
  done
  run cpu_close_to_cuda 0 10 py "
import json; a=json.load(open('$WORK/b_cpu.json'))['epochs'][0]; b=json.load(open('$WORK/b_cuda.json'))['epochs'][0]
assert abs(a['test_accuracy']-b['test_accuracy']) <= 0.005 and abs(a['train_loss']-b['train_loss']) <= 1e-3*a['train_loss'], (a, b)"
else
  echo "SKIP cpu_close_to_cuda: no GPU here (spmd info --backend cuda fails)"
fi

# Bad options and inputs.
for bad in "--learning-rate 0:learning_rate" "--momentum 1:momentum" "--batch-size 0:batch-size" "--epochs 0:epochs"; do
  opt=${bad%:*}; word=${bad##*:}
  run "bad[$opt]" nonzero 20 mpi 2 "$SPMD" ensemble "${SMALL[@]}" $opt
  expect_in "bad[$opt] names $word" "$word"
done
# X/y in the training file, images/labels in the test file: each detected on its own.
run not_images nonzero 30 mpi 2 "$SPMD" ensemble --train "$DATA/logreg-small.h5" --test "$TEST"
expect_in "images shape explained" "has shape \\[N, 20\\]; the CNN takes images \\[N, H, W, C\\] or \\[N, H, W\\]"
run checkpoint_dir_missing nonzero 30 mpi 2 "$SPMD" ensemble "${SMALL[@]}" --checkpoint "$WORK/none/ck.h5"
expect_in "checkpoint folder checked before training" 'does not exist'
finish
