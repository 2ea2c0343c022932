#!/usr/bin/env bash
# The demo: what tools/demo.sh runs after building. Every step is an mpirun on this
# machine; outputs go to runs/demo/. Each section starts with one plain sentence saying what
# to look at; the sentences that state results compute them from the runs' --json summaries.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
out=${SPMD_RUN_DIR:-$root/runs/demo}
mkdir -p "$out"
rm -f "$out"/section*.txt
look() { printf '>> %s\n\n' "$*"; }
# The start-up table was shown once (first section); later runs drop it with the lines that
# repeat it. `trim breakdown` also drops the time breakdown (the zero model's runs do almost
# nothing). The zero model's confusion matrix (every prediction class 0) goes too. Every
# table shown keeps its header.
trim() {
  awk -v drop_breakdown="${1:-}" '
       /^# spmd |^# ranks |^# keys |^#  rank  host/ || /^# +[0-9]+  [^ ]+ +[0-9]+  [0-9]+ x / { next }
       /^# confusion matrix/ { skip = 1; next }
       skip && (/^ *label / || /^ +[0-9]+ +[0-9]/) { next }
       { skip = 0 }
       drop_breakdown && /^# time breakdown/ { in_breakdown = 1 }
       in_breakdown { if (/^# load imbalance/) in_breakdown = 0; next }
       { print }'
}
# json FILE EXPRESSION: a value from a --json summary (python's json; j is the summary).
json() { /usr/bin/python3 -c "import json, sys; j = json.load(open(sys.argv[1])); print($2)" "$1"; }

section "1. Who runs where: spmd info under mpirun -np 2"
look "Rank 0 prints one table of every rank: check each sits on the host and devices you expect."
mpirun -np 2 "$SPMD" info

section "2. The data: Fashion-MNIST from Debian's dataset-fashion-mnist"
ensure_fashion_mnist >/dev/null
test_set="$DATA_DIR/fashion-mnist/test.h5"
look "The shape and the label histogram of the test set: the evaluation below must count every one of these examples exactly once."
"$SPMD" data info "$test_set"

section "3. Full-dataset evaluation on 2 ranks: the problem (wrong totals) and the fix (exact)"
for strategy in drop-remainder pad infinite-pad; do
  mpirun -np 2 "$SPMD" eval --data "$test_set" --model zero --strategy $strategy --per-device-batch 512 \
    --json "$out/eval-$strategy.json" --quiet | trim breakdown >>"$out/section3.txt"
done
"$SPMD" eval --data "$test_set" --strategy keep-remainder --per-device-batch 512 --json "$out/eval-keep-remainder.json" \
  --quiet >/dev/null
look "$(/usr/bin/python3 - "$out" <<'PY'
import json, sys
d = sys.argv[1]
j = {s: json.load(open(f"{d}/eval-{s}.json")) for s in ("drop-remainder", "pad", "infinite-pad", "keep-remainder")}
n = j["pad"]["dataset_rows"]
shapes = " + ".join(f"{c}x{b}" for b, c in sorted(j["keep-remainder"]["batch_shapes"].items(), key=lambda kv: -int(kv[0])))
print(f"drop-remainder undercounts: {j['drop-remainder']['total']} of {n} examples (its accuracy is over the wrong "
      f"total); pad and infinite-pad count {j['pad']['total']} and {j['infinite-pad']['total']} of {n}, padding "
      f"{j['pad']['padded_rows']} rows that are masked, never counted. keep-remainder is exact too but needs one "
      f"device in all: on 1 rank its batches are {shapes}, two shapes (a recompile each on an accelerator).")
PY
)"
cat "$out/section3.txt"

section "4. Logistic regression with L-BFGS on make_classification(50000, 784, 10 classes): 1 rank, then 2"
ensure_classification >/dev/null
for np in 1 2; do
  mpirun -np $np "$SPMD" logreg --data "$DATA_DIR/classification-50000x784-c10-i50-s0.h5" --maxiter 100 --quiet \
    --metrics-csv "$out/logreg-np$np.csv" --json "$out/logreg-np$np.json" --weights-out "$out/logreg-w.h5" |
    trim >>"$out/section4.txt"
done
look "$(/usr/bin/python3 - "$out" <<'PY'
import json, sys
d = sys.argv[1]
r = [json.load(open(f"{d}/logreg-np{n}.json")) for n in (1, 2)]
step = [sum(h["seconds"] for h in j["history"][1:]) / max(1, len(j["history"]) - 1) for j in r]
b = r[1]["time_breakdown"]
same = r[0]["value"] == r[1]["value"] and r[0]["iterations"] == r[1]["iterations"]
print(f"{'The same' if same else 'NOT the same'} objective on 1 and 2 ranks ({r[0]['value']:.8f}, "
      f"{r[0]['iterations']} iterations{', bit for bit' if same else ''}); an iteration takes {step[0] * 1e3:.1f} ms on 1 rank "
      f"and {step[1] * 1e3:.1f} ms on 2 (speed-up {step[0] / step[1]:.2f}x, first iteration ignored); the 2-rank "
      f"time breakdown says why it is not 2x: communication {100 * b['communication']['mean'] / b['total']['mean']:.0f}%, "
      f"I/O {100 * b['io']['mean'] / b['total']['mean']:.0f}% of the run.")
PY
)"
cat "$out/section4.txt"

section "5. CNN ensemble: 2 members (one per rank, each from its own seed), 1 epoch on 10000 images, then eval of its checkpoint"
mpirun -np 2 "$SPMD" ensemble --train "$DATA_DIR/fashion-mnist/train.h5" --test "$test_set" --train-limit 10000 \
  --epochs 1 --checkpoint "$out/ensemble.h5" --overwrite --json "$out/ensemble.json" --progress-every 100 2>&1 |
  trim >"$out/section5.txt"
mpirun -np 2 "$SPMD" eval --data "$test_set" --model cnn --weights "$out/ensemble.h5" --strategy pad \
  --per-device-batch 512 --json "$out/eval-cnn.json" --quiet | trim breakdown >>"$out/section5.txt"
look "$(/usr/bin/python3 - "$out" <<'PY'
import json, sys
d = sys.argv[1]
e, v = json.load(open(f"{d}/ensemble.json")), json.load(open(f"{d}/eval-cnn.json"))
last = e["epochs"][-1]
members = last["member_test_accuracy"]
print(f"The ensemble (the mean of its members' probabilities) scores {last['test_accuracy']:.4f} on the test set, "
      f"its members {min(members):.4f} to {max(members):.4f}; spmd eval of the checkpoint counts {v['correct']} of "
      f"{v['total']} right, accuracy {v['accuracy']:.4f}"
      + (", the same." if abs(v["accuracy"] - last["test_accuracy"]) < 1e-12 else
         f" (the ensemble's own evaluation said {last['test_accuracy']:.4f})."))
PY
)"
cat "$out/section5.txt"

section "6. Strong scaling of logreg at 1 and 2 ranks on the default data (inputs/logreg.ini)"
look "The speed-up table, then one sentence per run on where the time above the ideal went; plots are in $out/scaling/strong/."
SPMD="$SPMD" "$root/tools/scaling_study.sh" --workload logreg --mode strong --ranks "1 2" --config "$root/inputs/logreg.ini" \
  --out "$out/scaling" | grep -v '^scaling_report: wrote'
echo
echo "demo outputs: $out (JSON summaries, CSVs, weights, checkpoint)"
echo "scaling report: $out/scaling/strong/report.md (table), $out/scaling/strong/*.png (plots)"
