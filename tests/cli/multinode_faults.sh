#!/usr/bin/env bash
# Faults only many nodes have, on emulated nodes (tools/cluster/), 2 nodes x 2 ranks, under
# mpirun with the launcher options of jobs/slurm/job_lib.sh (tools/cluster/mpirun.sh):
#   - node2 lost mid-run (its link set down): the job ends within --hang-timeout + 30 s,
#     naming node2 and its ranks 2 and 3, both when the launcher notices first (hang-timeout
#     30 s; mpirun's keepalive takes ~15 s) and when spmd's watchdog does (hang-timeout 5 s;
#     it then leaves mpirun 30 s, as an abort would wait on the lost daemon for good). The
#     ranks cut off on node2 end on their own after their own watchdog's abort (awaited with
#     hang-timeout 5 s).
#   - a rank killed on node2: the job ends within 30 s with a non-zero exit.
source "$(dirname "$0")/../support/cli_lib.sh"
source "$(dirname "$0")/../support/cluster_lib.sh"
require_namespaces cli.multinode_faults
TRAIN=$DATA/fashion/train.h5
TEST=$DATA/fashion/test.h5
# Long enough to be cut in the middle: ~1 s per epoch here.
LONG=(ensemble --train "$TRAIN" --test "$TEST" --train-limit 4000 --test-limit 1000 --epochs 200
      --conv-features 4,4 --dense-features 16 --progress-every 1000000)

# start_long NAME CLUSTER HANG_TIMEOUT: the long job in the background; waits for its 1st epoch.
start_long() {
  local name=$1 cluster=$2 hang=$3
  ( timeout -k 5 200 "$CLUSTER_TOOLS/mpirun.sh" "$cluster" -np 4 --map-by ppr:2:node "$SPMD" "${LONG[@]}" \
      --hang-timeout "$hang" >"$WORK/$name.out" 2>&1; echo $? >"$WORK/$name.rc" ) &
  LONG_PID=$!
  for _ in $(seq 1 300); do
    grep -qE '^ +1 ' "$WORK/$name.out" 2>/dev/null && return 0
    sleep 0.1
  done
  LAST_OUT=$WORK/$name.out
  fail "$name: the job did not finish its first epoch within 30 s"
  return 1
}

# await_end NAME T0 LIMIT_S: the job ended with a non-zero exit (not the test's timeout)
# within LIMIT_S of T0. Sets LAST_OUT and ENDED_AFTER.
await_end() {
  local name=$1 t0=$2 limit=$3 rc
  wait "$LONG_PID"
  rc=$(cat "$WORK/$name.rc")
  ENDED_AFTER=$(echo "$(date +%s.%N) - $t0" | bc)
  LAST_OUT=$WORK/$name.out
  checks=$((checks + 1))
  # (mpirun passes on a killed rank's 137; the test's own timeout, 200 s, is past every limit.)
  if [ "$rc" = 0 ]; then
    fail "$name: expected the job to end with a non-zero exit, got rc=$rc after ${ENDED_AFTER}s"
    return 1
  fi
  if [ "$(echo "$ENDED_AFTER > $limit" | bc)" = 1 ]; then
    fail "$name: the job ended ${ENDED_AFTER}s after the fault, more than ${limit}s"
    return 1
  fi
  echo "ok   $name: ended ${ENDED_AFTER}s after the fault (limit ${limit}s), rc=$rc"
}

# lost_node NAME HANG_TIMEOUT AWAIT_CUT_OFF: node2's link goes down after the first epoch; with
# AWAIT_CUT_OFF=yes, also waits for the ranks on node2 to end on their own.
lost_node() {
  local name=$1 hang=$2 await_cut_off=$3 c=l$2x$$
  cluster_up "$c" 2 native || return 1
  start_long "$name" "$c" "$hang" || return 1
  ip -n "$c-n2" link set eth0 down
  local t0
  t0=$(date +%s.%N)
  await_end "$name" "$t0" $((hang + 30)) || return 1
  expect_in "$name: the launcher names the lost node" 'lost communication with a remote daemon|Remote daemon: .* on node node2'
  expect_in "$name: spmd names the node and its ranks" 'lost or unreachable: node2 \(ranks 2 3\)'
  local left=""
  if [ "$await_cut_off" != yes ]; then
    left=$(spmd_pids_on "$c" 2)
    [ -z "$left" ] || kill -9 $left 2>/dev/null
    return 0
  fi
  # The ranks on the cut-off node: their own watchdog aborts after hang + 30 s, and they
  # exit at most 10 s after asking for the abort, whether or not it reaches anyone.
  for _ in $(seq 1 $((10 * (hang + 30 + 15)))); do
    left=$(spmd_pids_on "$c" 2)
    [ -z "$left" ] && break
    [ "$(echo "$(date +%s.%N) - $t0 > $hang + 30 + 15" | bc)" = 1 ] && break
    sleep 0.1
  done
  checks=$((checks + 1))
  if [ -z "$left" ]; then
    echo "ok   $name: the ranks on node2 ended on their own ($(echo "$(date +%s.%N) - $t0" | bc)s after the fault)"
  else
    fail "$name: ranks still running on node2 $(echo "$(date +%s.%N) - $t0" | bc)s after the fault: $left"
  fi
}

# The cut-off ranks' own end is the same watchdog path at either hang timeout: awaited once, at
# 5 s (at 30 s it is a minute more of the test, spinning in MPI's progress loop).
lost_node lost_node_launcher_first 30 no
expect_in "lost_node_launcher_first: the early warning" 'warning: waited [0-9]+ s in .*no answer from ranks 2 3'
lost_node lost_node_watchdog_first 5 yes
expect_in "lost_node_watchdog_first: the hang report" 'error: hang detected.*'
expect_in "lost_node_watchdog_first: it leaves the launcher time" 'aborting in 30 s unless the launcher ends the job first'

# A rank killed on node2 (the node stays up): its daemon tells mpirun, which ends the job.
K=k$$
cluster_up "$K" 2 native
if start_long killed_rank "$K" 60; then
  victim=$(spmd_pids_on "$K" 2 | tail -n 1)
  kill -9 "$victim"
  t0=$(date +%s.%N)
  await_end killed_rank "$t0" 30
  expect_in "killed_rank: mpirun names the rank's end" 'exited on signal 9|signal 9 \(Killed\)|Killed'
fi
finish
