#!/usr/bin/env bash
# The local launchers (jobs/local/run.sh) with the small configs, and bad launches: a
# missing config, a GPU run on a machine without a GPU, more ranks than examples.
source "$(dirname "$0")/../support/cli_lib.sh"
ROOT=${SPMD_SOURCE_DIR:?}
export SPMD SPMD_DATA_DIR=$WORK/data
py() { /usr/bin/python3 -c "$1"; }
# The small configs name files under inputs/data; point them at the test's own folder.
for w in eval logreg ensemble; do
  sed "s#inputs/data/fashion-mnist#$DATA/fashion#; s#inputs/data/#$WORK/data/#" "$ROOT/inputs/$w-small.ini" > "$WORK/$w.ini"
done
run local_eval 0 120 env RUN_DIR="$WORK/r_eval" bash "$ROOT/jobs/local/run.sh" eval --np 3 --config "$WORK/eval.ini"
run local_eval_json 0 10 py "import json; j=json.load(open('$WORK/r_eval/eval.json')); assert (j['correct'],j['total'])==(1000,10000), j"
run local_logreg 0 120 env RUN_DIR="$WORK/r_logreg" bash "$ROOT/jobs/local/run.sh" logreg --np 2 --config "$WORK/logreg.ini"
run local_logreg_outputs 0 10 py "
import json,os; j=json.load(open('$WORK/r_logreg/logreg.json')); assert j['ranks']==2 and j['iterations']>0, j
assert os.path.getsize('$WORK/r_logreg/weights.h5')>0 and open('$WORK/r_logreg/metrics.csv').readline().startswith('iteration,')"
run local_ensemble 0 300 env RUN_DIR="$WORK/r_ens" bash "$ROOT/jobs/local/run.sh" ensemble --np 2 --config "$WORK/ensemble.ini" -- --test-limit 256
run local_ensemble_outputs 0 10 py "
import json,os; j=json.load(open('$WORK/r_ens/ensemble.json')); assert j['members']==2 and len(j['epochs'])==2, j
assert os.path.getsize('$WORK/r_ens/checkpoint.h5')>0"
run local_missing_config nonzero 20 bash "$ROOT/jobs/local/run.sh" eval --config "$WORK/none.ini"
expect_in "missing config named" "input config '$WORK/none.ini' not found"
# More ranks than examples: ranks with zero rows take part and the totals stay exact.
run tiny_data 0 30 "$SPMD" data make-classification --samples 4 --features 3 --informative 2 --redundant 0 --classes 2 \
  --clusters-per-class 1 --out "$WORK/tiny.h5"
run local_eval_6_ranks_4_rows 0 120 env RUN_DIR="$WORK/r_tiny" bash "$ROOT/jobs/local/run.sh" eval --np 6 --config "$WORK/eval.ini" \
  -- --data "$WORK/tiny.h5" --features-key X --labels-key y --classes 2 --strategy infinite-pad
run local_eval_6_ranks_4_rows_total 0 10 py "import json; j=json.load(open('$WORK/r_tiny/eval.json')); assert j['total']==4 and j['examples_per_rank']==[1,1,1,1,0,0], j"
run local_logreg_6_ranks_4_rows 0 120 env RUN_DIR="$WORK/r_tiny_lr" bash "$ROOT/jobs/local/run.sh" logreg --np 6 --config "$WORK/logreg.ini" \
  -- --data "$WORK/tiny.h5" --maxiter 5
if "$SPMD" info --backend cuda >/dev/null 2>&1; then
  echo "SKIP local_gpu_without_gpu: this machine has a GPU"
else
  run local_gpu_without_gpu nonzero 30 env RUN_DIR="$WORK/r_gpu" bash "$ROOT/jobs/local/run.sh" eval --np 2 --config "$WORK/eval.ini" -- --backend cuda
  expect_in "no-GPU message names the option and the fix" '--backend cuda but no GPU is usable here.*Use --backend cpu'
fi
finish
