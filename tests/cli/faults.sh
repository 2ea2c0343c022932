#!/usr/bin/env bash
# Faults (issue 7): a rank killed with SIGKILL mid-run (eval, logreg, ensemble) ends the
# job within 30 s with a non-zero exit and no --json under its final name; a rank stuck in
# a step (--simulate-stall) is reported by the watchdog, naming the step and the missing
# rank; the previous good checkpoint survives a crash of the next write (the writer killed
# by SIGXFSZ halfway through the file) and a kill mid-epoch, and resuming from it ends
# bitwise equal to an uninterrupted run; Ctrl-C on mpirun checkpoints and says how to
# resume; the same command twice gives bitwise identical results.
source "$(dirname "$0")/../support/cli_lib.sh"
# Open MPI ends a job (a dead rank, MPI_Abort, Ctrl-C on mpirun) with SIGCONT, then SIGTERM
# odls_base_sigkill_timeout seconds later, then SIGKILL as long again. 3 s: the ranks get
# 3 s to checkpoint after SIGTERM, and a broken job still ends in about 6 s.
export OMPI_MCA_odls_base_sigkill_timeout=3
TRAIN=$DATA/fashion/train.h5
TEST=$DATA/fashion/test.h5
py() { /usr/bin/python3 -c "$1"; }
faults=0

# Inputs: the JAXopt example's logreg problem size (20000 x 784, 10 classes) and a CNN checkpoint.
"$SPMD" data make-classification --samples 20000 --features 784 --informative 50 --classes 10 --out "$WORK/big.h5" \
  >"$WORK/big.out" 2>&1 || { cat "$WORK/big.out"; echo "FAIL make-classification"; exit 1; }
"$SPMD" ensemble --train "$TRAIN" --test "$TEST" --train-limit 320 --test-limit 100 --epochs 1 --checkpoint "$WORK/cnn.h5" \
  >"$WORK/cnn.out" 2>&1 || { cat "$WORK/cnn.out"; echo "FAIL training the CNN checkpoint"; exit 1; }

# pid_of_rank MPIRUN_PID RANK: the pid of that rank among mpirun's children (0 if none yet).
pid_of_rank() {
  local p
  for p in $(pgrep -P "$1"); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2"; then echo "$p"; return; fi
  done
  echo 0
}

# wait_for NAME REGEX: until the job's output matches REGEX (60 s at most) while it runs.
wait_for() {
  local i
  for i in $(seq 1 600); do
    grep -qE -- "$2" "$WORK/$1.out" 2>/dev/null && kill -0 "$JOB" 2>/dev/null && return 0
    kill -0 "$JOB" 2>/dev/null || break
    sleep 0.1
  done
  fail "$1: the job never reached /$2/ while running"
  stop_job
  return 1
}
# end_within NAME SECONDS: waits for the job; fails (and kills it) if it runs longer.
# Sets JOB_RC and JOB_SECONDS.
end_within() {
  local name=$1 limit=$2 start=$(date +%s.%N)
  while kill -0 "$JOB" 2>/dev/null; do
    if awk -v s="$(echo "$(date +%s.%N) - $start" | bc)" -v l="$limit" 'BEGIN { exit !(s > l) }'; then
      stop_job
      JOB_RC=124
      fail "$name: the job was still running ${limit}s after the fault (a hang)"
      return 1
    fi
    sleep 0.1
  done
  wait "$JOB"; JOB_RC=$?
  JOB_SECONDS=$(echo "$(date +%s.%N) - $start" | bc)
  checks=$((checks + 1))
  if [ "$JOB_RC" -ne 0 ]; then echo "ok   $name: ended ${JOB_SECONDS}s after the fault, rc=$JOB_RC"
  else fail "$name: exited 0 after the fault"; return 1; fi
}
stop_job() {  # the job we started, and its ranks
  local p
  for p in $(pgrep -P "$JOB"); do kill -KILL "$p" 2>/dev/null; done
  kill -KILL "$JOB" 2>/dev/null
  wait "$JOB" 2>/dev/null
}
absent() {  # absent NAME FILE: no output under its final name
  checks=$((checks + 1))
  if [ -e "$2" ]; then fail "$1: $2 exists after the failure"; else echo "ok   $1: no $(basename "$2")"; fi
}

# kill_mid_run NAME RANK READY_REGEX NP CMD...: SIGKILL rank RANK once the output matches
# READY_REGEX; the job must end within 30 s, non-zero.
kill_mid_run() {
  local name=$1 rank=$2 ready=$3 np=$4 victim; shift 4
  faults=$((faults + 1))
  start_job "$name" mpirun -np "$np" --oversubscribe "$@"
  wait_for "$name" "$ready" || return 1
  victim=$(pid_of_rank "$JOB" "$rank")
  [ "$victim" != 0 ] || { fail "$name: rank $rank not found"; stop_job; return 1; }
  kill -KILL "$victim"
  end_within "$name" 30
}

# --- SIGKILL mid-run ---
kill_mid_run sigkill_eval 1 '^# data ' 3 "$SPMD" eval --data "$TRAIN" --model cnn --weights "$WORK/cnn.h5" \
  --strategy infinite-pad --per-device-batch 64 --json "$WORK/k_eval.json"
absent sigkill_eval "$WORK/k_eval.json"
kill_mid_run sigkill_logreg 1 '^ +10 +[0-9.]+ ' 3 "$SPMD" logreg --data "$WORK/big.h5" --stepsize 0.001 --maxiter 100000 \
  --tol 0 --json "$WORK/k_logreg.json" --weights-out "$WORK/k_w.h5"
absent sigkill_logreg "$WORK/k_logreg.json"
absent sigkill_logreg "$WORK/k_w.h5"
kill_mid_run sigkill_ensemble 1 'epoch 1 step 10/' 2 "$SPMD" ensemble --train "$TRAIN" --test "$TEST" --train-limit 6400 \
  --test-limit 200 --progress-every 5 --json "$WORK/k_ens.json"
absent sigkill_ensemble "$WORK/k_ens.json"
kill_mid_run sigkill_ensemble_rank0 0 'epoch 1 step 10/' 3 "$SPMD" ensemble --train "$TRAIN" --test "$TEST" --train-limit 6400 \
  --test-limit 200 --progress-every 5 --json "$WORK/k_ens0.json"
absent sigkill_ensemble_rank0 "$WORK/k_ens0.json"

# --- A rank stuck inside a step: the watchdog names the step and the missing rank ---
stall() {  # stall NAME NP PHASE CMD...: rank 1 sleeps in PHASE
  local name=$1 np=$2 phase=$3; shift 3
  faults=$((faults + 1))
  run "$name" nonzero 30 mpi "$np" "$@" --hang-timeout 3 --simulate-stall "1:$phase" || return
  expect_in "$name: hang reported" 'hang detected: waited 3 s'
  expect_in "$name: names the missing rank and its step" "did not arrive: rank 1 on [^ ]+ \(at '$phase \(simulated stall\)'"
  expect_in "$name: names the step of the waiting ranks" "during '[^']+'"
  awk -v s="$LAST_SECONDS" 'BEGIN { exit !(s < 20) }' || fail "$name: took ${LAST_SECONDS}s to end"
}
stall stall_eval 3 'eval step 3' "$SPMD" eval --data "$TEST" --per-device-batch 100 --json "$WORK/s_eval.json"
absent stall_eval "$WORK/s_eval.json"
stall stall_logreg 3 'logreg iteration 5' "$SPMD" logreg --data "$DATA/logreg-small.h5" --json "$WORK/s_logreg.json"
absent stall_logreg "$WORK/s_logreg.json"
stall stall_ensemble 2 'ensemble epoch 1 step 4' "$SPMD" ensemble --train "$TRAIN" --test "$TEST" --train-limit 320 \
  --test-limit 100 --json "$WORK/s_ens.json" --checkpoint "$WORK/s_ck.h5"
absent stall_ensemble "$WORK/s_ens.json"
absent stall_ensemble "$WORK/s_ck.h5"
stall stall_ensemble_test_eval 2 'ensemble epoch 1 test evaluation' "$SPMD" ensemble --train "$TRAIN" --test "$TEST" \
  --train-limit 320 --test-limit 100

# --- The previous good checkpoint survives a crash ---
# 650 examples: 20 steps of 32 and a remainder, 2 epochs.
ENS=("$SPMD" ensemble --train "$TRAIN" --test "$TEST" --train-limit 650 --test-limit 200 --epochs 2 --progress-every 1)
same_results() {  # A.json B.json: the same parameters digest and metrics (timings aside)
  py "
import json
a=json.load(open('$1')); b=json.load(open('$2'))
strip=lambda j:[{k:v for k,v in e.items() if k not in ('seconds','images_per_second')} for e in j['epochs']]
assert a['params_digest']==b['params_digest'], (a['params_digest'], b['params_digest'])
assert strip(a)==strip(b), (strip(a), strip(b))"
}
epochs_done() { py "import h5py; print(int(h5py.File('$1','r').attrs['epochs_done']))"; }
run straight 0 120 mpi 2 "${ENS[@]}" --json "$WORK/straight.json"

# Killed in epoch 2: the epoch-1 checkpoint is intact and resumes to the same bits. Rank 1's
# steps take 50 ms longer (the same bits): unslowed, the 16 steps left of epoch 2 and its
# checkpoint could be done before the kill lands on a quiet machine.
kill_mid_run crash_in_epoch2 1 'epoch 2 step 5/' 2 "${ENS[@]}" --checkpoint "$WORK/ck.h5" --json "$WORK/crash.json" \
  --simulate-slow 1:0.05
absent crash_in_epoch2 "$WORK/crash.json"
run crash_in_epoch2_checkpoint_is_epoch1 0 10 py "import h5py; e=int(h5py.File('$WORK/ck.h5','r').attrs['epochs_done']); assert e==1, e"
cp "$WORK/ck.h5" "$WORK/ck_epoch1.h5"
run resume_after_crash 0 120 mpi 2 "${ENS[@]}" --checkpoint "$WORK/ck.h5" --resume --json "$WORK/resumed.json"
expect_in "resume_after_crash: says where it resumed" 'resumed from .* at epoch 2 step 0'
run resume_after_crash_bitwise 0 10 same_results "$WORK/straight.json" "$WORK/resumed.json"

# Crash DURING the next write: rank 0 (the writer) may not write more than 10 MB, so it is
# killed by SIGXFSZ halfway through the 13 MB temporary file of the epoch-2 checkpoint.
faults=$((faults + 1))
cp "$WORK/ck_epoch1.h5" "$WORK/ck2.h5"
limit_rank0() { mpirun -np 2 --oversubscribe bash -c 'if [ "$OMPI_COMM_WORLD_RANK" = 0 ]; then ulimit -f 10000; fi; exec "$@"' _ "$@"; }
run crash_during_write nonzero 60 limit_rank0 "${ENS[@]}" --checkpoint "$WORK/ck2.h5" --resume --json "$WORK/cw.json"
expect_in "crash_during_write: the writer died of SIGXFSZ" 'signal 25|File size limit'
absent crash_during_write "$WORK/cw.json"
run crash_during_write_half_file_exists 0 10 bash -c "ls -a '$WORK' | grep -q '^\.ck2\.h5\.tmp'"
run crash_during_write_checkpoint_is_epoch1 0 10 cmp "$WORK/ck2.h5" "$WORK/ck_epoch1.h5"
run resume_after_write_crash 0 120 mpi 2 "${ENS[@]}" --checkpoint "$WORK/ck2.h5" --resume --json "$WORK/resumed2.json"
run resume_after_write_crash_bitwise 0 10 same_results "$WORK/straight.json" "$WORK/resumed2.json"

# Ctrl-C on mpirun (SIGINT): mpirun sends the ranks SIGCONT, SIGTERM odls_base_sigkill_timeout
# seconds later, SIGKILL as long again (see above). 5 s here (as jobs/local/common.sh): the
# signal reaches the ranks 5 s after Ctrl-C, and they get 5 s to checkpoint. They must stop
# at the next step boundary with a checkpoint, say how to resume, mark --json interrupted,
# and the resumed run must pick up inside the epoch. (That a resume from a step boundary is
# bitwise an uninterrupted run: ensemble.sh sigterm_resume_bitwise.) The whole training set
# (1875 steps) so that the signal lands inside the epoch.
faults=$((faults + 1))
LONG=("$SPMD" ensemble --train "$TRAIN" --test "$TEST" --test-limit 200 --epochs 1 --progress-every 10)
OMPI_MCA_odls_base_sigkill_timeout=5 start_job ctrl_c mpirun -np 2 --oversubscribe "${LONG[@]}" --checkpoint "$WORK/ck3.h5" \
  --json "$WORK/int.json"
if wait_for ctrl_c 'epoch 1 step 20/'; then
  kill -INT "$JOB"
  end_within ctrl_c 30
  # (Lacking it while the epoch's results are there: the epoch ended before the signal came.)
  expect_in "ctrl_c: says how to resume" 'stopped by SIGTERM at epoch 1 step [0-9]+ of 1875: checkpoint written to .*ck3\.h5.*--resume'
  run ctrl_c_json_says_interrupted 0 10 py "import json; j=json.load(open('$WORK/int.json')); assert j['interrupted'] is True, j"
  run resume_after_ctrl_c 0 180 mpi 2 "${LONG[@]}" --checkpoint "$WORK/ck3.h5" --resume --json "$WORK/resumed3.json"
  expect_in "resume_after_ctrl_c: resumes inside the epoch" 'resumed from .* at epoch 1 step [1-9]'
  run resume_after_ctrl_c_finished 0 10 py "
import json; j=json.load(open('$WORK/resumed3.json')); assert len(j['epochs'])==1 and not j['interrupted'], j['epochs']"
fi

# --- Reproducibility: the same command twice, bitwise (N not divisible by the ranks) ---
for i in 1 2; do
  run "repeat_eval_$i" 0 120 mpi 3 "$SPMD" eval --data "$TEST" --model cnn --weights "$WORK/cnn.h5" --strategy pad \
    --per-device-batch 500 --json "$WORK/rep_eval_$i.json"
  run "repeat_logreg_$i" 0 120 mpi 3 "$SPMD" logreg --data "$DATA/logreg-small.h5" --maxiter 30 --tol 1e-8 \
    --json "$WORK/rep_logreg_$i.json"
done
run repeat_ensemble 0 120 mpi 2 "${ENS[@]}" --json "$WORK/rep_ens.json"
run repeat_eval_identical 0 10 py "
import json; a,b=[json.load(open('$WORK/rep_eval_%d.json'%i)) for i in (1,2)]
assert (a['correct'],a['total'])==(b['correct'],b['total']) and a['total']==10000, (a['correct'],b['correct'])"
run repeat_logreg_identical 0 10 py "
import json; a,b=[json.load(open('$WORK/rep_logreg_%d.json'%i)) for i in (1,2)]
keep=lambda h:[{k:v for k,v in it.items() if 'second' not in k} for it in h]
assert a['value']==b['value'] and a['error']==b['error'], (a['value'], b['value'])
assert len(a['history'])>5 and keep(a['history'])==keep(b['history'])"
run repeat_ensemble_identical 0 10 same_results "$WORK/straight.json" "$WORK/rep_ens.json"

echo "faults survived: $faults"
finish
