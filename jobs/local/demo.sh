#!/usr/bin/env bash
# The demo: what tools/demo.sh runs after building. Every step is an mpirun on this
# machine; outputs go to runs/demo/.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
out=${SPMD_RUN_DIR:-$root/runs/demo}
mkdir -p "$out"

section "spmd info under mpirun -np 2"
mpirun -np 2 "$SPMD" info

section "Fashion-MNIST from Debian's dataset-fashion-mnist -> $DATA_DIR/fashion-mnist"
ensure_fashion_mnist
"$SPMD" data info "$DATA_DIR/fashion-mnist/test.h5"

section "Full-dataset eval, zero model, 2 ranks: the problem (wrong totals) and the fix (exact)"
for strategy in drop-remainder pad infinite-pad; do
  mpirun -np 2 "$SPMD" eval --data "$DATA_DIR/fashion-mnist/test.h5" --model zero --strategy $strategy \
    --per-device-batch 512 --json "$out/eval-$strategy.json" | grep -vE '^#  |^# +[0-9]+ +'
done
echo "(keep-remainder needs one device in total; on 1 rank it shows the two batch shapes:)"
"$SPMD" eval --data "$DATA_DIR/fashion-mnist/test.h5" --strategy keep-remainder --per-device-batch 512 | grep -E 'keep-remainder +[0-9]'

section "Logistic regression with L-BFGS on make_classification(50000, 784, 10, informative 50, seed 0): 1 and 2 ranks"
ensure_classification
for np in 1 2; do
  mpirun -np $np "$SPMD" logreg --data "$DATA_DIR/classification-50000x784-c10-i50-s0.h5" --maxiter 100 --linesearch zoom --quiet \
    --metrics-csv "$out/logreg-np$np.csv" --json "$out/logreg-np$np.json" --weights-out "$out/logreg-w.h5" | tail -4
done
/usr/bin/python3 - "$out" <<'PY'
import json, sys
d = sys.argv[1]
r = [json.load(open(f"{d}/logreg-np{n}.json")) for n in (1, 2)]
step = [sum(h["seconds"] for h in j["history"][1:]) / max(1, len(j["history"]) - 1) for j in r]
print(f"per-iteration time (ignoring iteration 1): 1 rank {step[0]*1e3:.2f} ms, 2 ranks {step[1]*1e3:.2f} ms, "
      f"speed-up {step[0]/step[1]:.2f}x; same final value: {r[0]['value'] == r[1]['value']} ({r[0]['value']:.8f})")
PY

section "CNN ensemble: 1 epoch on 10000 training examples, 2 members on 2 ranks, then eval of the checkpoint"
mpirun -np 2 "$SPMD" ensemble --train "$DATA_DIR/fashion-mnist/train.h5" --test "$DATA_DIR/fashion-mnist/test.h5" \
  --train-limit 10000 --epochs 1 --checkpoint "$out/ensemble.h5" --json "$out/ensemble.json" --progress-every 100 | grep -vE '^#  |^# +[0-9]+ +'
mpirun -np 2 "$SPMD" eval --data "$DATA_DIR/fashion-mnist/test.h5" --model cnn --weights "$out/ensemble.h5" \
  --strategy pad --per-device-batch 512 | grep -E 'pad +[0-9]|every example'

section "Strong scaling of logreg at 1 and 2 ranks on the default data (inputs/logreg.ini)"
SPMD="$SPMD" "$root/tools/scaling_study.sh" --workload logreg --mode strong --ranks "1 2" --config "$root/inputs/logreg.ini" \
  --out "$out/scaling"
echo
echo "demo outputs: $out"
echo "scaling report: $out/scaling/strong/report.md (table), $out/scaling/strong/*.png (plots)"
