# shellcheck shell=bash
# Helpers for the tests that submit the job scripts in jobs/slurm/ to a Slurm brought up
# from nothing by tools/slurm/up.sh (sourced after cli_lib.sh): tests/cli/slurm.sh (one node)
# and tests/cli/slurm_multinode.sh (two emulated nodes, tools/cluster/).
ROOT=${SPMD_SOURCE_DIR:?}

# slurm_require TEST: prints a SKIP line and exits 0 when Slurm or munge is not installed or
# when not root (the daemons run as root).
slurm_require() {
  local tool
  for tool in slurmctld slurmd munged mungekey sbatch srun scontrol squeue; do
    if ! command -v "$tool" >/dev/null; then
      echo "SKIP $1: '$tool' is not installed (apt-get install slurm-wlm munge; tools/setup.sh does)"
      exit 0
    fi
  done
  if [ "$(id -u)" -ne 0 ]; then
    echo "SKIP $1: the Slurm daemons run as root; run the tests as root"
    exit 0
  fi
}

# slurm_up PREFIX CPUS [VAR=VALUE...]: tools/slurm/up.sh under PREFIX, each node advertising
# CPUS, with the extra environment given (SPMD_SLURM_CLUSTER=NAME: on an emulated cluster);
# then its exports (SLURM_CONF, and on a cluster PATH with the client wrappers) are taken
# over. Returns 1 when that failed (the failure is counted).
slurm_up() {
  local prefix=$1 cpus=$2
  shift 2
  chmod a+x "$WORK" # munged insists that every folder above its socket is a+x
  run slurm_up 0 60 env SPMD_SLURM_PREFIX="$prefix" SPMD_SLURM_CPUS="$cpus" "$@" "$ROOT/tools/slurm/up.sh" || return 1
  expect_in "up.sh prints the exports" "^export SLURM_CONF=$prefix/etc/slurm.conf"
  eval "$(grep '^export ' "$LAST_OUT")"
  [ "${SLURM_CONF:-}" = "$prefix/etc/slurm.conf" ]
}

# stop_slurm PREFIX: the daemons (cancelling what is left) by their pid files.
stop_slurm() {
  "$ROOT/tools/slurm/down.sh" "$1" 2>&1 | sed 's/^/     /'
}

# start_job NAME [VAR=VALUE...] [SBATCH_OPTION...] SCRIPT.sbatch [ARGS...]: submits from
# $WORK with `sbatch --wait` in the background (job name NAME, log $WORK/logs/NAME-ID.out).
declare -A JOB_PID JOB_T0
start_job() {
  local name=$1 envs=(SPMD="$SPMD" SPMD_ROOT="$ROOT" SPMD_RUNS_DIR="$WORK/runs") opts=()
  shift
  while [[ $1 == [A-Z]*=* ]]; do envs+=("$1"); shift; done
  while [[ $1 != *.sbatch ]]; do opts+=("$1"); shift; done
  local script=$1
  shift
  [[ $script == /* ]] || script=$ROOT/jobs/slurm/$script  # else an installed copy
  mkdir -p "$WORK/logs"
  (cd "$WORK" && exec env "${envs[@]}" timeout 120 sbatch --wait --job-name="$name" \
    --output="$WORK/logs/%x-%j.out" "${opts[@]}" "$script" "$@") >"$WORK/$name.sbatch" 2>&1 &
  JOB_PID[$name]=$!
  JOB_T0[$name]=$(date +%s.%N)
}

# await_job NAME EXPECTED_RC: waits for sbatch; the job's exit code is sbatch's. Sets
# JOB_ID, RUN_DIR, and LAST_OUT (sbatch's messages + the job log) for expect_in.
await_job() {
  local name=$1 want=$2 rc=0
  wait "${JOB_PID[$name]}" || rc=$?
  local seconds
  seconds=$(echo "$(date +%s.%N) - ${JOB_T0[$name]}" | bc)
  JOB_ID=$(sed -n 's/^Submitted batch job //p' "$WORK/$name.sbatch")
  # shellcheck disable=SC2034 # JOB_ID, RUN_DIR: for the caller
  RUN_DIR=$WORK/runs/$name-$JOB_ID
  LAST_OUT=$WORK/$name.out
  cat "$WORK/$name.sbatch" "$WORK/logs/$name-$JOB_ID.out" >"$LAST_OUT" 2>/dev/null
  checks=$((checks + 1))
  if [ "$want" = nonzero ]; then
    if [ $rc -eq 0 ] || [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
      fail "job $name: expected a non-zero exit (not a timeout), got rc=$rc"
      return 1
    fi
  elif [ $rc -ne "$want" ]; then
    fail "job $name (id ${JOB_ID:-none}): expected rc=$want, got rc=$rc"
    return 1
  fi
  echo "ok   job $name (id $JOB_ID, rc=$rc, ${seconds}s from submission)"
}

# json_check NAME FILE PYTHON-ASSERTIONS (j is the parsed file)
json_check() {
  run "$1" 0 10 /usr/bin/python3 -c "
import json; j = json.load(open('$2'))
$3"
}

# implemented COMMAND...: the subcommand exists (its --help does not say "not implemented").
implemented() {
  ! "$SPMD" "$@" --help 2>&1 | grep -q "not implemented"
}
