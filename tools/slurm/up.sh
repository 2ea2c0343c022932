#!/usr/bin/env bash
# Brings up Slurm (munged + slurmctld + slurmd) entirely under a prefix: no files in /etc,
# /run or /var, nothing started through systemd. For CI and for trying the job scripts in
# jobs/slurm/ on a workstation. Run as root (the daemons and the jobs run as root; there is
# no accounting). Two modes:
#
# One node (default): everything on localhost.
#   eval "$(tools/slurm/up.sh)"          # prints the exports; progress goes to stderr
#   sbatch --wait jobs/slurm/info.sbatch
#   tools/slurm/down.sh                   # stops the daemons again (uses $SPMD_SLURM_PREFIX)
#
# Multi-node, on an emulated cluster (tools/cluster/, made first): slurmctld runs on node1,
# one slurmd per node on that node (`slurmd -N nodeK`, NodeAddr its cluster address, spool
# folder, pid and log file per node through %n); munged stays one process on this machine
# (its socket is a path every node sees). The nodes' addresses exist only inside the
# cluster, so every client command runs on a node: $PREFIX/bin holds sbatch, srun, salloc,
# squeue, sinfo, scontrol and scancel wrappers that run the real one on node1 (or on
# $SPMD_SLURM_NODE) through tools/cluster/on.sh, and the exports put it first in PATH.
#   tools/cluster/up.sh c1 2
#   eval "$(SPMD_SLURM_CLUSTER=c1 tools/slurm/up.sh)"
#   sbatch --wait --nodes=2 --ntasks-per-node=2 --ntasks=4 jobs/slurm/info.sbatch   # runs on node1
#   SPMD_SLURM_NODE=node2 scontrol listpids             # any client on another node
#   tools/slurm/down.sh; tools/cluster/down.sh c1        # Slurm first, then the cluster
# Jobs launch across the nodes as on a real cluster: `srun --mpi=pmix` (the slurmstepds'
# PMIx servers talk over TCP between NodeAddrs, on ephemeral ports: nothing to open) and
# mpirun inside the allocation (its daemons start through srun; each node has only lo and
# eth0, so Open MPI's out-of-band and TCP traffic take the cluster's interconnect unasked).
#
# Environment:
#   SPMD_SLURM_PREFIX  where config, spool, logs, pid files and the munge socket go
#                      (default: a new temporary folder)
#   SPMD_SLURM_CPUS    CPUs each node advertises (default 4, so 4-rank jobs fit on a 2-core
#                      runner; SlurmdParameters=config_overrides lets it exceed the hardware)
#   SPMD_SLURM_PORTS   "CTLD_PORT D_PORT" (default: two free ports, so several instances
#                      can run side by side, e.g. two CI jobs on one machine)
#   SPMD_SLURM_CLUSTER the emulated cluster to run on (tools/cluster/up.sh NAME N; its state
#                      under SPMD_CLUSTER_ROOT as there); unset: one node on localhost
#   SPMD_SLURM_NODE    read by the client wrappers (multi-node): the node a client command
#                      runs on (default node1)
# Stdout: `export SLURM_CONF=... SPMD_SLURM_PREFIX=...` (multi-node: also SPMD_SLURM_CLUSTER
# and PATH). Exit 1 with the daemon logs when the nodes do not become idle within 20 s.
set -euo pipefail

log() { echo "slurm-up: $*" >&2; }
die() { log "error: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "must run as root (SlurmUser/SlurmdUser are root; munged refuses a key not owned by its user)"
for tool in munged mungekey munge unmunge slurmctld slurmd sinfo; do
  command -v "$tool" >/dev/null || die "$tool not found; install slurm-wlm and munge (tools/setup.sh does)"
done

# Multi-node: the nodes (names and addresses) come from the emulated cluster's state.
cluster=${SPMD_SLURM_CLUSTER:-}
if [ -n "$cluster" ]; then
  cluster_tools=$(cd "$(dirname "${BASH_SOURCE[0]}")/../cluster" && pwd)
  source "$cluster_tools/cluster_lib.sh" # SPMD_CLUSTER_ROOT, cluster_state
  cluster_check_name "$cluster"
  cluster_nodes=$(cluster_state "$cluster")/nodes
  [ -f "$cluster_nodes" ] ||
    die "SPMD_SLURM_CLUSTER=$cluster: no such emulated cluster ($cluster_nodes is missing); make it first: tools/cluster/up.sh $cluster 2"
  mapfile -t node_names < <(awk '{ print $2 }' "$cluster_nodes")
  mapfile -t node_addrs < <(awk '{ print $3 }' "$cluster_nodes")
  [ ${#node_names[@]} -ge 1 ] || die "cluster $cluster has no nodes ($cluster_nodes is empty)"
  on_node() { "$cluster_tools/on.sh" "$cluster" "$@"; }
fi

prefix=${SPMD_SLURM_PREFIX:-$(mktemp -d "${TMPDIR:-/tmp}/spmd-slurm.XXXXXX")}
mkdir -p "$prefix"
prefix=$(cd "$prefix" && pwd)
# munged wants every folder above its socket to be a+x; mktemp makes 0700.
chmod 0755 "$prefix"
dir=$prefix
while [ "$dir" != / ]; do
  dir=$(dirname "$dir")
  [ "$(( $(stat -c %#a "$dir") & 0111 ))" -eq $((0111)) ] ||
    die "munged needs every folder above its socket to be executable by all, and $dir is not (chmod a+x $dir, or choose another SPMD_SLURM_PREFIX)"
done
cpus=${SPMD_SLURM_CPUS:-4}
node=localhost
[ -n "$cluster" ] || node_names=("$node")
socket=$prefix/munge/munge.socket
# A unix socket path longer than sun_path (108 bytes) fails later with an obscure message.
[ ${#socket} -lt 100 ] || die "prefix too long for the munge socket path ($socket); choose a shorter SPMD_SLURM_PREFIX"
if [ -n "$cluster" ]; then
  # ... as would the PMIx socket of a step's slurmstepd in the node's spool folder.
  pmix_socket=$prefix/spool/d/${node_names[-1]}/stepd.slurm.pmix.9999999.999
  [ ${#pmix_socket} -lt 108 ] || die "prefix too long for the slurmstepd's PMIx socket path ($pmix_socket); choose a shorter SPMD_SLURM_PREFIX"
fi

# A port below the kernel's ephemeral range (ip_local_port_range: 32768-60999 by default): one
# inside it can be free when checked and taken a moment later as the local port of an outgoing
# connection (an mpirun's, another test's), and slurmd then fails to bind it (seen in CI). Free
# means no socket in any state uses it, not only no listener.
free_port() {
  local port low=32768
  read -r low _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || low=32768
  [ "$low" -gt 12000 ] || die "the ephemeral port range starts at $low: set SPMD_SLURM_PORTS to two free ports"
  for _ in $(seq 1 200); do
    port=$((10000 + RANDOM % (low - 10000)))
    [ -z "$(ss -Hant "sport = :$port" 2>/dev/null)" ] && { echo "$port"; return 0; }
  done
  die "no free TCP port found for the Slurm daemons"
}
if [ -n "${SPMD_SLURM_PORTS:-}" ]; then
  read -r ctld_port d_port <<<"$SPMD_SLURM_PORTS"
else
  ctld_port=$(free_port)
  d_port=$(free_port)
  [ "$d_port" != "$ctld_port" ] || d_port=$((ctld_port + 1))
fi

# A previous instance under the same prefix would keep its pid files and ports busy.
if [ -f "$prefix/run/slurmctld.pid" ] && kill -0 "$(cat "$prefix/run/slurmctld.pid")" 2>/dev/null; then
  die "a slurmctld from this prefix is still running; run tools/slurm/down.sh first (SPMD_SLURM_PREFIX=$prefix)"
fi

mkdir -p "$prefix"/{etc,spool/ctld,spool/d,log,run,tmp}
install -d -m 0755 "$prefix/munge"      # munged insists that its socket folder is a+x
install -d -m 0700 "$prefix/munge-etc"  # ... and that its key is private and owned by its user
[ -f "$prefix/munge-etc/munge.key" ] || mungekey --create --keyfile="$prefix/munge-etc/munge.key"
munged --socket="$socket" --key-file="$prefix/munge-etc/munge.key" \
       --pid-file="$prefix/munge/munged.pid" --log-file="$prefix/log/munged.log" \
       --seed-file="$prefix/munge-etc/munged.seed"
munge -S "$socket" -n | unmunge -S "$socket" >/dev/null || die "munge round trip failed; see $prefix/log/munged.log"

# Why the less obvious settings:
#   MpiDefault=pmix          plain srun works with Debian's Open MPI (it lacks Slurm PMI-2)
#   EnforcePartLimits=ALL    an impossible job is rejected at submission, not left pending
#                            forever (which would hang `sbatch --wait`)
#   MinJobAge=4              `sbatch --wait` polls every 2 s instead of backing off to 32 s
#   SlurmdParameters=config_overrides with CPUs=$cpus: advertise more CPUs than the runner has
#   TmpFS                    the PMIx plugin's scratch folders stay under the prefix
#   ProctrackType/TaskPlugin no cgroups needed (containers often have none writable)
#   NodeAddr=127.0.0.1       independent of how the runner's host name resolves
# Multi-node: the nodes share the prefix, so each slurmd's spool folder (where the steps'
# PMIx sockets go), pid file, log and TmpFS (the PMIx clients' folders) are per node (%n).
node_list=$node ctld_host=$node
d_spool=$prefix/spool/d d_pid=$prefix/run/slurmd.pid d_log=$prefix/log/slurmd.log tmpfs=$prefix/tmp
node_lines="NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus Boards=1 SocketsPerBoard=1 CoresPerSocket=$cpus ThreadsPerCore=1 State=UNKNOWN"
if [ -n "$cluster" ]; then
  node_list=${node_names[*]} ctld_host="${node_names[0]}(${node_addrs[0]})"
  d_spool=$prefix/spool/d/%n d_pid=$prefix/run/slurmd.%n.pid d_log=$prefix/log/slurmd.%n.log tmpfs=$prefix/tmp/%n
  node_lines=""
  for i in "${!node_names[@]}"; do
    mkdir -p "$prefix/spool/d/${node_names[$i]}" "$prefix/tmp/${node_names[$i]}"
    [ -z "$node_lines" ] || node_lines+=$'\n'
    node_lines+="NodeName=${node_names[$i]} NodeAddr=${node_addrs[$i]} CPUs=$cpus Boards=1 SocketsPerBoard=1 CoresPerSocket=$cpus ThreadsPerCore=1 State=UNKNOWN"
  done
fi
if [ -n "$cluster" ]; then
  # `ip netns exec` (in on.sh) mounts a fresh /sys without the cgroup hierarchies, where
  # slurmd's cgroup autodetection fails ("No filesystem mounted on /sys/fs/cgroup"). Naming
  # the plugin skips it; with proctrack/linuxproc and task/none nothing uses cgroups.
  echo "CgroupPlugin=cgroup/v1" >"$prefix/etc/cgroup.conf"
fi
cat >"$prefix/etc/slurm.conf" <<EOF
ClusterName=spmdci
SlurmctldHost=$ctld_host
SlurmctldPort=$ctld_port
SlurmdPort=$d_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$socket
StateSaveLocation=$prefix/spool/ctld
SlurmdSpoolDir=$d_spool
SlurmctldPidFile=$prefix/run/slurmctld.pid
SlurmdPidFile=$d_pid
SlurmctldLogFile=$prefix/log/slurmctld.log
SlurmdLogFile=$d_log
TmpFS=$tmpfs
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MpiDefault=pmix
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MailProg=/bin/true
ReturnToService=2
EnforcePartLimits=ALL
SlurmdParameters=config_overrides
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=4
KillWait=5
Waittime=0
$node_lines
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$prefix/etc/slurm.conf
if [ -z "$cluster" ]; then
  slurmctld
  slurmd -N "$node"
  sinfo=(sinfo)
else
  # Each daemon starts inside its node (network, host name, /etc/hosts) and stays there
  # when it forks into the background; so do the jobs it starts.
  on_node "${node_names[0]}" slurmctld
  for name in "${node_names[@]}"; do on_node "$name" slurmd -N "$name"; done
  # The client wrappers: the real command (not a wrapper of another prefix found in PATH)
  # on a node. SPMD_SLURM_NODE picks the node (default the first, where slurmctld runs).
  mkdir -p "$prefix/bin"
  for tool in sbatch srun salloc squeue sinfo scontrol scancel; do
    real=""
    while read -r candidate; do
      grep -q spmd-slurm-client-wrapper "$candidate" || { real=$candidate; break; }
    done < <(type -aP "$tool")
    [ -n "$real" ] || continue
    cat >"$prefix/bin/$tool" <<EOF
#!/bin/sh
# spmd-slurm-client-wrapper (tools/slurm/up.sh): $tool on a node of the emulated cluster $cluster
export SLURM_CONF='$SLURM_CONF' SPMD_CLUSTER_ROOT='$SPMD_CLUSTER_ROOT'
exec '$cluster_tools/on.sh' '$cluster' "\${SPMD_SLURM_NODE:-${node_names[0]}}" '$real' "\$@"
EOF
    chmod 0755 "$prefix/bin/$tool"
  done
  sinfo=("$prefix/bin/sinfo")
fi

idle=0
for _ in $(seq 1 100); do
  idle=$("${sinfo[@]}" -h -N -o %T 2>/dev/null | grep -cx idle || true)
  [ "$idle" -eq "${#node_names[@]}" ] && break
  sleep 0.2
done
if [ "$idle" -ne "${#node_names[@]}" ]; then
  log "$idle of ${#node_names[@]} node(s) idle after 20 s, states: $("${sinfo[@]}" -h -N -o '%N=%T' 2>/dev/null | tr '\n' ' '); logs follow"
  tail -n 30 "$prefix"/log/*.log >&2 || true
  exit 1
fi
if [ -z "$cluster" ]; then
  log "up: node $node idle with $cpus CPUs (ports $ctld_port/$d_port) munged=$(cat "$prefix/munge/munged.pid") slurmctld=$(cat "$prefix/run/slurmctld.pid") slurmd=$(cat "$prefix/run/slurmd.pid")"
  echo "export SLURM_CONF=$SLURM_CONF SPMD_SLURM_PREFIX=$prefix"
else
  slurmds=""
  for name in "${node_names[@]}"; do slurmds+=" $name:$(cat "$prefix/run/slurmd.$name.pid")"; done
  log "up: cluster $cluster, nodes $node_list idle with $cpus CPUs each (ports $ctld_port/$d_port) munged=$(cat "$prefix/munge/munged.pid") slurmctld=${node_names[0]}:$(cat "$prefix/run/slurmctld.pid") slurmd=${slurmds# }; clients in $prefix/bin"
  echo "export SLURM_CONF=$SLURM_CONF SPMD_SLURM_PREFIX=$prefix SPMD_SLURM_CLUSTER=$cluster PATH=\"$prefix/bin:\$PATH\""
fi
