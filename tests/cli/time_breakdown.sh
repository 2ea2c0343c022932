#!/usr/bin/env bash
# The per-rank time breakdown (issue 18) of eval, logreg and ensemble on 2 ranks (and eval
# on 3 ranks x 2 devices, the worker-thread path): the table on stdout; --json's
# time_breakdown with every category's min/mean/max; each rank's categories adding up to
# its total exactly (max_sum_error_ns 0, and the means); the total between the workload's
# own timers and mpirun's wall time; host_device 0 on the CPU. Then one rank made slow
# (--simulate-slow RANK:SECONDS: each device dispatch that much longer) shows up as compute
# on it, as communication (waiting) on the others, and is named the slowest rank; and
# --simulate-slow's bad values are refused.
source "$(dirname "$0")/../support/cli_lib.sh"
TEST=$DATA/fashion/test.h5
TRAIN=$DATA/fashion/train.h5
SMALL=$DATA/logreg-small.h5

cat >"$WORK/check.py" <<'EOF'
# check.py JSON WALL_SECONDS WORKLOAD [SLOW_RANK SLOW_SECONDS]: asserts on time_breakdown.
import json, sys
j = json.load(open(sys.argv[1]))
wall, workload = float(sys.argv[2]), sys.argv[3]
b = j["time_breakdown"]
cats = ["compute", "communication", "io", "host_device", "other"]
for k in cats + ["total"]:
    s = b[k]
    assert set(s) == {"min", "mean", "max"}, (k, s)
    assert 0 <= s["min"] <= s["mean"] + 1e-12 and s["mean"] <= s["max"] + 1e-12, (k, s)
assert isinstance(b["slowest_rank"], int) and 0 <= b["slowest_rank"] < j["ranks"], b["slowest_rank"]
assert b["slowest_host"], b
assert b["load_imbalance"] >= 1.0 - 1e-12, b["load_imbalance"]
# As the table's line names it: max over mean of the ranks' compute (JSON holds the doubles).
c = b["compute"]
assert b["load_imbalance"] == (c["max"] / c["mean"] if c["mean"] > 0 else 1.0), (b["load_imbalance"], c)
# Every rank's categories add up to its total, to the nanosecond; so do the means.
assert b["max_sum_error_ns"] == 0, b["max_sum_error_ns"]
means = sum(b[k]["mean"] for k in cats)
assert abs(means - b["total"]["mean"]) <= 1e-9 * max(1.0, b["total"]["mean"]), (means, b["total"])
assert b["host_device"]["max"] == 0, b["host_device"]  # the CPU backend copies nothing to a device
# The total lies between the workload's own timers (parts of it) and mpirun's wall time.
t = b["total"]
if workload == "eval":
    own = j["seconds"]                                # the evaluation loop, slowest rank
elif workload == "logreg":
    own = j["load_seconds"] + j["solve_seconds"]      # loading and the solve
else:
    own = sum(e["seconds"] for e in j["epochs"])      # the training steps of every epoch
assert own <= t["max"] * 1.001 + 1e-4, ("workload's own seconds exceed the total", own, t)
assert t["max"] <= wall, ("total longer than mpirun's wall time", t, wall)
assert t["max"] - t["min"] <= 0.05 * t["max"] + 0.05, ("ranks' windows differ", t)
if len(sys.argv) > 4:
    slow, delay = int(sys.argv[4]), float(sys.argv[5])
    c, m = b["compute"], b["communication"]
    assert b["slowest_rank"] == slow, ("slowest rank", b["slowest_rank"], "expected", slow)
    # At least 4 dispatches in every workload here: the slow rank computes that much longer...
    assert c["max"] - c["min"] >= 4 * delay * 0.9, ("compute spread", c)
    # ...and the fast rank waits for it in MPI while the slow one does not: the spread of
    # communication mirrors the spread of compute. (Not a ratio of max to min: on 2 shared
    # vCPUs the slow rank also waits now and then for a descheduled fast one.)
    assert m["max"] >= 0.8 * (c["max"] - c["min"]), ("fast rank's wait", m, c)
    assert m["max"] - m["min"] >= 0.5 * (c["max"] - c["min"]), ("communication spread", m, c)
    assert b["load_imbalance"] >= 1.3, b["load_imbalance"]
else:
    # Nobody slowed: no rank did all the work (2 ranks: imbalance 2.0 when one computes
    # nothing). Not tighter: on 2 shared vCPUs a descheduled rank's compute stretches (1.50
    # seen in CI for the ensemble).
    assert b["load_imbalance"] < 1.8 or b["compute"]["max"] < 0.05, b["load_imbalance"]
EOF
breakdown_ok() { /usr/bin/python3 "$WORK/check.py" "$@"; }

# expect_table: the last output holds rank 0's table, every row once.
expect_table() {
  expect_in "$1: table header" '^# time breakdown over [0-9]+ ranks \(seconds; mean %'
  expect_in "$1: column units" '^#   category +min +mean +max +mean %$'
  for row in compute communication io host_device other total; do
    expect_in "$1: row $row" "^#   $row +[0-9]+\.[0-9]{4} +[0-9]+\.[0-9]{4} +[0-9]+\.[0-9]{4} +[0-9]+\.[0-9]$"
  done
  expect_in "$1: imbalance line" '^# load imbalance \(max/mean compute\) [0-9]+\.[0-9]{2}, slowest rank [0-9]+ \(.+\)$'
  [ "$(grep -c '^# time breakdown over' "$LAST_OUT")" = 1 ] && { checks=$((checks + 1)); echo "ok   $1: printed once"; } ||
    fail "$1: the table is printed $(grep -c '^# time breakdown over' "$LAST_OUT") times (rank 0 only: once)"
}

# workload NAME [OPTIONS...]: the command line of each workload, small.
eval_args=(eval --data "$TEST" --per-device-batch 256)
logreg_args=(logreg --data "$SMALL" --maxiter 30 --quiet)
ensemble_args=(ensemble --train "$TRAIN" --test "$TEST" --train-limit 512 --test-limit 500 --batch-size 32
               --conv-features 4 --dense-features none)

for w in eval logreg ensemble; do
  declare -n args="${w}_args"
  run "$w" 0 120 mpi 2 "$SPMD" "${args[@]}" --json "$WORK/$w.json"
  expect_table "$w"
  run "${w}_json" 0 10 breakdown_ok "$WORK/$w.json" "$LAST_SECONDS" "$w"
done

# A slow rank: 50 ms more per device dispatch (eval: 20 steps of 256 rows per rank).
run eval_slow 0 120 mpi 2 "$SPMD" "${eval_args[@]}" --simulate-slow 1:0.05 --json "$WORK/eval_slow.json"
expect_table eval_slow
expect_in "eval_slow: names rank 1" 'slowest rank 1 \('
run eval_slow_json 0 10 breakdown_ok "$WORK/eval_slow.json" "$LAST_SECONDS" eval 1 0.05
run logreg_slow 0 120 mpi 2 "$SPMD" "${logreg_args[@]}" --simulate-slow 0:0.03 --json "$WORK/logreg_slow.json"
run logreg_slow_json 0 10 breakdown_ok "$WORK/logreg_slow.json" "$LAST_SECONDS" logreg 0 0.03
run ensemble_slow 0 120 mpi 2 "$SPMD" "${ensemble_args[@]}" --simulate-slow 1:0.03 --json "$WORK/ensemble_slow.json"
run ensemble_slow_json 0 10 breakdown_ok "$WORK/ensemble_slow.json" "$LAST_SECONDS" ensemble 1 0.03
# Worker threads (2 devices per rank), 3 ranks, the last one slow.
run eval_np3_d2_slow 0 120 mpi 3 "$SPMD" "${eval_args[@]}" --devices 2 --simulate-slow 2:0.05 \
  --json "$WORK/eval_np3.json"
expect_in "eval_np3_d2_slow: over 3 ranks" '^# time breakdown over 3 ranks'
run eval_np3_d2_slow_json 0 10 breakdown_ok "$WORK/eval_np3.json" "$LAST_SECONDS" eval 2 0.05

# --simulate-slow is validated like the other options, before any work (on 2 ranks once:
# mpirun takes 2 s to end a failed job; the check is the same on every rank).
run simulate_slow_refused_np2 1 30 mpi 2 "$SPMD" eval --data "$TEST" --simulate-slow 1:0
expect_in "simulate_slow refused on 2 ranks" "--simulate-slow must be RANK:SECONDS"
for bad in "1" "x:0.1" "1:0" "1:-0.5" "-1:0.1" "1:61" "1:0.1x" "1x:0.1" ":0.1" "1:" "1:nan"; do
  run "simulate_slow_refused_${bad//[^0-9a-z]/_}" 1 30 "$SPMD" eval --data "$TEST" --simulate-slow "$bad"
  expect_in "simulate_slow '$bad': message names the option and the constraint" \
    "--simulate-slow must be RANK:SECONDS with RANK >= 0 and 0 < SECONDS <= 60"
  expect_not_in "simulate_slow '$bad': nothing evaluated" '^# time breakdown'
done

finish
