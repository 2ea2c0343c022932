#!/usr/bin/env bash
# tools/scaling_report.py on fabricated summaries whose answers are known (speed-up,
# efficiency, per-step speed-up ignoring the first iteration, identical results, weak mode,
# repeated runs: medians, ranges, within the noise, the host's noise; valid PNGs, clear
# errors), then tools/scaling_study.sh end to end with the real spmd (--repeats 2).
source "$(dirname "$0")/../support/cli_lib.sh"
ROOT=${SPMD_SOURCE_DIR:?}
PY=/usr/bin/python3
REPORT=$ROOT/tools/scaling_report.py

# logreg_json FILE RANKS DEVICES VALUE SECONDS...: a logreg summary with one history entry per
# given step time; the objective of iteration i is VALUE + 1/i, the gradient norm 10^-i.
logreg_json() {
  local file=$1 ranks=$2 devices=$3 value=$4
  shift 4
  $PY - "$file" "$ranks" "$devices" "$value" "$@" <<'EOF'
import json, sys
file, ranks, devices, value = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
times = [float(t) for t in sys.argv[5:]]
history = [{"iteration": i + 1, "value": value + 1.0 / (i + 1), "error": 10.0 ** -(i + 1), "stepsize": 1.0,
            "evaluations": i + 2, "seconds": t} for i, t in enumerate(times)]
json.dump({"status": "converged", "iterations": len(times), "value": history[-1]["value"], "error": history[-1]["error"],
           "evaluations": len(times) + 1, "setup_seconds": 0.25 / ranks, "solve_seconds": sum(times), "ranks": ranks,
           "devices_per_rank": devices, "history": history, "rows": 1000, "features": 20, "classes": 3,
           "rank_table": [{"rank": r, "host": "nodeA", "devices": f"{devices} x cpu (Test CPU)"} for r in range(ranks)]},
          open(file, "w"))
EOF
}

# add_breakdown FILE COMPUTE_MIN COMPUTE_MEAN COMPUTE_MAX COMMUNICATION IO OTHER SLOWEST: the
# summary's time_breakdown (means as given; totals are their sum, as spmd's categories add up).
add_breakdown() {
  $PY - "$@" <<'EOF'
import json, sys
file, cmin, cmean, cmax, comm, io, other, slowest = sys.argv[1], *map(float, sys.argv[2:8]), int(sys.argv[8])
j = json.load(open(file))
flat = lambda v: {"min": v, "mean": v, "max": v}
total = cmean + comm + io + other
j["time_breakdown"] = {"compute": {"min": cmin, "mean": cmean, "max": cmax}, "communication": flat(comm), "io": flat(io),
                       "host_device": flat(0.0), "other": flat(other), "total": flat(total),
                       "load_imbalance": cmax / cmean, "slowest_rank": slowest, "slowest_host": "nodeA"}
json.dump(j, open(file, "w"))
EOF
}

# csv_field FILE RANKS DEVICES COLUMN: one cell of report.csv.
csv_field() {
  $PY -c "
import csv, sys
rows = [r for r in csv.DictReader(open('$1')) if r['ranks'] == '$2' and r['devices_per_rank'] == '$3']
assert len(rows) == 1, rows
print(rows[0]['$4'])"
}

# expect_field NAME FILE RANKS DEVICES COLUMN VALUE: numeric cells compare to 1e-3.
expect_field() {
  local got
  got=$(csv_field "$2" "$3" "$4" "$5")
  checks=$((checks + 1))
  if [[ $6 =~ ^[0-9.]+$ ]] && [[ $got =~ ^[0-9.]+$ ]]; then
    awk -v a="$got" -v b="$6" 'BEGIN { exit !((a - b) ^ 2 < 1e-6) }' && { echo "ok   $1 ($got)"; return; }
  elif [ "$got" = "$6" ]; then
    echo "ok   $1 ($got)"
    return
  fi
  fail "$1: $5 of the ${3}x$4 row is '$got', expected '$6'"
}

# png_ok NAME FILE: a real PNG with a picture in it (size and more than one colour).
png_ok() {
  run "$1" 0 30 $PY -c "
import matplotlib.image as mpimg, numpy as np
with open('$2', 'rb') as f: assert f.read(8) == b'\x89PNG\r\n\x1a\n', 'no PNG signature'
img = mpimg.imread('$2')
assert img.shape[0] >= 300 and img.shape[1] >= 400, img.shape
assert len(np.unique(img.reshape(-1, img.shape[-1]), axis=0)) > 20, 'almost blank'
print('png', img.shape)"
}

# --- strong scaling on fabricated logreg runs -------------------------------------------
S=$WORK/strong
mkdir -p "$S"
# 1 rank: 0.2 s per step after a slow first step. 2 ranks: the same results (identical),
# steps 0.125, 0.1, 0.125 -> mean 0.11667 s: speed-up 1.714, efficiency 0.857; the JAXopt example's
# average of per-step ratios is (1.6 + 2 + 1.6) / 3 = 1.733. 4 ranks: a different objective.
logreg_json "$S/logreg-r1-d1.json" 1 1 1.5 0.5 0.2 0.2 0.2
logreg_json "$S/logreg-r2-d1.json" 2 1 1.5 0.4 0.125 0.1 0.125
logreg_json "$S/logreg-r4-d1.json" 4 1 1.5000015 0.3 0.05 0.05 0.05
# Time breakdowns (seconds per rank): 1 rank 8 compute + 1 I/O + 1 other = 10. 2 ranks: ideal
# 10 / 2 = 5, took 4.5 compute (4 to 5: rank 1 slowest) + 2 communication + 0.5 + 0.5 = 7.5, so
# 2.5 s lost: communication +2 (80%, up to 0.5 of it the imbalance), compute +0.5 (20%).
# 4 ranks: ideal 2.5, took 2 balanced compute + 0.5 communication + 0.25 + 0.25 = 3.
add_breakdown "$S/logreg-r1-d1.json" 8 8 8 0 1 1 0
add_breakdown "$S/logreg-r2-d1.json" 4 4.5 5 2 0.5 0.5 1
add_breakdown "$S/logreg-r4-d1.json" 2 2 2 0.5 0.25 0.25 3
# 4 ranks took another path: its gradient norms are twice the others' (its curve must not be
# called coinciding).
$PY -c "
import json; f = '$S/logreg-r4-d1.json'; j = json.load(open(f))
for h in j['history']: h['error'] *= 2
json.dump(j, open(f, 'w'))"
echo '{"not": "a summary"}' >"$S/other.json"
run report_strong 0 60 $PY "$REPORT" "$S"
expect_in "average per-step speed-up ignoring the first iteration (2 ranks)" '2 ranks x 1 dev: 1\.73x'
expect_in "average per-step speed-up (4 ranks: 0.2/0.05)" '4 ranks x 1 dev: 4\.00x'
expect_in "unrelated JSON skipped visibly" 'skipped other\.json'
expect_in "2 ranks: whole run against its ideal" '2 ranks x 1 dev: the whole run took 7\.5 s per rank against an ideal 5 s .*run efficiency 0\.67'
expect_in "2 ranks: the loss is mostly communication, with shares" 'Mostly communication: of the 2\.5 s lost, communication \+2 s \(80%\).*compute \+0\.5 s \(20%\)'
expect_in "2 ranks: the imbalance and the slowest rank named" 'up to 0\.5 s of it explained by the compute imbalance \(max/mean 1\.11, rank 1 on nodeA the slowest\)'
expect_in "4 ranks: balanced compute, so the messages themselves" '4 ranks x 1 dev: .*ideal 2\.5 s.*communication \+0\.5 s \(100%\).*compute is balanced'
expect_not_in "I/O that shrank ideally is no cause" 'I/O \+'
expect_in "identical curves are marked as coinciding" 'Curves that coincide.*2 ranks x 1 dev = 1 rank x 1 dev in error_vs_iteration\.png'
expect_not_in "a different history does not coincide" '4 ranks x 1 dev = '
expect_field "mean communication seconds in the CSV" "$S/report.csv" 2 1 communication_mean_seconds 2.0
expect_field "total seconds in the CSV" "$S/report.csv" 4 1 total_mean_seconds 3.0
expect_field "slowest rank in the CSV" "$S/report.csv" 2 1 slowest_rank 1
for f in report.md report.csv speedup.png breakdown.png error_vs_iteration.png objective_vs_time.png step_time_vs_iteration.png; do
  checks=$((checks + 1))
  if [ -s "$S/$f" ]; then echo "ok   strong report wrote $f"; else fail "strong report did not write $f"; fi
done
expect_field "1 rank is the baseline" "$S/report.csv" 1 1 speedup 1.0
expect_field "2-rank speed-up = 0.2 / mean(0.125, 0.1, 0.125)" "$S/report.csv" 2 1 speedup 1.7143
expect_field "2-rank efficiency = speed-up / 2" "$S/report.csv" 2 1 efficiency 0.8571
expect_field "4-rank speed-up" "$S/report.csv" 4 1 speedup 4.0
expect_field "4-rank efficiency" "$S/report.csv" 4 1 efficiency 1.0
expect_field "seconds per step ignores the first iteration" "$S/report.csv" 1 1 seconds_per_step 0.2
expect_field "setup seconds from the summary" "$S/report.csv" 2 1 setup_seconds 0.125
expect_field "1 rank is the reference" "$S/report.csv" 1 1 identical reference
expect_field "same history -> identical" "$S/report.csv" 2 1 identical yes
expect_field "other objective -> not identical" "$S/report.csv" 4 1 identical no
expect_field "final objective reported" "$S/report.csv" 4 1 result 1.7500015
expect_field "one run per layout: one repeat" "$S/report.csv" 2 1 repeats 1
expect_field "one run per layout: no range" "$S/report.csv" 2 1 speedup_min n/a
expect_field "one run per layout: no noise verdict" "$S/report.csv" 2 1 within_noise n/a
expect_in "one run per layout: the host's noise is not measured" '^Host noise: not measured \(one run of 1 rank x 1 dev'
run report_md 0 5 cat "$S/report.md"
expect_in "markdown table row for 2 ranks" '^\| 2 \| 1 \| 2 \| 0\.1250 \| 0\.1167 \| 4 \| 1\.71 \| 0\.86 \| 1\.75 \| yes \| 0\.0e\+00 \| 27 \| 1\.11 \|'
expect_in "markdown embeds the plots" '!\[speedup\.png\]\(speedup\.png\)'
expect_in "markdown embeds the breakdown" '!\[breakdown\.png\]\(breakdown\.png\)'
expect_in "title names the problem size and the host" '^# Scaling report: spmd logreg, strong scaling: 1000 rows x 20 features, 3 classes; host nodeA \(Test CPU\)'
for f in speedup breakdown error_vs_iteration objective_vs_time step_time_vs_iteration; do png_ok "png_$f" "$S/$f.png"; done

# --- repeats: three interleaved runs per layout, the median run stands for the layout ---
R=$WORK/repeats
mkdir -p "$R"
# step times after the first (one per repeat k1 k2 k3): 1 rank 0.2 0.22 0.18 (median 0.2,
# host noise (0.22 - 0.18) / 0.2 = 20%); 2 ranks 0.1 0.125 0.08: speed-up 0.2 / 0.1 = 2, range
# 0.18 / 0.125 = 1.44 .. 0.22 / 0.08 = 2.75; 4 ranks 0.19 0.2 0.25: speed-up 1, range
# 0.72 .. 1.1579, within the noise; 1 rank x 2 devices 0.09 0.1 0.11: speed-up 2, range
# 1.6364 .. 2.4444, within the noise of 2 ranks x 1 device (ranges overlap).
k=0
for t in 0.2 0.22 0.18; do k=$((k + 1)); logreg_json "$R/logreg-r1-d1-k$k.json" 1 1 1.5 0.5 $t $t; done
k=0
for t in 0.1 0.125 0.08; do k=$((k + 1)); logreg_json "$R/logreg-r2-d1-k$k.json" 2 1 1.5 0.5 $t $t; done
k=0
for t in 0.19 0.2 0.25; do k=$((k + 1)); logreg_json "$R/logreg-r4-d1-k$k.json" 4 1 1.5 0.5 $t $t; done
k=0
for t in 0.09 0.1 0.11; do k=$((k + 1)); logreg_json "$R/logreg-r1-d2-k$k.json" 1 2 1.5 0.5 $t $t; done
# One repeat of 4 ranks found another objective: the layout is not identical.
logreg_json "$R/logreg-r4-d1-k3.json" 4 1 1.6 0.5 0.25 0.25
run report_repeats 0 60 $PY "$REPORT" "$R"
expect_field "repeats: runs per layout" "$R/report.csv" 2 1 repeats 3
expect_field "repeats: median step time" "$R/report.csv" 2 1 seconds_per_step 0.1
expect_field "repeats: fastest run" "$R/report.csv" 2 1 seconds_per_step_min 0.08
expect_field "repeats: slowest run" "$R/report.csv" 2 1 seconds_per_step_max 0.125
expect_field "repeats: the median run stands for the layout" "$R/report.csv" 2 1 file logreg-r2-d1-k1.json
expect_field "repeats: speed-up from the medians" "$R/report.csv" 2 1 speedup 2.0
expect_field "repeats: speed-up low = min(base) / max(run)" "$R/report.csv" 2 1 speedup_min 1.44
expect_field "repeats: speed-up high = max(base) / min(run)" "$R/report.csv" 2 1 speedup_max 2.75
expect_field "repeats: efficiency range" "$R/report.csv" 2 1 efficiency_max 1.375
expect_field "repeats: 2 ranks beyond the noise" "$R/report.csv" 2 1 within_noise no
expect_field "repeats: 4 ranks' range" "$R/report.csv" 4 1 speedup_max 1.1579
expect_field "repeats: 4 ranks within the noise" "$R/report.csv" 4 1 within_noise yes
expect_field "repeats: the baseline has no verdict" "$R/report.csv" 1 1 within_noise n/a
expect_field "repeats: every repeat compared, not only the median run" "$R/report.csv" 4 1 identical no
expect_field "repeats: identical repeats" "$R/report.csv" 2 1 identical yes
expect_in "repeats: summary from the medians with ranges" '^  2 ranks x 1 dev: 2\.00x \(range 1\.44\.\.2\.75x; median of 3 runs\)$'
expect_in "repeats: summary says within the noise" '^  4 ranks x 1 dev: 1\.00x \(range 0\.72\.\.1\.16x; median of 3 runs; within the noise: the range holds 1\.0, no measurable difference from 1 rank x 1 dev\)$'
expect_in "repeats: two layouts within the noise of each other" '^  2 ranks x 1 dev and 1 rank x 2 dev: within the noise of each other'
expect_not_in "repeats: separate ranges are not called overlapping" '4 ranks x 1 dev and'
expect_in "repeats: the host's noise" '^Host noise: the 3 runs of 1 rank x 1 dev took 180 ms\.\.220 ms per step \(median 200 ms\): a spread of 20%'
run report_repeats_md 0 5 cat "$R/report.md"
expect_in "repeats: markdown row with ranges" '^\| 2 \| 1 \| 2 \| 0\.1250 \| 0\.1 \(0\.08\.\.0\.125\) \| 3 \| 2\.00 \(1\.44\.\.2\.75\) \| 1\.00 \|.* \| 3 \|$'
expect_in "repeats: markdown says within the noise" '^\| 4 \| 1 \| 4 \| .* \| 1\.00 \(0\.72\.\.1\.16\) within the noise \|'
expect_in "repeats: markdown states the host's noise" '^Host noise: the 3 runs of 1 rank x 1 dev'
png_ok png_repeats_speedup "$R/speedup.png"
RW=$WORK/repeats-weak
mkdir -p "$RW"
cp "$R"/*.json "$RW"/
run report_repeats_weak 0 60 $PY "$REPORT" "$RW" --mode weak
expect_field "repeats, weak: efficiency range low" "$RW/report.csv" 2 1 efficiency_min 1.44
expect_field "repeats, weak: scaled speed-up range high = 2.75 x 2" "$RW/report.csv" 2 1 speedup_max 5.5
expect_in "repeats, weak: efficiency within the noise" '^  4 ranks x 1 dev: 1\.00 \(range 0\.72\.\.1\.16; median of 3 runs; within the noise'

# --- the bandwidth model: X read (4 evaluations / 3 iterations) x 50000 x 784 x 4 B per step of
# 0.2 s on 1 rank: 1.0453 GB/s, 50% of a 2.0907 GB/s thread; 2 threads reading 1.5 GB/s
# together allow 1.5 / 1.0453 = 1.43x on 2 ranks, 3 GB/s would allow 2.87x (not binding).
checks=$((checks + 1))
if grep -q 'Bandwidth model' "$R/report.md"; then fail "a bandwidth model without the host's bandwidth"
else echo "ok   no bandwidth model without the host's bandwidth"; fi
B=$WORK/bandwidth
mkdir -p "$B"
cp "$R"/logreg-r1-d1-k*.json "$R"/logreg-r2-d1-k*.json "$B"/
$PY - "$B" <<'EOF'
import glob, json, sys
for f in glob.glob(sys.argv[1] + "/*.json"):
    j = json.load(open(f))
    j["rows"], j["features"] = 50000, 784
    json.dump(j, open(f, "w"))
json.dump({"workload": "logreg", "mode": "strong", "read_gbps": {"1": 2.0907, "2": 1.5}}, open(sys.argv[1] + "/study.json", "w"))
EOF
run report_bandwidth 0 60 $PY "$REPORT" "$B"
expect_in "bandwidth model: the bound below 2x, with its numbers" '^Bandwidth model: an iteration reads X \(50000 x 784 float32, 157 MB\) 1\.33 times \(evaluations / iterations\); 1 rank read it at 1\.05 GB/s, 50% of the host.s 1-thread read bandwidth \(2\.09 GB/s\); 2 threads read 1\.5 GB/s together, so memory bandwidth holds 2 ranks at or below 1\.43x \(1\.5 / 1\.05\); measured 2\.00x\.$'
sed -i 's/"2": 1.5/"2": 3.0/' "$B/study.json"
run report_bandwidth_enough 0 60 $PY "$REPORT" "$B"
expect_in "bandwidth model: enough bandwidth, so the loss is elsewhere" '2 threads read 3 GB/s together, enough for 2\.87x: memory bandwidth does not hold 2 ranks below 2x'

# --- weak scaling: same files, data per rank fixed --------------------------------------
W=$WORK/weak
mkdir -p "$W"
cp "$S"/logreg-r*.json "$W"/
run report_weak 0 60 $PY "$REPORT" "$W" --mode weak
expect_field "weak efficiency = t_base / t" "$W/report.csv" 2 1 efficiency 1.7143
expect_field "weak scaled speed-up = efficiency x 2" "$W/report.csv" 2 1 speedup 3.4286
expect_field "weak runs see different data: no identity claim" "$W/report.csv" 2 1 identical n/a
expect_in "weak summary speaks of efficiency" 'weak-scaling efficiency'

# --- devices per rank: workers = ranks x devices, baseline the fewest workers ------------
D=$WORK/devices
mkdir -p "$D"
logreg_json "$D/a.json" 1 1 1.5 0.5 0.4 0.4
logreg_json "$D/b.json" 1 2 1.5 0.5 0.25 0.25
logreg_json "$D/c.json" 2 2 1.5 0.5 0.1 0.1
run report_devices 0 60 $PY "$REPORT" "$D"
expect_field "1 rank x 2 devices: speed-up 1.6" "$D/report.csv" 1 2 speedup 1.6
expect_field "1 rank x 2 devices: efficiency over 2 workers" "$D/report.csv" 1 2 efficiency 0.8
expect_field "2 ranks x 2 devices: efficiency over 4 workers" "$D/report.csv" 2 2 efficiency 1.0

# --- a history written as elapsed time is recognised ------------------------------------
C=$WORK/cumulative
mkdir -p "$C"
logreg_json "$C/logreg-r1-d1.json" 1 1 1.5 0.5 0.2 0.2 0.2
$PY - "$C/logreg-r1-d1.json" "$C/logreg-r2-d1.json" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
j["ranks"], elapsed = 2, 0.0
for h, t in zip(j["history"], [0.3, 0.1, 0.1, 0.1]):
    elapsed += t
    h["seconds"] = elapsed
j["solve_seconds"] = elapsed
json.dump(j, open(sys.argv[2], "w"))
EOF
run report_cumulative 0 60 $PY "$REPORT" "$C"
expect_field "elapsed-time history turned into step times" "$C/report.csv" 2 1 seconds_per_step 0.1

# --- eval and ensemble summaries --------------------------------------------------------
E=$WORK/eval
mkdir -p "$E"
for r in 1 2; do
  echo "{\"correct\": 1000, \"total\": 10000, \"accuracy\": 0.1, \"steps\": $((20 / r)), \"seconds\": 1.0, \"ranks\": $r, \"devices_per_rank\": 1}" >"$E/eval-r$r.json"
done
run report_eval 0 60 $PY "$REPORT" "$E"
expect_in "a summary without a breakdown is said to lack one" 'no time_breakdown in eval-r[12]\.json'
expect_field "eval: seconds per step = seconds / steps" "$E/report.csv" 2 1 seconds_per_step 0.1
expect_field "eval: speed-up per step" "$E/report.csv" 2 1 speedup 0.5
expect_field "eval: same counts are identical" "$E/report.csv" 2 1 identical yes
N=$WORK/ensemble
mkdir -p "$N"
ens() { # FILE RANKS DEVICES IMAGES_PER_SECOND DIGEST
  echo "{\"members\": $(($2 * $3)), \"epochs\": [{\"epoch\": 1, \"test_accuracy\": 0.8, \"member_test_accuracy\": []}], \"images_per_second\": $4, \"batch_size\": 32, \"params_digest\": \"$5\", \"ranks\": $2, \"devices_per_rank\": $3}" >"$1"
}
ens "$N/a.json" 1 2 320 d1
ens "$N/b.json" 2 1 160 d1
ens "$N/c.json" 2 2 320 d2
run report_ensemble 0 60 $PY "$REPORT" "$N" --mode weak
expect_field "ensemble: seconds per step = batch / images per second" "$N/report.csv" 2 1 seconds_per_step 0.2
expect_field "ensemble: same members, same digest -> identical" "$N/report.csv" 2 1 identical yes
expect_field "ensemble: 4 members compared with themselves" "$N/report.csv" 2 2 identical reference

# --- errors -----------------------------------------------------------------------------
mkdir -p "$WORK/empty"
run report_empty nonzero 30 $PY "$REPORT" "$WORK/empty"
expect_in "empty folder explained" 'no eval/logreg/ensemble JSON summaries'
cp "$E/eval-r1.json" "$S/"
run report_mixed nonzero 30 $PY "$REPORT" "$S"
expect_in "mixed workloads refused" 'mixes workloads'

# --- the study script with the real spmd ------------------------------------------------
if "$SPMD" logreg --help 2>&1 | grep -q "not implemented"; then
  echo "SKIP scaling_study.sh end to end: spmd logreg is not implemented yet"
else
  # 6000 rows: enough for every rank to hold a share. Strong: ranks 1 and 2 must agree
  # exactly (the objective's partial sums are reduced in a fixed order).
  run study 0 120 env SPMD="$SPMD" LAUNCH=mpirun SPMD_DATA_DIR="$WORK/data" "$ROOT/tools/scaling_study.sh" --ranks "1 2" \
    --repeats 2 --out "$WORK/study" -- --data "$WORK/data/classification-6000x20-c3-i5-s0.h5" --maxiter 15
  expect_in "study made the strong data from its name" 'make-classification --samples 6000 --features 20'
  expect_in "study printed the strong table" '^\| 2 \| 1 \| 2 \|'
  # Interleaved: every layout once, then again.
  order=$(grep -o '^  strong logreg-r[0-9]-d1-k[0-9]' "$LAST_OUT" | awk '{print $2}' | tr '\n' ' ')
  checks=$((checks + 1))
  if [ "$order" = "logreg-r1-d1-k1 logreg-r2-d1-k1 logreg-r1-d1-k2 logreg-r2-d1-k2 " ]; then echo "ok   runs interleaved: $order"
  else fail "strong runs in the order '$order', want r1 k1, r2 k1, r1 k2, r2 k2"; fi
  expect_in "study: the host's noise from the 2 one-rank runs" '^Host noise: the 2 runs of 1 rank x 1 dev took'
  expect_field "study: 2 repeats per layout" "$WORK/study/strong/report.csv" 2 1 repeats 2
  expect_in "study: the bandwidth model from the host's measured read bandwidth" '^Bandwidth model: an iteration reads X \(6000 x 20 float32'
  json_ok=$($PY -c "import json; b = json.load(open('$WORK/study/strong/study.json'))['read_gbps']; print(b['1'] > 0 and b['2'] > 0)")
  checks=$((checks + 1))
  if [ "$json_ok" = True ]; then echo "ok   study.json holds the 1- and 2-thread read bandwidth"; else fail "study.json's read_gbps: $json_ok"; fi
  for f in strong/report.md strong/speedup.png strong/error_vs_iteration.png weak/report.csv weak/study.json \
    strong/logreg-r2-d1-k1.json strong/logreg-r2-d1-k2.json strong/logreg-r2-d1-k2.csv weak/logreg-r2-d1-k2.json; do
    checks=$((checks + 1))
    if [ -s "$WORK/study/$f" ]; then echo "ok   study wrote $f"; else fail "study did not write $f"; fi
  done
  expect_field "strong: 2 ranks give the 1-rank result exactly" "$WORK/study/strong/report.csv" 2 1 identical yes
  checks=$((checks + 1))
  if [ -f "$WORK/data/classification-6000x20-c3-i5-s0.h5" ] && [ -f "$WORK/data/classification-3000x20-c3-i5-s0.h5" ]; then
    echo "ok   weak data: per rank 6000 / 2 = 3000 rows, 1 rank 3000 and 2 ranks 6000"
  else
    fail "weak data files missing: $(ls "$WORK/data")"
  fi
  run study_bad_option nonzero 30 env SPMD="$SPMD" "$ROOT/tools/scaling_study.sh" --ranks "1 x"
  expect_in "bad rank list named" "'x' is not a positive integer"
  run study_bad_repeats nonzero 30 env SPMD="$SPMD" "$ROOT/tools/scaling_study.sh" --repeats 0
  expect_in "bad repeat count named" "'0' is not a positive integer .*--repeats"
fi

finish
