#!/usr/bin/env bash
# Many ranks (ctest label `scale`): 7 (8 for the ensemble, whose 64 members must split evenly)
# and 64 ranks oversubscribed on this machine's cores, small data: a count that divides nothing
# evenly, and many ranks (a 64-rank start costs ~15 s here, so no third size). Eval (pad and
# infinite-pad, 2 devices per rank) counts every example exactly once with the counts of 1
# rank; logreg's iterates are the bits of 1 rank (most of the 64 ranks own a few 2048-row
# chunks, some none); a tiny ensemble of 64 members gives the
# parameters digest of 1 rank x 64 devices. Every run must finish within its time limit
# (a hang or a start-up that grows badly with P fails).
source "$(dirname "$0")/../support/cli_lib.sh"
PY=/usr/bin/python3
EVAL=$DATA/fashion/test.h5
run make_logreg_data 0 60 "$SPMD" data make-classification --samples 140000 --features 20 --classes 3 --informative 5 \
  --seed 1 --out "$WORK/lr.h5"

run eval_1 0 60 "$SPMD" eval --data "$EVAL" --model zero --strategy pad --json "$WORK/eval_1.json"
run logreg_1 0 60 "$SPMD" logreg --data "$WORK/lr.h5" --maxiter 15 --quiet --json "$WORK/logreg_1.json"
run ensemble_1x64 0 300 "$SPMD" ensemble --train "$EVAL" --test "$EVAL" --train-limit 64 --test-limit 100 --batch-size 32 \
  --conv-features 2 --dense-features none --devices 64 --json "$WORK/ens_1.json"

same_counts() {  # eval JSON $1 against the 1-rank run
  $PY -c "
import json
a, b = json.load(open('$WORK/eval_1.json')), json.load(open('$1'))
assert (b['correct'], b['total']) == (a['correct'], a['total']) == (1000, 10000), (b['correct'], b['total'])
assert sum(b['examples_per_rank']) == 10000 and b['confusion_matrix'] == a['confusion_matrix']"
}
same_iterates() {  # logreg JSON $1 against the 1-rank run (wall times aside)
  $PY -c "
import json
strip = lambda j: [{k: v for k, v in h.items() if k != 'seconds'} for h in j['history']]
a, b = json.load(open('$WORK/logreg_1.json')), json.load(open('$1'))
assert b['value'] == a['value'] and strip(b) == strip(a), (a['value'], b['value'])
assert b['status'] == a['status'] and b['ranks'] > 1"
}
same_members() {  # ensemble JSON $1 against 1 rank x 64 devices
  $PY -c "
import json
a, b = json.load(open('$WORK/ens_1.json')), json.load(open('$1'))
assert b['members'] == a['members'] == 64
assert b['params_digest'] == a['params_digest'], (a['params_digest'], b['params_digest'])
assert b['epochs'][-1]['test_accuracy'] == a['epochs'][-1]['test_accuracy']"
}

for sizes in 7:8 64:64; do
  P=${sizes%:*} E=${sizes#*:}
  for s in pad infinite-pad; do
    run "eval_${P}_$s" 0 180 mpi $P "$SPMD" eval --data "$EVAL" --model zero --devices 2 --strategy $s \
      --per-device-batch 16 --json "$WORK/eval_${P}_$s.json"
    run "eval_${P}_${s}_exact" 0 10 same_counts "$WORK/eval_${P}_$s.json"
  done
  run "logreg_$P" 0 180 mpi $P "$SPMD" logreg --data "$WORK/lr.h5" --maxiter 15 --quiet --json "$WORK/logreg_$P.json"
  run "logreg_${P}_bits" 0 10 same_iterates "$WORK/logreg_$P.json"
  run "ensemble_$E" 0 300 mpi $E "$SPMD" ensemble --train "$EVAL" --test "$EVAL" --train-limit 64 --test-limit 100 \
    --batch-size 32 --conv-features 2 --dense-features none --devices $((64 / E)) --json "$WORK/ens_$E.json"
  run "ensemble_${E}_bits" 0 10 same_members "$WORK/ens_$E.json"
done
finish
