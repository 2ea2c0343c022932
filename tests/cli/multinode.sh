#!/usr/bin/env bash
# The three workloads across emulated nodes (tools/cluster/: a network namespace and a host
# name per node, TCP between nodes, shared memory within one, the file system shared), each
# checked against a one-node run of the same command:
#   - info: 2 nodes x 2 ranks x 2 devices; node-local ranks restart at 0 on each node
#   - ensemble: 8 members on 2 nodes = the same 8 members on one node (bitwise digest and
#     metrics); the checkpoint written collectively across nodes resumes across nodes to
#     the straight run's result
#   - eval: every example counted once, the predictions file (written from both nodes) equal
#     to one rank's, for the ensemble's CNN with a batch that divides nothing
#   - logreg: bitwise the one-rank value and weights, on 2 nodes (bridge) and on 3 nodes
#     behind the link emulator's slow profile (1 ms, 1 Gbit/s)
source "$(dirname "$0")/../support/cli_lib.sh"
source "$(dirname "$0")/../support/cluster_lib.sh"
require_namespaces cli.multinode
TRAIN=$DATA/fashion/train.h5
TEST=$DATA/fashion/test.h5
py() { /usr/bin/python3 -c "$1"; }
C=mw$$
cluster_up "$C" 2 native || { finish; exit 1; }
ACROSS=("$CLUSTER_TOOLS/mpirun.sh" "$C" -np 4 --map-by ppr:2:node)

# --- info: who runs where ------------------------------------------------------------------
run info 0 60 "${ACROSS[@]}" "$SPMD" info --devices 2 --json "$WORK/info.json"
run info_table 0 10 py "
import json; t = json.load(open('$WORK/info.json'))['rank_table']
got = [(r['rank'], r['host'], r['local_rank'], r['devices'].split(' (')[0]) for r in t]
want = [(0, 'node1', 0, '2 x cpu'), (1, 'node1', 1, '2 x cpu'), (2, 'node2', 0, '2 x cpu'), (3, 'node2', 1, '2 x cpu')]
assert got == want, got"
# Open MPI places ranks by node with --map-by node: 0 and 2 on node1, 1 and 3 on node2.
run info_by_node 0 60 "$CLUSTER_TOOLS/mpirun.sh" "$C" -np 4 --map-by node "$SPMD" info --json "$WORK/info_rr.json"
run info_by_node_table 0 10 py "
import json; t = json.load(open('$WORK/info_rr.json'))['rank_table']
assert [(r['host'], r['local_rank']) for r in t] == [('node1', 0), ('node2', 0), ('node1', 1), ('node2', 1)], t"

# --- ensemble: the members do not depend on where they run ---------------------------------
NET=(--conv-features 4,8 --dense-features 16 --train "$TRAIN" --test "$TEST" --train-limit 640 --test-limit 1000 --eval-batch 96)
same_results() {  # A.json B.json: the same digest and metrics (wall-clock fields aside)
  py "
import json
a=json.load(open('$1')); b=json.load(open('$2'))
strip=lambda j:[{k:v for k,v in e.items() if k not in ('seconds','images_per_second')} for e in j['epochs']]
assert a['members']==b['members']==8, (a['members'], b['members'])
assert a['params_digest']==b['params_digest'], (a['params_digest'], b['params_digest'])
assert strip(a)==strip(b), (strip(a), strip(b))"
}
run ensemble_one_node 0 300 mpi 4 "$SPMD" ensemble "${NET[@]}" --devices 2 --epochs 2 --json "$WORK/ens_local.json"
run ensemble_half 0 300 "${ACROSS[@]}" "$SPMD" ensemble "${NET[@]}" --devices 2 --epochs 1 --checkpoint "$WORK/ens.h5"
run ensemble_resumed 0 300 "${ACROSS[@]}" "$SPMD" ensemble "${NET[@]}" --devices 2 --epochs 2 --checkpoint "$WORK/ens.h5" --resume --json "$WORK/ens_nodes.json"
expect_in "ensemble: resumed across nodes" 'resumed from .* at epoch 2'
run ensemble_same_members 0 10 same_results "$WORK/ens_local.json" "$WORK/ens_nodes.json"

# --- eval: exact counts and the same predictions as one rank --------------------------------
EVAL=(eval --data "$TEST" --model cnn --weights "$WORK/ens.h5" --per-device-batch 37)
run eval_one_rank 0 300 mpi 1 "$SPMD" "${EVAL[@]}" --json "$WORK/ev1.json" --predictions "$WORK/pred1.h5"
run eval_nodes 0 300 "${ACROSS[@]}" "$SPMD" "${EVAL[@]}" --devices 2 --json "$WORK/ev4.json" --predictions "$WORK/pred4.h5"
expect_in "eval: every example once" 'every example counted exactly once'
run eval_same 0 30 py "
import json, h5py, numpy as np
a=json.load(open('$WORK/ev1.json')); b=json.load(open('$WORK/ev4.json'))
assert b['total']==10000 and (a['correct'], a['total'])==(b['correct'], b['total']), (a, b)
assert b['ranks']==4 and b['devices_per_rank']==2, b
with h5py.File('$WORK/pred1.h5') as p, h5py.File('$WORK/pred4.h5') as q:
    assert sorted(p.keys())==sorted(q.keys()), (list(p), list(q))
    for k in p:
        x, y = p[k][()], q[k][()]
        assert x.dtype==y.dtype and x.shape==y.shape and np.array_equal(x.view(np.uint8), y.view(np.uint8)), k"

# --- logreg: bitwise the one-rank result -----------------------------------------------------
LOGREG=(logreg --data "$DATA/logreg-small.h5")
same_logreg() {  # A.json A.h5 B.json B.h5
  py "
import json, h5py, numpy as np
a=json.load(open('$1')); b=json.load(open('$3'))
assert a['value'].hex()==b['value'].hex() and a['iterations']==b['iterations'], (a['value'], b['value'])
with h5py.File('$2') as p, h5py.File('$4') as q:
    for k in p:
        if isinstance(p[k], h5py.Dataset): assert np.array_equal(p[k][()], q[k][()]), k"
}
run logreg_one_rank 0 120 mpi 1 "$SPMD" "${LOGREG[@]}" --json "$WORK/lr1.json" --weights-out "$WORK/lr1.h5"
run logreg_nodes 0 120 "${ACROSS[@]}" "$SPMD" "${LOGREG[@]}" --devices 2 --json "$WORK/lr4.json" --weights-out "$WORK/lr4.h5"
run logreg_bitwise 0 10 same_logreg "$WORK/lr1.json" "$WORK/lr1.h5" "$WORK/lr4.json" "$WORK/lr4.h5"
S=ms$$
cluster_up "$S" 3 slow || { finish; exit 1; }
run logreg_slow_link 0 120 "$CLUSTER_TOOLS/mpirun.sh" "$S" -np 3 --map-by ppr:1:node "$SPMD" "${LOGREG[@]}" --json "$WORK/lr3.json" --weights-out "$WORK/lr3.h5"
expect_in "logreg: 3 ranks" 'over 3 rank'
run logreg_slow_bitwise 0 10 same_logreg "$WORK/lr1.json" "$WORK/lr1.h5" "$WORK/lr3.json" "$WORK/lr3.h5"
finish
