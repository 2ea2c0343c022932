# Jobs whose ranks each end by themselves, and the check that every one of them failed
# (sourced after cli_lib.sh, by the scripts that test refusals: bad_inputs.sh,
# dataset_keys.sh). A rank left waiting in a collective by another that failed alone shows
# up as a timeout instead of being killed by mpirun.

# Open MPI tears a job down with SIGCONT, then SIGTERM odls_base_sigkill_timeout seconds
# later, then SIGKILL as long again: a job a rank ends with MPI_Abort takes twice that to
# end. 3 s keeps such a job within the 20 s every refused job must end in.
export OMPI_MCA_odls_base_sigkill_timeout=3

# Records the rank's own exit status; the job is launched with orte_abort_on_non_zero_status
# 0 so that mpirun leaves the other ranks to end by themselves.
cat >"$WORK/rank_rc.sh" <<'SH'
#!/usr/bin/env bash
dir=$1; shift
"$@"; rc=$?
echo $rc >"$dir/rank${OMPI_COMM_WORLD_RANK:-x}"
exit $rc
SH

# job RCDIR NP CMD...: CMD on NP ranks, each left to end by itself (mpirun's
# orte_abort_on_non_zero_status 0: a failing rank does not get the others killed), all
# within 20 s. Returns the largest exit status of the ranks (mpirun's own when none wrote
# one, 124 on a timeout). NO_DAC=1 runs it without the capabilities that let root ignore
# file permissions.
job() {
  local dir=$1 np=$2 rc r worst=0 f; shift 2
  local prefix=()
  [ "${NO_DAC:-0}" = 1 ] && prefix=(capsh --drop=cap_dac_override,cap_dac_read_search -- -c '"$@"' _)
  timeout -k 5 20 "${prefix[@]}" mpirun -np "$np" --oversubscribe --mca orte_abort_on_non_zero_status 0 \
    bash "$WORK/rank_rc.sh" "$dir" "$@"
  rc=$?
  echo $rc >"$dir/mpirun"
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then return $rc; fi
  for f in "$dir"/rank*; do
    [ -f "$f" ] || continue
    r=$(cat "$f"); [ "$r" -gt "$worst" ] && worst=$r
  done
  [ $worst -eq 0 ] && worst=$rc
  return $worst
}

# every_rank_failed NAME NP: after `job "$RC/NAME" NP ...`, every rank exited non-zero (or
# was ended by the job's abort). RC is the caller's folder of per-job status folders.
every_rank_failed() {
  local name=$1 np=$2 r bad=""
  for ((r = 0; r < np; r++)); do
    local f="$RC/$name/rank$r"
    # No status file: the rank was ended from outside, which mpirun reports as its own
    # failure (MPI_Abort by another rank, or a signal).
    if [ -f "$f" ]; then [ "$(cat "$f")" != 0 ] || bad+=" rank $r exited 0;"
    elif [ "$(cat "$RC/$name/mpirun" 2>/dev/null)" = 0 ]; then bad+=" rank $r did not exit;"; fi
  done
  checks=$((checks + 1))
  if [ -z "$bad" ]; then echo "ok   $name: every rank exited non-zero"; else fail "$name:$bad"; fi
}

# no_outputs NAME: $OUT, the folder every refused command writes into, is empty.
no_outputs() {
  checks=$((checks + 1))
  local left; left=$(ls -A "$OUT")
  if [ -z "$left" ]; then echo "ok   $1: no output file"; else fail "$1: left output files: $left"; fi
}

# refuse NAME NP PATTERN CMD...: CMD fails on every one of NP ranks within 20 s (job), its
# output matches PATTERN (grep -E: the culprit named), and no file appears in $OUT.
refuse() {
  local name=$1 np=$2 pattern=$3; shift 3
  rm -rf "$OUT" "$RC/$name"; mkdir -p "$OUT" "$RC/$name"
  run "$name" nonzero 30 job "$RC/$name" "$np" "$@" || return 0
  expect_in "$name: names the culprit" "$pattern"
  every_rank_failed "$name" "$np"
  no_outputs "$name"
}
