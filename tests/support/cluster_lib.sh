# Helpers for the tests on emulated nodes (sourced after cli_lib.sh): bring clusters up with
# tools/cluster/up.sh, run mpirun across them, and always take them down again (the EXIT
# trap), also when a check fails. Skips the whole test (exit 0, a SKIP line) where network
# namespaces cannot be made: not root, or no CAP_NET_ADMIN (an unprivileged container).
CLUSTER_TOOLS=${SPMD_SOURCE_DIR:?}/tools/cluster
export SPMD_LINK_EMULATOR=${SPMD_LINK_EMULATOR:-$(dirname "$SPMD")/spmd-link-emulator}
CLUSTERS=()

require_namespaces() {  # TEST_NAME
  local probe="spmdprobe$$"
  if [ "$(id -u)" -ne 0 ]; then
    echo "SKIP $1: emulated nodes need root (network namespaces); run the tests as root"
    exit 0
  fi
  for tool in ip unshare; do
    command -v "$tool" >/dev/null || { echo "SKIP $1: '$tool' is not installed (apt-get install iproute2; tools/setup.sh does)"; exit 0; }
  done
  if ! ip netns add "$probe" 2>"$WORK/netns.err"; then
    echo "SKIP $1: cannot create a network namespace here ($(cat "$WORK/netns.err"))"
    exit 0
  fi
  ip netns del "$probe"
}

# cluster_up NAME NODES [PROFILE]: a cluster, removed again by the EXIT trap.
cluster_up() {
  CLUSTERS+=("$1")
  run "cluster_up_$1" 0 60 "$CLUSTER_TOOLS/up.sh" "$@"
}
clusters_down() {
  local c
  for c in "${CLUSTERS[@]}"; do "$CLUSTER_TOOLS/down.sh" "$c" 2>&1 | sed 's/^/     /'; done
}
trap 'kill $(jobs -p) 2>/dev/null; clusters_down; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

# spmd_pids_on NAME NODE: pids of spmd processes running on that node of the cluster.
spmd_pids_on() {
  local pid
  for pid in $(ip netns pids "$1-n$2" 2>/dev/null); do
    [ "$(cat /proc/"$pid"/comm 2>/dev/null)" = spmd ] && echo "$pid"
  done
}
