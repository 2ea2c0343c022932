#!/usr/bin/env bash
# spmd eval on long runs (issue 18): periodic progress lines in a log (rows done/total,
# percent, rate, elapsed) from rank 0 alone, none with --quiet or on a run shorter than the
# period; and the zero model's time and rate labelled as data movement (it computes nothing).
source "$(dirname "$0")/../support/cli_lib.sh"
TEST=$DATA/fashion/test.h5
jq_py() { /usr/bin/python3 -c "import json,sys; j=json.load(open('$1')); $2"; }
PROGRESS='^# eval rows [0-9]+/10000 +[0-9.]+% +[0-9]+ examples/s +[0-9.]+ s elapsed$'
# 20 steps of 2 ranks x 256 rows, each 0.1 s slower on rank 0 (the rank that shows its own
# progress: a slower rank 1 may lag it between the strategy's collectives): about 2 s.
SLOW=(--per-device-batch 256 --simulate-slow 0:0.1 --progress-seconds 0.3)

for strategy in pad infinite-pad; do  # the two evaluation loops
  run "progress[$strategy]" 0 120 mpi 2 "$SPMD" eval --data "$TEST" --strategy $strategy "${SLOW[@]}"
  expect_in "progress[$strategy]: a progress line in the log" "$PROGRESS"
  expect_in "progress[$strategy]: results still there" 'every example counted exactly once'
  checks=$((checks + 1))
  n=$(grep -cE "$PROGRESS" "$LAST_OUT")
  # Paced: at least 2 lines in a ~2 s run, and at most one per 0.3 s of the run as it went
  # (its wall time, mpirun's start included, so a loaded machine does not fail it).
  most=$(echo "$LAST_SECONDS / 0.3 + 1" | bc)
  [ "$n" -ge 2 ] && [ "$n" -le "$most" ] && echo "ok   progress[$strategy]: paced ($n lines in ${LAST_SECONDS}s)" ||
    fail "progress[$strategy]: $n progress lines in ${LAST_SECONDS} s at one per 0.3 s (want 2..$most)"
done
run quiet 0 120 mpi 2 "$SPMD" eval --data "$TEST" "${SLOW[@]}" --quiet
expect_not_in "quiet: no progress" 'eval rows'
expect_in "quiet: keeps the start-up table" '^# spmd eval'
expect_in "quiet: keeps the results" 'every example counted exactly once'
run short_run 0 60 mpi 2 "$SPMD" eval --data "$TEST"
expect_not_in "a run shorter than the period prints no progress" 'eval rows'
for bad in 0 -1 abc; do
  run "bad_progress_seconds[$bad]" nonzero 30 mpi 2 "$SPMD" eval --data "$TEST" --progress-seconds $bad
  expect_in "bad_progress_seconds[$bad] names the option" 'progress-seconds'
done

# --model zero: time and rate are data movement, said in the table and in --json (whose
# seconds and examples_per_second stay for tools/scaling_report.py).
run zero_model 0 60 mpi 2 "$SPMD" eval --data "$TEST" --json "$WORK/zero.json"
expect_in "zero: columns say data" '^#.* data time +data rate$'
expect_not_in "zero: no plain throughput column" 'throughput'
expect_in "zero: says why" 'model zero computes nothing'
run zero_json 0 10 jq_py "$WORK/zero.json" "assert j['timing_includes_compute'] is False and j['seconds'] > 0 and j['examples_per_second'] > 0, j"
run logreg_weights 0 120 "$SPMD" logreg --data "$DATA/logreg-small.h5" --maxiter 3 --quiet --weights-out "$WORK/w.h5"
run logreg_model 0 60 mpi 2 "$SPMD" eval --data "$DATA/logreg-small.h5" --model logreg --weights "$WORK/w.h5" \
  --json "$WORK/logreg.json"
expect_in "logreg: time and throughput columns" '^#.* time +throughput$'
expect_not_in "logreg: no zero-model note" 'computes nothing'
run logreg_json 0 10 jq_py "$WORK/logreg.json" "assert j['timing_includes_compute'] is True, j"
finish
