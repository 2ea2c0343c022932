#!/usr/bin/env bash
# mpirun across an emulated cluster: runs Open MPI's mpirun on node1 with a host file of all
# nodes, starting the daemons of the other nodes through rsh_agent.sh, and keeping both the
# out-of-band and the MPI traffic on the cluster's interconnect (TCP between nodes, shared
# memory within a node, as Open MPI chooses on a real cluster). It goes through spmdrun
# (tools/spmdrun), as the job scripts do: keepalive (a lost node ends the job in ~15 s) and
# --bind-to none come from there.
#
#   tools/cluster/mpirun.sh NAME [MPIRUN OPTIONS] PROGRAM [ARGS]
#   e.g. tools/cluster/mpirun.sh c1 -np 4 --map-by ppr:2:node build/spmd info
# SLOTS_PER_NODE (default 2) sets each node's slots in the host file.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/cluster_lib.sh"
[ $# -ge 2 ] || cluster_die "usage: mpirun.sh NAME [MPIRUN OPTIONS] PROGRAM [ARGS]"
name=$1
shift
state=$(cluster_state "$name")
[ -f "$state/nodes" ] || cluster_die "no cluster named '$name'; tools/cluster/up.sh $name N"
awk -v s="${SLOTS_PER_NODE:-2}" '{ print $2 " slots=" s }' "$state/nodes" >"$state/hostfile"
export SPMD_CLUSTER=$name OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
subnet=$CLUSTER_SUBNET_PREFIX.0/24
exec "$here/on.sh" "$name" 1 "$here/../spmdrun" --launcher mpirun --hostfile "$state/hostfile" \
  --mca plm_rsh_agent "$here/rsh_agent.sh" \
  --mca oob_tcp_if_include "$subnet" --mca btl_tcp_if_include "$subnet" \
  --mca btl self,vader,tcp "$@"
