# Shared by the scripts in tools/cluster/ (sourced): where a cluster's state lives and how
# its names are formed. A cluster NAME owns, and only owns:
#   network namespaces  NAME-n1 .. NAME-nN (one per node) and NAME-sw (the switch)
#   a state folder      $SPMD_CLUSTER_ROOT/NAME (hosts file, hostfile, profile, pids)
# Nothing outside these is touched (no /etc/hosts lines: each node sees its own copy).
SPMD_CLUSTER_ROOT=${SPMD_CLUSTER_ROOT:-${TMPDIR:-/tmp}/spmd-clusters}
CLUSTER_SUBNET_PREFIX=10.77.0        # private, and only inside the cluster's namespaces

cluster_log() { echo "cluster: $*" >&2; }
cluster_die() { echo "cluster: error: $*" >&2; exit 1; }

# cluster_check_name NAME: short enough for interface names derived from it, and safe in paths.
cluster_check_name() {
  [[ $1 =~ ^[a-z][a-z0-9]{0,9}$ ]] ||
    cluster_die "cluster name '$1' must be 1-10 characters, lowercase letters and digits, starting with a letter"
}
cluster_state() { echo "$SPMD_CLUSTER_ROOT/$1"; }
node_netns() { echo "$1-n$2"; }          # CLUSTER INDEX
switch_netns() { echo "$1-sw"; }
node_address() { echo "$CLUSTER_SUBNET_PREFIX.$((10 + $1))"; }   # INDEX

# node_index CLUSTER HOST: the index of a node by host name or address (from the state).
node_index() {
  local state
  state=$(cluster_state "$1")
  awk -v h="$2" '$2 == h || $3 == h { print $1; found = 1 } END { exit !found }' "$state/nodes" ||
    cluster_die "cluster $1 has no node '$2' (nodes: $(awk '{ printf "%s ", $2 }' "$state/nodes"))"
}
