#!/usr/bin/env bash
# The job scripts in jobs/slurm/ against a real one-node Slurm brought up from nothing under
# a temporary prefix (tools/slurm/up.sh) and always stopped at the end (tools/slurm/down.sh),
# also when a check fails. Jobs are submitted with `timeout 120 sbatch --wait` from a scratch
# folder and run side by side (the node advertises 8 CPUs here).
#   - info with LAUNCH=srun and LAUNCH=mpirun: 2 ranks in the table, info.json, config copy
#   - devices follow --cpus-per-task
#   - bad launches end quickly with a clear message and a non-zero exit: missing config,
#     missing binary, unknown LAUNCH, an option spmd refuses
#   - eval / logreg / ensemble / scaling jobs when the workload is implemented (else SKIP)
#   - the ensemble job's requeue path (SIGTERM to the batch shell as --signal=B:TERM sends
#     it, checkpoint, scontrol requeue, --resume): with a stand-in binary for both
#     launchers, and with the real spmd ensemble under srun
# Skips (exit 0, with a SKIP line) when Slurm or munge is not installed or not root.
# The same job scripts on two emulated nodes: tests/cli/slurm_multinode.sh.
source "$(dirname "$0")/../support/cli_lib.sh"
source "$(dirname "$0")/../support/slurm_lib.sh" # ROOT, slurm_up, start_job, await_job, ...
slurm_require cli.slurm

PREFIX=$WORK/slurm
mkdir -p "$WORK/logs" "$WORK/runs" "$WORK/data"
# Replaces cli_lib's trap: this script's background submissions and pollers end first, then
# the daemons (cancelling what is left), then their folder goes.
trap 'kill $(jobs -p) 2>/dev/null; stop_slurm "$PREFIX"; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

# 8 CPUs advertised (the default is 4): the short jobs below then run side by side.
slurm_up "$PREFIX" 8 || { finish; exit 1; }
run sinfo 0 10 sinfo -h -o '%T %c'
expect_in "node idle with 8 CPUs" '^idle 8$'

# --- info: both launchers, devices from the allocation, bad launches ---------------------
start_job info-srun LAUNCH=srun info.sbatch
start_job info-mpirun LAUNCH=mpirun info.sbatch
start_job info-cpus2 LAUNCH=srun --cpus-per-task=2 info.sbatch
start_job bad-config CONFIG="$WORK/no-such.ini" --ntasks=1 info.sbatch
start_job bad-binary SPMD="$WORK/no-such-spmd" --ntasks=1 info.sbatch
start_job bad-launcher LAUNCH=aprun --ntasks=1 info.sbatch
# The installed job script with the module's environment (SPMD_KIT_ROOT, PATH), submitted
# from a folder that is no checkout: the script, spmd and inputs/info.ini from the prefix.
INSTALLED=$WORK/prefix
run install 0 60 cmake --install "$(dirname "$SPMD")" --prefix "$INSTALLED"
start_job info-installed SPMD= SPMD_ROOT= SPMD_KIT_ROOT="$INSTALLED" PATH="$INSTALLED/bin:$PATH" \
  "$INSTALLED/share/spmd-kit/jobs/slurm/info.sbatch"
start_job bad-option LAUNCH=srun info.sbatch --hang-timeout -1

# --- workloads: submitted now, checked below --------------------------------------------
FASHION=$DATA/fashion
submit_eval() {
  start_job eval-srun LAUNCH=srun CONFIG=inputs/eval-small.ini eval.sbatch --data "$FASHION/test.h5"
  start_job eval-mpirun LAUNCH=mpirun CONFIG=inputs/eval-small.ini eval.sbatch --data "$FASHION/test.h5"
}
check_eval() {
  for launch in srun mpirun; do
    await_job eval-$launch 0 || continue
    expect_in "eval-$launch: every example once" 'every example counted exactly once'
    json_check "eval-${launch}_json" "$RUN_DIR/eval.json" "
assert (j['correct'], j['total'], j['ranks'], j['devices_per_rank']) == (1000, 10000, 2, 2), j
assert j['strategy'] == 'pad' and j['steps'] == 27, j   # 5000 rows per rank / (2 devices x 96)"
  done
}
submit_logreg() {
  # The data file does not exist: the job makes it from its name, on one rank.
  start_job logreg-srun LAUNCH=srun CONFIG=inputs/logreg-small.ini logreg.sbatch \
    --data "$WORK/data/classification-2000x20-c3-i5-s0.h5"
}
check_logreg() {
  await_job logreg-srun 0 || return
  expect_in "logreg: the job made its data" 'make-classification --samples 2000 --features 20 --classes 3 --informative 5 --seed 0'
  json_check logreg_json "$RUN_DIR/logreg.json" "
assert j['ranks'] == 4 and j['status'] in ('converged', 'max_iterations'), j
assert len(j['history']) == j['iterations'] and j['value'] < 1.0986122886681098, j['value']   # ln 3 at W = 0"
  run logreg_csv 0 5 head -n 1 "$RUN_DIR/metrics.csv"
  expect_in "logreg: metrics.csv columns" '^iteration,value,error,stepsize,evaluations,seconds$'
  checks=$((checks + 1))
  if [ -s "$RUN_DIR/weights.h5" ] && [ -f "$RUN_DIR/config.ini" ]; then echo "ok   logreg: weights.h5 and config.ini in the run folder"; else fail "logreg: weights.h5 or config.ini missing in $RUN_DIR"; fi
}
submit_ensemble() {
  start_job ensemble-srun LAUNCH=srun CONFIG=inputs/ensemble-small.ini --cpus-per-task=1 ensemble.sbatch \
    --train "$FASHION/train.h5" --test "$FASHION/test.h5" --epochs 1
}
check_ensemble() {
  await_job ensemble-srun 0 || return
  json_check ensemble_json "$RUN_DIR/ensemble.json" "
assert j['members'] == 2 and j['ranks'] == 2 and len(j['epochs']) == 1, j
assert 0.2 < j['epochs'][0]['test_accuracy'] <= 1, j['epochs']"
  checks=$((checks + 1))
  if [ -s "$RUN_DIR/checkpoint.h5" ]; then echo "ok   ensemble: checkpoint in the run folder"; else fail "ensemble: no checkpoint.h5 in $RUN_DIR"; fi
}
submit_scaling() {
  start_job scaling-srun LAUNCH=srun WORKLOAD=logreg CONFIG=inputs/logreg-small.ini scaling.sbatch --ranks "1 2" \
    --mode strong -- --data "$WORK/data/classification-3000x20-c3-i5-s0.h5"
}
check_scaling() {
  await_job scaling-srun 0 || return
  expect_in "scaling: the report's table" '^\| 2 \| 1 \| 2 \|'
  for f in strong/report.md strong/report.csv strong/speedup.png strong/error_vs_iteration.png; do
    checks=$((checks + 1))
    if [ -s "$RUN_DIR/$f" ]; then echo "ok   scaling: $f"; else fail "scaling: $f missing in $RUN_DIR"; fi
  done
}

enabled=()
for workload in eval logreg ensemble; do
  data_cmd=()
  [ $workload = logreg ] && data_cmd=(data make-classification)
  if implemented $workload && { [ ${#data_cmd[@]} = 0 ] || implemented "${data_cmd[@]}"; }; then
    enabled+=("$workload")
    "submit_$workload"
  else
    echo "SKIP $workload jobs: 'spmd $workload --help' says not implemented"
  fi
done
if [[ " ${enabled[*]} " == *" logreg "* ]]; then
  enabled+=(scaling)
  submit_scaling
fi

# --- ensemble requeue path, with a stand-in for spmd ------------------------------------
# The stand-in behaves as spmd ensemble promises: on SIGTERM (srun) or SIGUSR1 (mpirun
# passes that one on) it writes the checkpoint and exits 0; with --resume it needs the
# checkpoint and writes its summary.
FAKE=$WORK/fake-spmd
cat >"$FAKE" <<'EOF'
#!/bin/bash
rank=${OMPI_COMM_WORLD_RANK:-${SLURM_PROCID:-0}}
ckpt="" json="" resume=0
while [ $# -gt 0 ]; do
  case $1 in --checkpoint) ckpt=$2; shift ;; --json) json=$2; shift ;; --resume) resume=1 ;; esac
  shift
done
if [ $resume = 1 ]; then
  [ -f "$ckpt" ] || { echo "fake: --resume without a checkpoint" >&2; exit 3; }
  [ "$rank" = 0 ] && echo '{"resumed": true}' >"$json"
  echo "fake rank $rank: resumed"
  exit 0
fi
stop() { echo "fake rank $rank: signal, checkpointing"; sleep 1; [ "$rank" = 0 ] && echo ok >"$ckpt"; exit 0; }
trap stop TERM USR1
echo "fake rank $rank: training"
for _ in $(seq 1 600); do sleep 0.1; done
echo "fake rank $rank: never signalled" >&2
exit 4
EOF
chmod +x "$FAKE"
touch "$WORK/fake-train.h5" "$WORK/fake-test.h5"

# wait_for SECONDS COMMAND...: polls COMMAND every 0.2 s.
wait_for() {
  local limit=$1
  shift
  local end=$((SECONDS + limit))
  until "$@"; do
    [ $SECONDS -lt $end ] || return 1
    sleep 0.2
  done
}
job_field() { scontrol show job "$1" 2>/dev/null | grep -o "$2=[^ ]*" | head -n 1 | cut -d= -f2; }
restarted() { [ "$(job_field "$1" Restarts)" = 1 ]; }
# released_and_finished ID LOG: true once the second run (restart 1, seen in the log) has
# ended; while the first one is being requeued the job can briefly show a final state.
# Slurm holds a requeued job for about 2 minutes (Reason=BeginTime); release it, but only
# 2 s after the hold was first seen: slurmd revokes the old run's credential with a
# one-second clock, and a new run started within the same second is killed ("Job
# credential revoked").
HELD_SINCE=""
released_and_finished() {
  local state
  state=$(job_field "$1" JobState)
  if [[ $state =~ ^(COMPLETED|FAILED|CANCELLED|TIMEOUT)$ ]] && grep -qsE "^# job $1 .* restart 1 " "$2"; then
    return 0
  fi
  if [ "$state" = PENDING ] && [ "$(job_field "$1" Reason)" = BeginTime ]; then
    HELD_SINCE=${HELD_SINCE:-$SECONDS}
    if [ $((SECONDS - HELD_SINCE)) -ge 2 ]; then scontrol update JobId="$1" StartTime=now; fi
  fi
  return 1
}

# requeue_case NAME LAUNCH BINARY READY_PATTERN JSON_ASSERTIONS ARGS...: submits
# ensemble.sbatch, waits until the job log matches READY_PATTERN, sends SIGTERM to the batch
# shell only (what --signal=B:TERM@120 does; its pid is the batch step's task 0), and follows
# the job through checkpoint, requeue and the resumed run.
requeue_case() {
  local name=$1 launch=$2 binary=$3 ready=$4 assertions=$5 id bpid
  shift 5
  id=$(cd "$WORK" && env SPMD="$binary" SPMD_ROOT="$ROOT" SPMD_RUNS_DIR="$WORK/runs" LAUNCH="$launch" \
    CONFIG=inputs/ensemble-small.ini sbatch --parsable --job-name="$name" --output="$WORK/logs/%x-%j.out" \
    --cpus-per-task=1 "$ROOT/jobs/slurm/ensemble.sbatch" "$@")
  local dir=$WORK/runs/$name-$id
  LAST_OUT=$WORK/logs/$name-$id.out
  checks=$((checks + 1))
  # The job may wait in the queue behind the scaling job (8 CPUs shared by every case): its
  # 90 s to get going count from the log's first line, not from the submission.
  wait_for 300 test -s "$LAST_OUT" || { fail "$name: job $id never started (state $(job_field "$id" JobState))"; return; }
  wait_for 90 grep -qsE "$ready" "$LAST_OUT" || {
    fail "$name: the step never got going (no /$ready/ within 90 s of the job's start; state $(job_field "$id" JobState))"
    return
  }
  bpid=$(scontrol listpids "$id" | awk '$3 == "batch" && $4 == "0" { print $1 }')
  kill -TERM "$bpid"
  wait_for 60 restarted "$id" || { fail "$name: job $id was not requeued after SIGTERM"; return; }
  if ! wait_for 120 released_and_finished "$id" "$LAST_OUT"; then
    fail "$name: the requeued job $id did not run to its end (state $(job_field "$id" JobState))"
    grep -hE "JobId=${id}[^0-9]|job[ _]?${id}[^0-9]|StepId=${id}\." "$PREFIX"/log/slurm*.log | tail -n 25 | sed 's/^/     | /'
    return
  fi
  local state exit_code
  state=$(job_field "$id" JobState) exit_code=$(job_field "$id" ExitCode)
  if [ "$state" != COMPLETED ] || [ "$exit_code" != 0:0 ]; then
    fail "$name: requeued job ended $state exit $exit_code"
    return
  fi
  echo "ok   $name: SIGTERM -> checkpoint -> requeue -> resumed run completed (job $id)"
  expect_in "$name: forwarded the signal" 'SIGTERM: asking the ranks to write a checkpoint'
  expect_in "$name: requeued itself" 'requeueing job'
  expect_in "$name: second run is restart 1" "^# job $id \($name\) restart 1"
  expect_in "$name: second run passes --resume" 'checkpoint\.h5 --resume'
  json_check "${name}_json" "$dir/ensemble.json" "$assertions"
}
# The cases run in the background beside the other jobs (each in a subshell: its ok/FAIL
# lines are counted when it is collected below).
requeue_bg() { # NAME ARGS...: requeue_case NAME ARGS... in the background, output in $WORK/NAME.case
  (requeue_case "$@") >"$WORK/$1.case" 2>&1 &
  REQUEUE_PIDS+=("$!")
  REQUEUE_NAMES+=("$1")
}
REQUEUE_PIDS=() REQUEUE_NAMES=()
for launch in srun mpirun; do
  requeue_bg "requeue-fake-$launch" "$launch" "$FAKE" 'fake rank 0' "assert j == {'resumed': True}, j" \
    --train "$WORK/fake-train.h5" --test "$WORK/fake-test.h5"
done
# The real program: SIGTERM lands somewhere in the first epoch (or its test pass); the
# resumed run must finish both epochs. srun delivers SIGTERM to the ranks; mpirun forwards
# SIGUSR1, which spmd ensemble treats like SIGTERM.
if [[ " ${enabled[*]} " == *" ensemble "* ]]; then
  for launch in srun mpirun; do
    requeue_bg "requeue-ensemble-$launch" "$launch" "$SPMD" '^# epoch 1 step' "
assert j['members'] == 2 and [e['epoch'] for e in j['epochs']] == [1, 2], j['epochs']
assert j['resumed_from_epoch'] >= 0, j" --train "$FASHION/train.h5" --test "$FASHION/test.h5"
  done
fi

# --- results of the info jobs -----------------------------------------------------------
for launch in srun mpirun; do
  await_job info-$launch 0 || continue
  expect_in "info-$launch: table lists 2 ranks" 'ranks 2 +devices/rank 1'
  expect_in "info-$launch: rank 1 in the table" '^#\s+1\s+\S+\s+1\s+1 x cpu'
  expect_in "info-$launch: launched with $launch through spmdrun" "^# [0-9:]+ .*/spmdrun --launcher $launch -np 2 "
  json_check "info-${launch}_json" "$RUN_DIR/info.json" "assert j['ranks'] == 2 and len(j['rank_table']) == 2, j"
  checks=$((checks + 1))
  if cmp -s "$RUN_DIR/config.ini" "$ROOT/inputs/info.ini" && [ -L "$RUN_DIR/job.log" ]; then
    echo "ok   info-$launch: run folder has config.ini and job.log"
  else
    fail "info-$launch: config.ini copy or job.log link missing in $RUN_DIR"
  fi
done
if await_job info-installed 0; then
  expect_in "installed job script: the prefix's spmd" "^# launch srun, binary $INSTALLED/bin/spmd,"
  expect_in "installed job script: the prefix's spmdrun" "^# [0-9:]+ $INSTALLED/bin/spmdrun --launcher srun -np 2 "
  expect_in "installed job script: the prefix's inputs/info.ini" "^# config $INSTALLED/share/spmd-kit/inputs/info.ini\$"
  expect_in "installed job script: 2 ranks" 'ranks 2 +devices/rank 1'
fi
await_job info-cpus2 0 && expect_in "--cpus-per-task=2 gives 2 devices per rank" 'ranks 2 +devices/rank 2'
await_job bad-config nonzero && expect_in "missing config named" "input config '$WORK/no-such.ini' not found"
await_job bad-binary nonzero && expect_in "missing binary named" "spmd binary '$WORK/no-such-spmd' is missing"
await_job bad-launcher nonzero && expect_in "unknown launcher named" 'LAUNCH=aprun: use LAUNCH=srun or LAUNCH=mpirun'
await_job bad-option nonzero && expect_in "spmd's own error reaches the log" "hang-timeout"

for workload in "${enabled[@]}"; do "check_$workload"; done

for i in "${!REQUEUE_PIDS[@]}"; do
  wait "${REQUEUE_PIDS[$i]}"
  cat "$WORK/${REQUEUE_NAMES[$i]}.case"
  checks=$((checks + $(grep -cE '^(ok  |FAIL)' "$WORK/${REQUEUE_NAMES[$i]}.case")))
  failures=$((failures + $(grep -c '^FAIL' "$WORK/${REQUEUE_NAMES[$i]}.case")))
done

run slurm_queue_empty 0 10 squeue -h
checks=$((checks + 1))
if [ -s "$LAST_OUT" ]; then fail "jobs left in the queue"; else echo "ok   no job left in the queue"; fi
finish
