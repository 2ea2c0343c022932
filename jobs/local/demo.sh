#!/usr/bin/env bash
# The demo: what tools/demo.sh runs after building. Every step is a spmdrun (mpirun) on
# this machine; outputs go to runs/demo/. Each section starts with one plain sentence saying what
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
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# Timings on a shared host move from run to run: every layout runs this many times and the
# sentences give medians with their ranges (jobs/local/scaling_words.py).
repeats=3
# study WORKLOAD MODE STUDY_ARGS... -- SPMD_ARGS...: ranks 1 and 2 into $out/scaling-WORKLOAD/,
# the report (table, sentences, plots) kept in $out/scaling-WORKLOAD.txt for section 6.
study() {
  local workload=$1 mode=$2
  shift 2
  rm -rf "${out:?}/scaling-$workload"
  SPMD="$SPMD" "$root/tools/scaling_study.sh" --workload "$workload" --mode "$mode" --ranks "1 2" --repeats $repeats \
    --out "$out/scaling-$workload" "$@" | grep -v '^scaling_report: wrote' >"$out/scaling-$workload.txt"
}

section "1. Who runs where: spmd info under spmdrun -np 2"
look "Rank 0 prints one table of every rank: check each sits on the host and devices you expect."
"$SPMDRUN" -np 2 "$SPMD" info

section "2. The data: Fashion-MNIST from Debian's dataset-fashion-mnist"
ensure_fashion_mnist >/dev/null
test_set="$DATA_DIR/fashion-mnist/test.h5"
look "The shape and the label histogram of the test set: the evaluation below must count every one of these examples exactly once."
"$SPMD" data info "$test_set"

section "3. Full-dataset evaluation on 2 ranks: the problem (wrong totals) and the fix (exact)"
for strategy in drop-remainder pad infinite-pad; do
  "$SPMDRUN" -np 2 "$SPMD" eval --data "$test_set" --model zero --strategy $strategy --per-device-batch 512 \
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

section "4. Logistic regression with L-BFGS on make_classification(50000, 784, 10 classes): 1 rank and 2, $repeats runs each"
ensure_classification >/dev/null
# One measurement for this section's sentence and section 6's report: the layouts run
# interleaved (1, 2, 1, 2, ...) so that a slow spell of the host hits both alike.
study logreg strong --config "$root/inputs/logreg.ini" -- --data "$DATA_DIR/classification-50000x784-c10-i50-s0.h5" --quiet
for np in 1 2; do trim <"$out/scaling-logreg/strong/logreg-r$np-d1-k1.log"; done >"$out/section4.txt"
look "$(/usr/bin/python3 - "$out/scaling-logreg/strong" "$here" <<'PY'
import csv, glob, json, sys
d = sys.argv[1]
sys.path.insert(0, sys.argv[2])
import scaling_words  # noqa: E402  (jobs/local/)
one, two = scaling_words.rows(d)
runs = glob.glob(f"{d}/logreg-r*-d1-k*.json")
first = json.load(open(f"{d}/{one['file']}"))
# The report compares every run's whole history with the 1-rank reference.
same = one["identical"] == "reference" and two["identical"] == "yes"
b = json.load(open(f"{d}/{two['file']}"))["time_breakdown"]  # the 2-rank run with the median step time
print(f"{'The same' if same else 'NOT the same'} objective on 1 and 2 ranks ({first['value']:.8f}, "
      f"{first['iterations']} iterations{', bit for bit' if same else ''}, in all {len(runs)} runs); "
      f"{scaling_words.sentence(d)}. The 2-rank time breakdown (its median run) says "
      f"why it is not 2x: communication {100 * b['communication']['mean'] / b['total']['mean']:.0f}%, "
      f"I/O {100 * b['io']['mean'] / b['total']['mean']:.0f}% of the run.")
PY
)"
cat "$out/section4.txt"

section "5. CNN ensemble: 2 members (one per rank, each from its own seed), 1 epoch on 10000 images, then eval of its checkpoint"
"$SPMDRUN" -np 2 "$SPMD" ensemble --train "$DATA_DIR/fashion-mnist/train.h5" --test "$test_set" --train-limit 10000 \
  --epochs 1 --checkpoint "$out/ensemble.h5" --overwrite --json "$out/ensemble.json" --progress-every 100 2>&1 |
  trim >"$out/section5.txt"
"$SPMDRUN" -np 2 "$SPMD" eval --data "$test_set" --model cnn --weights "$out/ensemble.h5" --strategy pad \
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

section "6. Scaling at 1 and 2 ranks, $repeats interleaved runs each: logreg (strong: section 4's runs) and the CNN ensemble (weak: one member per rank)"
study ensemble weak --config "$root/inputs/ensemble-small.ini" -- --train "$DATA_DIR/fashion-mnist/train.h5" \
  --test "$test_set" --train-limit 2000 --test-limit 1000 --epochs 1 --quiet
look "logreg: $(/usr/bin/python3 "$here/scaling_words.py" "$out/scaling-logreg/strong"). Ensemble: \
$(/usr/bin/python3 "$here/scaling_words.py" "$out/scaling-ensemble/weak"). The tables follow (median, min..max in \
brackets), each with where the time above the ideal went; plots with error bars in $out/scaling-*/."
cat "$out/scaling-logreg.txt" "$out/scaling-ensemble.txt"
echo
echo "demo outputs: $out (JSON summaries, CSVs, checkpoint)"
echo "scaling reports: $out/scaling-logreg/strong/report.md and $out/scaling-ensemble/weak/report.md (tables), *.png (plots)"
