#!/usr/bin/env bash
# Stops the one-node Slurm that tools/slurm/up.sh started under a prefix: slurmd, then
# slurmctld, then munged, each by its pid file (never by name: another instance may be
# running beside this one). Safe to call twice, or when up.sh failed half-way.
#
#   tools/slurm/down.sh [PREFIX]     # default: $SPMD_SLURM_PREFIX
#   SPMD_SLURM_REMOVE=1 tools/slurm/down.sh   # also delete the prefix afterwards
set -uo pipefail
prefix=${1:-${SPMD_SLURM_PREFIX:-}}
[ -n "$prefix" ] || { echo "slurm-down: error: give the prefix as argument or in SPMD_SLURM_PREFIX" >&2; exit 1; }
[ -d "$prefix" ] || { echo "slurm-down: nothing to stop ($prefix does not exist)" >&2; exit 0; }

stopped_all=1
# Jobs first: their slurmstepd and tasks would outlive slurmd (e.g. when a test fails mid-job).
conf=$prefix/etc/slurm.conf
if [ -f "$prefix/run/slurmctld.pid" ] && kill -0 "$(cat "$prefix/run/slurmctld.pid")" 2>/dev/null; then
  if [ -n "$(SLURM_CONF=$conf squeue -h -o %i 2>/dev/null)" ]; then
    SLURM_CONF=$conf scancel --user="$(id -un)" 2>/dev/null
    for _ in $(seq 1 100); do
      [ -z "$(SLURM_CONF=$conf squeue -h -t running,completing -o %i 2>/dev/null)" ] && break
      sleep 0.1
    done
    echo "slurm-down: cancelled the remaining jobs" >&2
  fi
fi
for pidfile in "$prefix/run/slurmd.pid" "$prefix/run/slurmctld.pid" "$prefix/munge/munged.pid"; do
  [ -f "$pidfile" ] || continue
  pid=$(cat "$pidfile")
  name=$(basename "$pidfile" .pid)
  # A stale pid file may name an unrelated process by now: check that it is ours.
  if ! kill -0 "$pid" 2>/dev/null || [ "$(cat /proc/"$pid"/comm 2>/dev/null)" != "$name" ]; then
    rm -f "$pidfile"
    continue
  fi
  kill "$pid"
  # munged needs about a second to write its seed file; slurmctld saves its state.
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    echo "slurm-down: $name ($pid) ignored SIGTERM for 10 s; sending SIGKILL" >&2
    kill -9 "$pid" 2>/dev/null
    sleep 0.2
    kill -0 "$pid" 2>/dev/null && stopped_all=0
  fi
  rm -f "$pidfile"
  echo "slurm-down: stopped $name ($pid)" >&2
done

if [ "${SPMD_SLURM_REMOVE:-0}" = 1 ] && [ $stopped_all = 1 ]; then
  rm -rf "$prefix"
fi
[ $stopped_all = 1 ]
