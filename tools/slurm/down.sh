#!/usr/bin/env bash
# Stops the Slurm that tools/slurm/up.sh started under a prefix: the slurmd (one-node) or
# the slurmd of every node (multi-node: slurmd.<node>.pid), then slurmctld, then munged,
# each by its pid file (never by name: another instance may be running beside this one).
# Safe to call twice, or when up.sh failed half-way, or after the emulated cluster is gone
# (tools/cluster/down.sh has then ended the daemons on its nodes; munged is left to stop).
#
#   tools/slurm/down.sh [PREFIX]     # default: $SPMD_SLURM_PREFIX
#   SPMD_SLURM_REMOVE=1 tools/slurm/down.sh   # also delete the prefix afterwards
set -uo pipefail
prefix=${1:-${SPMD_SLURM_PREFIX:-}}
[ -n "$prefix" ] || { echo "slurm-down: error: give the prefix as argument or in SPMD_SLURM_PREFIX" >&2; exit 1; }
[ -d "$prefix" ] || { echo "slurm-down: nothing to stop ($prefix does not exist)" >&2; exit 0; }

stopped_all=1
# Jobs first: their slurmstepd and tasks would outlive slurmd (e.g. when a test fails mid-job).
# Multi-node: the clients run on a node through up.sh's wrappers in $prefix/bin.
conf=$prefix/etc/slurm.conf
squeue=squeue scancel=scancel
if [ -x "$prefix/bin/squeue" ] && [ -x "$prefix/bin/scancel" ]; then squeue=$prefix/bin/squeue scancel=$prefix/bin/scancel; fi
if [ -f "$prefix/run/slurmctld.pid" ] && kill -0 "$(cat "$prefix/run/slurmctld.pid")" 2>/dev/null; then
  if [ -n "$(SLURM_CONF=$conf $squeue -h -o %i 2>/dev/null)" ]; then
    SLURM_CONF=$conf $scancel --user="$(id -un)" 2>/dev/null
    for _ in $(seq 1 100); do
      [ -z "$(SLURM_CONF=$conf $squeue -h -t running,completing -o %i 2>/dev/null)" ] && break
      sleep 0.1
    done
    echo "slurm-down: cancelled the remaining jobs" >&2
  fi
fi
for pidfile in "$prefix"/run/slurmd.pid "$prefix"/run/slurmd.*.pid "$prefix/run/slurmctld.pid" "$prefix/munge/munged.pid"; do
  [ -f "$pidfile" ] || continue
  pid=$(cat "$pidfile")
  label=$(basename "$pidfile" .pid) # slurmd, slurmd.node2, slurmctld, munged
  name=${label%%.*}                  # the process name
  # A stale pid file may name an unrelated process by now: check that it is ours.
  if ! kill -0 "$pid" 2>/dev/null || [ "$(cat /proc/"$pid"/comm 2>/dev/null)" != "$name" ]; then
    rm -f "$pidfile"
    continue
  fi
  kill "$pid"
  # munged needs about a second to write its seed file; slurmctld saves its state.
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    echo "slurm-down: $label ($pid) ignored SIGTERM for 10 s; sending SIGKILL" >&2
    kill -9 "$pid" 2>/dev/null
    sleep 0.2
    kill -0 "$pid" 2>/dev/null && stopped_all=0
  fi
  rm -f "$pidfile"
  echo "slurm-down: stopped $label ($pid)" >&2
done

if [ "${SPMD_SLURM_REMOVE:-0}" = 1 ] && [ $stopped_all = 1 ]; then
  rm -rf "$prefix"
fi
[ $stopped_all = 1 ]
