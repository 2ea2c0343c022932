#!/usr/bin/env bash
# spmd logreg end to end: bitwise-identical iterates on every layout (N = 5003, not
# divisible by the rank counts), weights usable by spmd eval, outputs well formed, bad
# options refused before any work.
source "$(dirname "$0")/../support/cli_lib.sh"
SMALL=$DATA/logreg-small.h5
py() { /usr/bin/python3 -c "$1"; }

run ref_np1 0 120 "$SPMD" logreg --data "$SMALL" --maxiter 40 --tol 1e-6 --metrics-csv "$WORK/ref.csv" \
  --json "$WORK/ref.json" --weights-out "$WORK/w.h5"
expect_in "live table prints iterations" '^ +1 +[0-9.]+ '
for layout in "2 1" "3 1" "4 1" "1 2" "2 3" "3 2"; do
  set -- $layout
  name="layout_np$1_d$2"
  run "$name" 0 180 mpi $1 "$SPMD" logreg --data "$SMALL" --maxiter 40 --tol 1e-6 --devices $2 --verify-replicas \
    --metrics-csv "$WORK/$name.csv" --json "$WORK/$name.json"
  # Every iterate's value, error and step: the same bits (CSV holds %.17g) as on 1 rank.
  run "${name}_identical" 0 10 py "
import csv
a=[r[:5] for r in csv.reader(open('$WORK/ref.csv'))]; b=[r[:5] for r in csv.reader(open('$WORK/$name.csv'))]
assert len(a)>5 and a==b, (len(a), len(b), next(((x,y) for x,y in zip(a,b) if x!=y), None))"
done
for ls in zoom backtracking; do
  run "linesearch_$ls" 0 120 mpi 2 "$SPMD" logreg --data "$SMALL" --linesearch $ls --json "$WORK/$ls.json"
  run "linesearch_${ls}_json" 0 10 py "
import json; j=json.load(open('$WORK/$ls.json'))
for k in ['status','iterations','value','error','evaluations','setup_seconds','solve_seconds','ranks','devices_per_rank','history']: assert k in j, k
assert j['status'] in ('converged','max_iterations'), j['status']; assert j['ranks']==2
assert j['value'] < 1.3862943611198906, j['value']   # below ln 4, the value at W = 0"
done
run fixed_step 0 60 "$SPMD" logreg --data "$SMALL" --stepsize 0.5 --maxiter 20 --json "$WORK/fixed.json"
run fixed_step_json 0 10 py "
import json; j=json.load(open('$WORK/fixed.json')); h=j['history']
assert all(abs(it['stepsize']-0.5)<1e-12 for it in h), h[:3]"

# The weights drive spmd eval --model logreg; counts identical on every layout.
for layout in "1 1" "2 1" "3 2"; do
  set -- $layout
  run "eval_np$1_d$2" 0 60 mpi $1 "$SPMD" eval --data "$SMALL" --features-key X --labels-key y --model logreg \
    --weights "$WORK/w.h5" --devices $2 --per-device-batch 100 --strategy infinite-pad --json "$WORK/eval$1$2.json"
done
run eval_identical 0 10 py "
import json; r=[json.load(open('$WORK/eval%s.json'%k)) for k in ('11','21','32')]
assert all((x['correct'],x['total'])==(r[0]['correct'],5003) for x in r), [(x['correct'],x['total']) for x in r]
assert r[0]['accuracy'] > 0.5, r[0]['accuracy']"
run eval_wrong_shape nonzero 20 mpi 2 "$SPMD" eval --data "$DATA/rows4097.h5" --features-key X --labels-key y \
  --model logreg --weights "$WORK/w.h5"
expect_in "weights/data mismatch explained" 'expect 20 features'
run eval_not_weights nonzero 20 mpi 2 "$SPMD" eval --data "$SMALL" --features-key X --labels-key y \
  --model logreg --weights "$SMALL"
expect_in "a data file is not weights" "no dataset 'W'"

# CPU and CUDA reach the same objective (needs a GPU; skipped visibly without).
if "$SPMD" info --backend cuda >/dev/null 2>&1; then
  for backend in cpu cuda; do
    run "backend_$backend" 0 120 mpi 2 "$SPMD" logreg --data "$SMALL" --backend $backend --json "$WORK/b_$backend.json"
  done
  run cpu_equals_cuda 0 10 py "
import json; a=json.load(open('$WORK/b_cpu.json')); b=json.load(open('$WORK/b_cuda.json'))
assert abs(a['value']-b['value']) <= 1e-5*abs(a['value']), (a['value'], b['value'])"
else
  echo "SKIP cpu_equals_cuda: no GPU here (spmd info --backend cuda fails)"
fi

# A tol below what float32 arithmetic can reach: the line search's failure is reported as the
# precision limit it is (with the error reached and what to do), not as linesearch_failed.
run precision_limit 0 300 mpi 2 "$SPMD" logreg --data "$DATA/fashion/test.h5" --features-key images --labels-key labels \
  --l2 1 --tol 1e-9 --maxiter 500 --json "$WORK/precision.json"
expect_in "precision_limit is the status" '^ +precision_limit '
expect_in "and it is explained with the error reached" 'precision_limit: no step can lower the objective .*float32.*loosen --tol'
run precision_json 0 10 /usr/bin/python3 -c "import json; j=json.load(open('$WORK/precision.json')); assert j['status']=='precision_limit', j['status']; assert j['error'] > 1e-9, j['error']"

# Bad options: refused up front, naming the option and the constraint.
for bad in "--history 0:history" "--maxiter -1:maxiter" "--linesearch wolfe:linesearch" "--tol -1:tol" \
           "--max-linesearch 0:max_linesearch" "--stepsize -1:stepsize" "--l2 -1:l2"; do
  opt=${bad%%:*}; word=${bad##*:}
  run "bad[$opt]" nonzero 20 mpi 2 "$SPMD" logreg --data "$SMALL" $opt
  expect_in "bad[$opt] names $word" "$word"
done
run weights_out_missing_dir nonzero 20 mpi 2 "$SPMD" logreg --data "$SMALL" --weights-out "$WORK/none/w.h5"
expect_in "output folder checked before the solve" 'does not exist'
expect_not_in "no solve ran" 'converged'
finish
