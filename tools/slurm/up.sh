#!/usr/bin/env bash
# Brings up a one-node Slurm (munged + slurmctld + slurmd) on localhost, entirely under a
# prefix: no files in /etc, /run or /var, nothing started through systemd. For CI and for
# trying the job scripts in jobs/slurm/ on a workstation. Run as root (the daemons and the
# jobs run as root; there is no accounting).
#
#   eval "$(tools/slurm/up.sh)"          # prints the exports; progress goes to stderr
#   sbatch --wait jobs/slurm/info.sbatch
#   tools/slurm/down.sh                   # stops the daemons again (uses $SPMD_SLURM_PREFIX)
#
# Environment:
#   SPMD_SLURM_PREFIX  where config, spool, logs, pid files and the munge socket go
#                      (default: a new temporary folder)
#   SPMD_SLURM_CPUS    CPUs the node advertises (default 4, so 4-rank jobs fit on a 2-core
#                      runner; SlurmdParameters=config_overrides lets it exceed the hardware)
#   SPMD_SLURM_PORTS   "CTLD_PORT D_PORT" (default: two free ports, so several instances
#                      can run side by side, e.g. two CI jobs on one machine)
# Stdout: `export SLURM_CONF=... SPMD_SLURM_PREFIX=...`. Exit 1 with the daemon logs when the
# node does not become idle within 20 s.
set -euo pipefail

log() { echo "slurm-up: $*" >&2; }
die() { log "error: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "must run as root (SlurmUser/SlurmdUser are root; munged refuses a key not owned by its user)"
for tool in munged mungekey munge unmunge slurmctld slurmd sinfo; do
  command -v "$tool" >/dev/null || die "$tool not found; install slurm-wlm and munge (tools/setup.sh does)"
done

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
socket=$prefix/munge/munge.socket
# A unix socket path longer than sun_path (108 bytes) fails later with an obscure message.
[ ${#socket} -lt 100 ] || die "prefix too long for the munge socket path ($socket); choose a shorter SPMD_SLURM_PREFIX"

free_port() {
  local port
  for _ in $(seq 1 200); do
    port=$((20000 + RANDOM % 30000))
    [ -z "$(ss -Hltn "sport = :$port" 2>/dev/null)" ] && { echo "$port"; return 0; }
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
cat >"$prefix/etc/slurm.conf" <<EOF
ClusterName=spmdci
SlurmctldHost=$node
SlurmctldPort=$ctld_port
SlurmdPort=$d_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$socket
StateSaveLocation=$prefix/spool/ctld
SlurmdSpoolDir=$prefix/spool/d
SlurmctldPidFile=$prefix/run/slurmctld.pid
SlurmdPidFile=$prefix/run/slurmd.pid
SlurmctldLogFile=$prefix/log/slurmctld.log
SlurmdLogFile=$prefix/log/slurmd.log
TmpFS=$prefix/tmp
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
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus Boards=1 SocketsPerBoard=1 CoresPerSocket=$cpus ThreadsPerCore=1 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$prefix/etc/slurm.conf
slurmctld
slurmd -N "$node"

state=""
for _ in $(seq 1 100); do
  state=$(sinfo -h -n "$node" -o %T 2>/dev/null || true)
  [ "$state" = idle ] && break
  sleep 0.2
done
if [ "$state" != idle ]; then
  log "node state is '${state:-unknown}' after 20 s, not idle; logs follow"
  tail -n 30 "$prefix"/log/*.log >&2 || true
  exit 1
fi
log "up: node $node idle with $cpus CPUs (ports $ctld_port/$d_port) munged=$(cat "$prefix/munge/munged.pid") slurmctld=$(cat "$prefix/run/slurmctld.pid") slurmd=$(cat "$prefix/run/slurmd.pid")"
echo "export SLURM_CONF=$SLURM_CONF SPMD_SLURM_PREFIX=$prefix"
