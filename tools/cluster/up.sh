#!/usr/bin/env bash
# Brings up an emulated cluster of N nodes on this machine (root): each node is a network
# namespace with its own host name (a UTS namespace per process, see on.sh), joined through
# a switch namespace by an interconnect with the given profile. MPI ranks on different nodes
# then talk over TCP through that interconnect, as on a real cluster, while the file system
# stays shared (as a parallel file system would be).
#
#   tools/cluster/up.sh NAME NODES [PROFILE]
#   tools/cluster/on.sh NAME node2 hostname          # run anything on a node
#   tools/cluster/mpirun.sh NAME -np 4 --map-by ppr:2:node build/spmd info
#   tools/cluster/down.sh NAME                        # removes everything up.sh made
#
# PROFILE (the interconnect):
#   native      veth pairs and a Linux bridge: the kernel's own latency (a few µs), no limit
#   fast        10 µs one-way, 10 Gbit/s per node   } through spmd-link-emulator, a user-space
#   slow        1 ms one-way, 1 Gbit/s per node     } switch (this kernel has no sch_netem)
#   DELAY_US:RATE_MBIT   any other pair, e.g. 100:25000
# Host names are node1..nodeN at 10.77.0.11.. (only inside the cluster). On any failure
# everything made so far is removed again.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/cluster_lib.sh"

[ $# -ge 2 ] && [ $# -le 3 ] || cluster_die "usage: up.sh NAME NODES [native|fast|slow|DELAY_US:RATE_MBIT]"
name=$1 nodes=$2 profile=${3:-native}
cluster_check_name "$name"
[[ $nodes =~ ^[0-9]+$ ]] && [ "$nodes" -ge 1 ] && [ "$nodes" -le 16 ] || cluster_die "NODES must be 1..16, got '$nodes'"
case "$profile" in
  native) delay_us="" rate_mbit="" ;;
  fast) delay_us=10 rate_mbit=10000 ;;
  slow) delay_us=1000 rate_mbit=1000 ;;
  *:*)
    delay_us=${profile%%:*} rate_mbit=${profile#*:}
    [[ $delay_us =~ ^[0-9]+$ && $rate_mbit =~ ^[0-9]+$ && $rate_mbit -gt 0 ]] ||
      cluster_die "profile '$profile': expected DELAY_US:RATE_MBIT with whole numbers, rate > 0"
    ;;
  *) cluster_die "unknown profile '$profile' (native, fast, slow or DELAY_US:RATE_MBIT)" ;;
esac
[ "$(id -u)" -eq 0 ] || cluster_die "must run as root (network namespaces need CAP_NET_ADMIN)"
for tool in ip unshare nsenter mount; do
  command -v "$tool" >/dev/null || cluster_die "'$tool' not found (apt-get install iproute2 util-linux mount)"
done
emulator=""
if [ -n "$delay_us" ]; then
  emulator=${SPMD_LINK_EMULATOR:-$here/../../build/spmd-link-emulator}
  [ -x "$emulator" ] || cluster_die "profile '$profile' needs spmd-link-emulator ($emulator is missing; build the project or set SPMD_LINK_EMULATOR)"
fi

state=$(cluster_state "$name")
[ ! -e "$state" ] && ! ip netns list | grep -q "^$name-" ||
  cluster_die "a cluster named '$name' exists already (state $state or namespaces $name-*); tools/cluster/down.sh $name"
mkdir -p "$state"
trap 'rc=$?; [ $rc -eq 0 ] || { cluster_log "bring-up failed; removing what was made"; "$here/down.sh" "$name" >&2 || true; }' EXIT

# The node table: INDEX HOSTNAME ADDRESS. hosts: what every node sees as /etc/hosts.
: >"$state/nodes"
{ echo "127.0.0.1 localhost"; } >"$state/hosts"
for i in $(seq 1 "$nodes"); do
  echo "$i node$i $(node_address "$i")" >>"$state/nodes"
  echo "$(node_address "$i") node$i" >>"$state/hosts"
done
echo "$profile" >"$state/profile"

sw=$(switch_netns "$name")
ip netns add "$sw"
ip -n "$sw" link set lo up
for i in $(seq 1 "$nodes"); do
  ns=$(node_netns "$name" "$i")
  ip netns add "$ns"
  ip -n "$ns" link set lo up
done

if [ -z "$delay_us" ]; then
  ip -n "$sw" link add br0 type bridge
  ip -n "$sw" link set br0 up
  for i in $(seq 1 "$nodes"); do
    ns=$(node_netns "$name" "$i")
    ip -n "$sw" link add "port$i" type veth peer name eth0 netns "$ns"
    ip -n "$sw" link set "port$i" master br0 up
  done
else
  ports=()
  for i in $(seq 1 "$nodes"); do ports+=("$(node_netns "$name" "$i"):eth0"); done
  # The emulator lives in the switch namespace, so `ip netns pids` finds it at teardown.
  ip netns exec "$sw" "$emulator" --delay-us "$delay_us" --rate-mbit "$rate_mbit" \
    --ready-file "$state/emulator.ready" "${ports[@]}" >"$state/emulator.log" 2>&1 &
  for _ in $(seq 1 100); do
    [ -s "$state/emulator.ready" ] && break
    kill -0 $! 2>/dev/null || cluster_die "spmd-link-emulator exited: $(cat "$state/emulator.log")"
    sleep 0.05
  done
  [ -s "$state/emulator.ready" ] || cluster_die "spmd-link-emulator not ready after 5 s: $(cat "$state/emulator.log")"
fi
for i in $(seq 1 "$nodes"); do
  ns=$(node_netns "$name" "$i")
  ip -n "$ns" addr add "$(node_address "$i")/24" dev eth0
  ip -n "$ns" link set eth0 up
done
# Every node reaches every other before anything is started on them.
for i in $(seq 1 "$nodes"); do
  for j in $(seq 1 "$nodes"); do
    [ "$i" = "$j" ] && continue
    ok=0
    for _ in $(seq 1 50); do
      # Port 9 has no listener: "refused" means the node answered.
      reply=$(ip netns exec "$(node_netns "$name" "$i")" timeout 2 bash -c "exec 3<>/dev/tcp/$(node_address "$j")/9" 2>&1 || true)
      if [[ $reply == *refused* ]]; then ok=1; break; fi
      sleep 0.1
    done
    [ $ok = 1 ] || cluster_die "node$i cannot reach node$j at $(node_address "$j") within 5 s"
  done
done
cluster_log "up: $name, $nodes node(s) (node1..node$nodes at $(node_address 1)..), interconnect $profile${delay_us:+ ($delay_us µs, $rate_mbit Mbit/s)}"
