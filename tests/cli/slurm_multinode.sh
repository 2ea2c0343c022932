#!/usr/bin/env bash
# The job scripts in jobs/slurm/ on a two-node Slurm: an emulated cluster (tools/cluster/up.sh:
# node1 and node2, each its own network namespace and host name, joined by a bridge) with
# slurmctld on node1 and a slurmd on each node (SPMD_SLURM_CLUSTER=... tools/slurm/up.sh).
# Every job is submitted with --nodes=2, with LAUNCH=srun (srun --mpi=pmix: PMIx between
# the nodes' slurmstepds) and LAUNCH=mpirun (Open MPI's daemon on node2 started through
# srun), side by side:
#   - info, 2 ranks per node: ranks 0,1 on node1 and 2,3 on node2, node-local ranks 0,1 on each
#   - eval, 1 rank per node: every example counted exactly once, the one-node counts
#   - logreg, 2 ranks per node, each job making its data: the same value with both
#     launchers and as 4 ranks of plain mpirun on this machine (one node)
#   - ensemble, 1 rank per node: completes, the same parameters with both launchers
#   - scaling (srun), 1 and 2 ranks across the nodes: the report
# The cluster and the daemons are always removed at the end, also when a check fails.
# Skips (exit 0, with a SKIP line) when Slurm or munge is not installed, not root, or when
# network namespaces cannot be made here (a container without CAP_SYS_ADMIN/CAP_NET_ADMIN).
# The one-node checks (bad launches, requeue, ...) are in tests/cli/slurm.sh.
source "$(dirname "$0")/../support/cli_lib.sh"
source "$(dirname "$0")/../support/slurm_lib.sh" # ROOT, slurm_up, start_job, await_job, ...
slurm_require cli.slurm_multinode
for tool in ip unshare nsenter; do
  if ! command -v "$tool" >/dev/null; then
    echo "SKIP cli.slurm_multinode: '$tool' is not installed (iproute2, util-linux; tools/setup.sh installs them)"
    exit 0
  fi
done
probe=spmdprobe$$
if ! ip netns add "$probe" 2>/dev/null; then
  echo "SKIP cli.slurm_multinode: cannot make network namespaces here ('ip netns add' fails), so no emulated nodes"
  exit 0
fi
ip netns del "$probe"

CLUSTER=sm$$ # unique on this machine: namespaces sm<pid>-n1, -n2, -sw
PREFIX=$WORK/slurm
mkdir -p "$WORK/logs" "$WORK/runs"
# Replaces cli_lib's trap: background submissions first, then the daemons (cancelling what
# is left: that needs node1, so before the cluster), then the cluster (only if this test
# made it), then the folder.
OUR_CLUSTER=0
stop_cluster() {
  if [ $OUR_CLUSTER = 1 ]; then "$ROOT/tools/cluster/down.sh" "$CLUSTER" 2>&1 | sed 's/^/     /'; fi
}
trap 'kill $(jobs -p) 2>/dev/null; stop_slurm "$PREFIX"; stop_cluster; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

if ip netns list | grep -q "^$CLUSTER-"; then
  fail "namespaces of a cluster named $CLUSTER exist already (ip netns list); not touching them"
  finish
  exit 1
fi
OUR_CLUSTER=1
run cluster_up 0 60 "$ROOT/tools/cluster/up.sh" "$CLUSTER" 2 native || { finish; exit 1; }
# 8 CPUs per node: most of the jobs below run side by side.
slurm_up "$PREFIX" 8 SPMD_SLURM_CLUSTER="$CLUSTER" || { finish; exit 1; }
expect_in "up.sh puts the client wrappers first in PATH" "SPMD_SLURM_CLUSTER=$CLUSTER PATH=\"$PREFIX/bin:"
run sinfo 0 10 sinfo -h -N -o '%N %T %c'
expect_in "node1 idle with 8 CPUs" '^node1 idle 8$'
expect_in "node2 idle with 8 CPUs" '^node2 idle 8$'
run slurmctld_on_node1 0 10 scontrol show config
expect_in "slurmctld runs on node1 (10.77.0.11)" '^SlurmctldHost\[0\] += node1\(10\.77\.0\.11\)'
run clients_on_node2 0 10 env SPMD_SLURM_NODE=node2 scontrol show node node2
expect_in "a client on node2 reaches slurmctld; node2's address" 'NodeAddr=10\.77\.0\.12 '

# --- submissions -------------------------------------------------------------------------
FASHION=$DATA/fashion
TWO_PER_NODE=(--nodes=2 --ntasks=4 --ntasks-per-node=2)
ONE_PER_NODE=(--nodes=2 --ntasks=2 --ntasks-per-node=1)
# logreg first: its jobs make their data and run the longest.
for launch in srun mpirun; do
  # Each job makes its own copy of the data (two writers of one file would race).
  start_job logreg-$launch LAUNCH=$launch CONFIG=inputs/logreg-small.ini "${TWO_PER_NODE[@]}" logreg.sbatch \
    --data "$WORK/data-$launch/classification-2000x20-c3-i5-s0.h5"
  start_job info-$launch LAUNCH=$launch "${TWO_PER_NODE[@]}" info.sbatch
  start_job eval-$launch LAUNCH=$launch CONFIG=inputs/eval-small.ini "${ONE_PER_NODE[@]}" eval.sbatch \
    --data "$FASHION/test.h5"
  start_job ensemble-$launch LAUNCH=$launch CONFIG=inputs/ensemble-small.ini "${ONE_PER_NODE[@]}" --cpus-per-task=1 \
    ensemble.sbatch --train "$FASHION/train.h5" --test "$FASHION/test.h5" --epochs 1
done
# --exclusive (in the script): it runs when both nodes are free, after the others.
start_job scaling-srun LAUNCH=srun WORKLOAD=logreg CONFIG=inputs/logreg-small.ini "${ONE_PER_NODE[@]}" scaling.sbatch \
  --ranks "1 2" --mode strong -- --data "$WORK/data-scaling/classification-3000x20-c3-i5-s0.h5"

# on_both_nodes NAME FILE RANKS_PER_NODE: the run's rank table (in its JSON) places ranks
# block-wise on node1 then node2, node-local ranks counting from 0 on each node.
on_both_nodes() {
  json_check "$1_nodes" "$2" "
per_node = $3
want = [('node%d' % (1 + r // per_node), r % per_node) for r in range(2 * per_node)]
got = [(row['host'], row['local_rank']) for row in j['rank_table']]
assert got == want, got"
}

# --- info ------------------------------------------------------------------------------
for launch in srun mpirun; do
  await_job info-$launch 0 || continue
  expect_in "info-$launch: allocation of both nodes" "^# job $JOB_ID \(info-$launch\) restart 0 on node\[1-2\]: 4 task"
  expect_in "info-$launch: launched with $launch" "^# [0-9:]+ .*$launch"
  expect_in "info-$launch: table lists 4 ranks" 'ranks 4 +devices/rank 1'
  expect_in "info-$launch: rank 1 on node1, local rank 1" '^#\s+1\s+node1\s+1\s+1 x cpu'
  expect_in "info-$launch: rank 2 on node2, local rank 0" '^#\s+2\s+node2\s+0\s+1 x cpu'
  expect_in "info-$launch: rank 3 on node2, local rank 1" '^#\s+3\s+node2\s+1\s+1 x cpu'
  on_both_nodes "info-$launch" "$RUN_DIR/info.json" 2
done

# --- eval: the one-node counts ---------------------------------------------------------
for launch in srun mpirun; do
  await_job eval-$launch 0 || continue
  expect_in "eval-$launch: every example once" 'every example counted exactly once: total 10000 = 10000'
  json_check "eval-${launch}_json" "$RUN_DIR/eval.json" "
assert (j['correct'], j['total'], j['ranks'], j['devices_per_rank']) == (1000, 10000, 2, 2), j
assert j['strategy'] == 'pad' and j['steps'] == 27, j"
  on_both_nodes "eval-$launch" "$RUN_DIR/eval.json" 1
done

# --- logreg: the same value as on one node ---------------------------------------------
declare -A LOGREG_JSON
for launch in srun mpirun; do
  await_job logreg-$launch 0 || continue
  expect_in "logreg-$launch: the job made its data" 'make-classification --samples 2000 --features 20 --classes 3'
  json_check "logreg-${launch}_json" "$RUN_DIR/logreg.json" "
assert j['ranks'] == 4 and j['status'] in ('converged', 'max_iterations'), j
assert j['value'] < 1.0986122886681098, j['value']   # ln 3 at W = 0"
  on_both_nodes "logreg-$launch" "$RUN_DIR/logreg.json" 2
  LOGREG_JSON[$launch]=$RUN_DIR/logreg.json
done
if [ -n "${LOGREG_JSON[srun]:-}" ]; then
  # One node: 4 ranks of plain mpirun on this machine, on the srun job's data.
  run logreg_one_node 0 120 mpi 4 "$SPMD" logreg --config "$ROOT/inputs/logreg-small.ini" --devices 1 --backend cpu \
    --data "$WORK/data-srun/classification-2000x20-c3-i5-s0.h5" --json "$WORK/logreg-one-node.json"
  for launch in srun mpirun; do
    [ -n "${LOGREG_JSON[$launch]:-}" ] || continue
    run "logreg-${launch}_same_as_one_node" 0 10 /usr/bin/python3 -c "
import json
one, two = (json.load(open(f)) for f in ('$WORK/logreg-one-node.json', '${LOGREG_JSON[$launch]}'))
keys = ('value', 'error', 'iterations', 'evaluations', 'status')
assert all(one[k] == two[k] for k in keys), [(k, one[k], two[k]) for k in keys]
print('value', two['value'], 'after', two['iterations'], 'iterations on 2 nodes and on 1')"
  done
fi

# --- ensemble: completes, the same parameters with both launchers ------------------------
declare -A ENSEMBLE_JSON
for launch in srun mpirun; do
  await_job ensemble-$launch 0 || continue
  json_check "ensemble-${launch}_json" "$RUN_DIR/ensemble.json" "
assert j['members'] == 2 and j['ranks'] == 2 and len(j['epochs']) == 1 and not j['interrupted'], j
assert 0.2 < j['epochs'][0]['test_accuracy'] <= 1, j['epochs']"
  on_both_nodes "ensemble-$launch" "$RUN_DIR/ensemble.json" 1
  checks=$((checks + 1))
  if [ -s "$RUN_DIR/checkpoint.h5" ]; then echo "ok   ensemble-$launch: checkpoint in the run folder"; else fail "ensemble-$launch: no checkpoint.h5 in $RUN_DIR"; fi
  ENSEMBLE_JSON[$launch]=$RUN_DIR/ensemble.json
done
if [ -n "${ENSEMBLE_JSON[srun]:-}" ] && [ -n "${ENSEMBLE_JSON[mpirun]:-}" ]; then
  run ensemble_same_both_launchers 0 10 /usr/bin/python3 -c "
import json
a, b = (json.load(open(f)) for f in ('${ENSEMBLE_JSON[srun]}', '${ENSEMBLE_JSON[mpirun]}'))
assert a['params_digest'] == b['params_digest'], (a['params_digest'], b['params_digest'])
assert a['epochs'][0]['test_accuracy'] == b['epochs'][0]['test_accuracy'], (a['epochs'], b['epochs'])"
fi

# --- scaling: 1 and 2 ranks, the 2-rank runs across the nodes ----------------------------
if await_job scaling-srun 0; then
  expect_in "scaling: the report's table" '^\| 2 \| 1 \| 2 \|'
  for f in strong/report.md strong/report.csv strong/speedup.png; do
    checks=$((checks + 1))
    if [ -s "$RUN_DIR/$f" ]; then echo "ok   scaling: $f"; else fail "scaling: $f missing in $RUN_DIR"; fi
  done
  json_check scaling_two_ranks "$RUN_DIR/strong/logreg-r2-d1-k1.json" "
assert [row['host'] for row in j['rank_table']] == ['node1', 'node2'], j['rank_table']"
fi

run slurm_queue_empty 0 10 squeue -h
checks=$((checks + 1))
if [ -s "$LAST_OUT" ]; then fail "jobs left in the queue"; else echo "ok   no job left in the queue"; fi

# --- a node lost under srun (last: node2 stays down) ------------------------------------------
# node2's link goes down after the first epoch. spmd's watchdog (--hang-timeout 5) names node2
# and its ranks and aborts at once (srun, unlike mpirun, ends a step with an unreachable node
# after KillWait); the job must end within hang-timeout + 30 s of the loss.
start_job lost-srun LAUNCH=srun CONFIG=inputs/ensemble-small.ini "${TWO_PER_NODE[@]}" --no-requeue \
  --cpus-per-task=1 ensemble.sbatch --train "$FASHION/train.h5" --test "$FASHION/test.h5" --train-limit 4000 \
  --epochs 200 --conv-features 4,4 --dense-features 16 --hang-timeout 5
lost_log=""
for _ in $(seq 1 600); do
  lost_log=$(ls "$WORK"/logs/lost-srun-*.out 2>/dev/null | head -n 1)
  [ -n "$lost_log" ] && grep -qE '^ +1 ' "$lost_log" && break
  sleep 0.1
done
ip -n "$CLUSTER-n2" link set eth0 down
lost_t0=$(date +%s.%N)
if await_job lost-srun nonzero; then
  lost_s=$(echo "$(date +%s.%N) - $lost_t0" | bc)
  checks=$((checks + 1))
  if [ "$(echo "$lost_s <= 35" | bc)" = 1 ]; then echo "ok   lost-srun: ended ${lost_s}s after node2 was lost (limit 35 s)"
  else fail "lost-srun: ended ${lost_s}s after node2 was lost, more than hang-timeout + 30 = 35 s"; fi
  expect_in "lost-srun: spmd names the lost node and its ranks" 'lost or unreachable: node2 \(ranks 2 3\)'
fi
finish
