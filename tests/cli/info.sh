#!/usr/bin/env bash
# spmd info and the runtime's failure behaviour seen from the command line: start-up table,
# --json, --config, option errors on every rank, mismatched options, the hang watchdog.
source "$(dirname "$0")/../support/cli_lib.sh"

run info_np2 0 60 mpi 2 "$SPMD" info --devices 2 --json "$WORK/info.json"
expect_in "table lists rank 1" '^#\s+1\s+\S+\s+1\s+2 x cpu'
expect_in "table names the backend" 'backend cpu'
run info_json_keys 0 10 /usr/bin/python3 -c "
import json,sys; j=json.load(open('$WORK/info.json'))
assert j['ranks']==2 and j['devices_per_rank']==2 and j['total_devices']==4, j
assert len(j['rank_table'])==2 and 'mpi' in j['libraries'], j"

run help 0 30 "$SPMD" info --help
expect_in "help lists --devices with its default" '--devices arg \(=1\)'

for bad in "--devices 0" "--devices -3" "--hang-timeout -1" "--backend gpu" "--no-such-option" "--devices abc"; do
  run "bad_option[$bad]" nonzero 30 mpi 2 "$SPMD" info $bad
  expect_in "bad_option[$bad] names the option" "$(echo "$bad" | cut -d' ' -f1 | sed 's/^--//')"
  expect_not_in "bad_option[$bad] needs no abort" 'MPI_ABORT'
done

printf 'devices = 3\n# a comment\n' > "$WORK/ok.ini"
run config_file 0 30 "$SPMD" info --config "$WORK/ok.ini"
expect_in "config sets devices" 'devices/rank 3'
run config_cmdline_wins 0 30 "$SPMD" info --config "$WORK/ok.ini" --devices 2
expect_in "command line wins over config" 'devices/rank 2'
printf 'devicez = 3\n' > "$WORK/bad.ini"
run config_unknown_key nonzero 30 "$SPMD" info --config "$WORK/bad.ini"
expect_in "unknown config key named" 'devicez'
run config_missing nonzero 30 "$SPMD" info --config "$WORK/nope.ini"
expect_in "missing config named" 'nope.ini'

# Ranks started with different arguments (MPMD launch) must stop with a clear error.
run mismatch nonzero 30 mpirun --oversubscribe -np 1 "$SPMD" info --devices 1 : -np 1 "$SPMD" info --devices 2
expect_in "mismatch explained" "different options.*devices=1.*rank 1 has 'devices=2'"

# A rank that never arrives: the others are stopped within seconds, with the culprit named.
run hang nonzero 60 mpi 3 "$SPMD" info --hang-timeout 2 --simulate-stall "1:info: final barrier"
expect_in "hang report names the absent rank" "did not arrive: rank 1 on [^ ]+ \(at 'info: final barrier \(simulated stall\)'"
expect_in "hang report names the step" "during 'info: final barrier'"
awk -v s="$LAST_SECONDS" 'BEGIN { exit !(s < 30) }' || fail "hang took ${LAST_SECONDS}s to end"

# Bare runs (Open MPI singletons, started on ob1: README, Launching) side by side, each reading
# the same file through MPI-IO and writing its own predictions: none may disturb another. A
# smoke check, not a proof: with Open MPI's isolated singletons, which share one session
# directory, such a round of 16 failed about one time in six here (12 ONNX evals: 2 of 12 runs).
side_by_side() {
  local i rcs=()
  for i in $(seq 1 16); do
    "$SPMD" eval --data "$DATA/fashion/test.h5" --model zero --predictions "$WORK/side$i.h5" \
      >"$WORK/side$i.out" 2>&1 &
    rcs+=($!)
  done
  local bad=0
  for i in "${!rcs[@]}"; do wait "${rcs[$i]}" || { bad=1; cat "$WORK/side$((i + 1)).out"; }; done
  return $bad
}
run bare_runs_side_by_side 0 120 side_by_side

finish
