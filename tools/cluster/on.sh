#!/usr/bin/env bash
# Runs a command on a node of an emulated cluster: in the node's network namespace, with the
# node's host name (its own UTS namespace) and the cluster's /etc/hosts (its own mount
# namespace, a bind mount that vanishes with the process). Everything else (files, users,
# /dev/shm, the process table) is the machine's, as on nodes that share a file system.
#
#   tools/cluster/on.sh NAME NODE CMD [ARG...]     NODE: node2, or its address, or 2
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/cluster_lib.sh"
[ $# -ge 3 ] || cluster_die "usage: on.sh NAME NODE CMD [ARG...]"
name=$1 node=$2
shift 2
state=$(cluster_state "$name")
[ -f "$state/nodes" ] || cluster_die "no cluster named '$name' (no $state/nodes); tools/cluster/up.sh $name N"
if [[ $node =~ ^[0-9]+$ ]]; then index=$node; else index=$(node_index "$name" "$node"); fi
host=$(awk -v i="$index" '$1 == i { print $2 }' "$state/nodes")
[ -n "$host" ] || cluster_die "cluster $name has no node $node"
exec ip netns exec "$(node_netns "$name" "$index")" unshare --uts --mount --propagation private -- \
  /bin/sh -c 'hostname "$1" && mount --bind "$2" /etc/hosts && shift 2 && exec "$@"' on.sh "$host" "$state/hosts" "$@"
