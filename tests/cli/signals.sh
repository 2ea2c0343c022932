#!/usr/bin/env bash
# Signals (README "Signals"): what SIGTERM, SIGINT and SIGUSR1 do to each workload, sent to
# mpirun (which sends the ranks SIGCONT, then SIGTERM odls_base_sigkill_timeout seconds
# later, then SIGKILL; it forwards SIGUSR1 at once) or to the ranks themselves (srun,
# scancel). Every case: the exit status of every rank, the message, and the files left in
# the output folder (no `.tmp.` file, no `.lock`).
source "$(dirname "$0")/../support/cli_lib.sh"
# 3 s between mpirun's signal and its SIGTERM, and again to its SIGKILL (jobs/local uses 5): the
# time a stopped rank has to finish, finalise MPI and exit by itself.
export OMPI_MCA_odls_base_sigkill_timeout=3 OPENBLAS_NUM_THREADS=1
py() { /usr/bin/python3 -c "$1"; }

# Each rank under a shell that records its exit status in RCDIR/rankR. The signals reach
# the rank itself (Open MPI signals the process group); the shell only outlives it.
cat >"$WORK/rank.sh" <<'SH'
#!/usr/bin/env bash
dir=$1; shift
"$@" & child=$!
trap ':' TERM INT USR1 HUP CONT
while :; do wait $child; rc=$?; kill -0 $child 2>/dev/null || break; done
echo $rc >"$dir/rank${OMPI_COMM_WORLD_RANK:-x}"
# mpirun SIGKILLs the job's other processes as soon as one ends after its SIGTERM: lingering
# lets the other ranks' shells record their status too.
sleep 0.5
exit $rc
SH

# until NAME SECONDS CONDITION...: polls CONDITION every 20 ms while the job runs.
until_true() {
  local name=$1 limit=$2 i; shift 2
  for ((i = 0; i < limit * 50; i++)); do
    "$@" && return 0
    kill -0 "$JOB" 2>/dev/null || break
    sleep 0.02
  done
  fail "$name: never saw '$*' while the job ran"
  return 1
}
has_temp() { ls -A "$1" | grep -q '\.tmp\.'; }
printed() { grep -qE -- "$2" "$WORK/$1.out"; }
# finish_job NAME EXPECTED_RC: the job (mpirun) ends within 30 s with that status.
finish_job() {
  local i
  for ((i = 0; i < 300; i++)); do kill -0 "$JOB" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$JOB" 2>/dev/null && { kill -KILL "$JOB"; fail "$1: still running 30 s after the signal"; }
  wait "$JOB"; local rc=$?
  checks=$((checks + 1))
  if [ "$2" = nonzero ] && [ $rc -ne 0 ] && [ $rc -ne 124 ]; then echo "ok   $1: mpirun rc=$rc"
  elif [ "$2" = "$rc" ]; then echo "ok   $1: mpirun rc=$rc"
  else fail "$1: mpirun rc=$rc, expected $2"; fi
}
# every_rank NAME RCDIR NP RC: each rank recorded RC.
every_rank() {
  local r got bad=""
  for ((r = 0; r < $3; r++)); do
    got=$(cat "$2/rank$r" 2>/dev/null || echo none)
    [ "$got" = "$4" ] || bad+=" rank $r: $got;"
  done
  checks=$((checks + 1))
  if [ -z "$bad" ]; then echo "ok   $1: every rank exited $4"; else fail "$1: expected $4 on every rank:$bad"; fi
}
# folder_holds NAME DIR FILES...: DIR holds exactly FILES (ls -A), dot files included.
folder_holds() {
  local name=$1 dir=$2; shift 2
  local want="" got
  [ $# -gt 0 ] && want=$(printf '%s\n' "$@" | sort | tr '\n' ' ')
  got=$(ls -A "$dir" | sort | tr '\n' ' ')
  checks=$((checks + 1))
  if [ "$got" = "$want" ]; then echo "ok   $name: $dir holds [${want% }]"; else fail "$name: $dir holds [${got% }], expected [${want% }]"; fi
}
ranks_gone() { ! pgrep -f "^$SPMD $1" >/dev/null; }

# rank_pid PATTERN RANK: the pid of that rank's process running PATTERN (one rank signalled:
# a node's own SIGTERM, a guard that kills one PID, a kill by hand).
rank_pid() {
  local p
  for p in $(pgrep -f "^$1"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" && { echo "$p"; return 0; }
  done
  return 1
}

BIG=$WORK/big.h5  # 2M rows: --predictions of 40 classes is 336 MB, written in seconds
run make_big 0 60 "$SPMD" data make-classification --samples 2000000 --features 6 --informative 6 --redundant 0 \
  --classes 40 --clusters-per-class 1 --out "$BIG"
EVAL=("$SPMD" eval --data "$BIG" --model zero --classes 40)
WIDE=$WORK/wide.h5
run make_wide 0 60 "$SPMD" data make-classification --samples 300000 --features 128 --informative 6 --redundant 0 \
  --classes 40 --clusters-per-class 1 --out "$WIDE"

# --- eval: SIGTERM to the ranks (srun, scancel) while --predictions is being written ----
# Each rank removes what it was writing and ends by SIGTERM itself (143). (Under mpirun the
# ranks get the same SIGTERM a second after mpirun did: the same outcome when it lands in
# the write, which lasts half a second here, too short to aim at from outside.)
name=eval_term_ranks_writing
out=$WORK/$name.dir rcs=$WORK/$name.rc
mkdir -p "$out" "$rcs"
start_job "$name" mpirun -np 2 --oversubscribe bash "$WORK/rank.sh" "$rcs" "${EVAL[@]}" --predictions "$out/p.h5" --quiet
if until_true "$name" 60 has_temp "$out"; then
  pkill -TERM -f "^${EVAL[*]} --predictions $out/p.h5"
  finish_job "$name" 143
  every_rank "$name" "$rcs" 2 143
  expect_in "$name: says what it removed" "SIGTERM ended the run outside a step boundary; removed '$out/\.p\.h5\.tmp\.[0-9]+'"
  folder_holds "$name: no temporary left" "$out"
fi

# --- eval: SIGTERM to mpirun, SIGUSR1 (Slurm's --signal warning, forwarded), SIGTERM to rank 1
# alone, during the pass. The pass stops at the next agreement on the blocks read (the same
# step on every rank, whichever ranks were signalled), says how far it got, writes nothing,
# and every rank exits 0 (mpirun itself exits 1 after a SIGTERM sent to it, whatever its ranks
# did). Rows of 128 features: a block is 64 steps of 512 rows, 2 s with the slowed rank, in
# a pass of 293 steps; mpirun passes SIGTERM on 5 s after its own and SIGKILLs 5 s later
# (odls_base_sigkill_timeout): time to reach an agreement, finish and exit.
for how in TERM USR1 TERM@rank1; do
  sig=${how%@*} name=eval_${how/@/_}
  out=$WORK/$name.dir rcs=$WORK/$name.rc
  mkdir -p "$out" "$rcs"
  OMPI_MCA_odls_base_sigkill_timeout=5 start_job "$name" mpirun -np 2 --oversubscribe bash "$WORK/rank.sh" "$rcs" \
    "$SPMD" eval --data "$WIDE" --model zero \
    --classes 40 --predictions "$out/p.h5" --json "$out/e.json" --simulate-slow 1:0.03
  if until_true "$name" 60 printed "$name" '^# data .*strategy pad'; then
    if [ "$how" = "$sig" ]; then kill -$sig "$JOB"; else kill -$sig "$(rank_pid "$SPMD eval --data $WIDE" 1)"; fi
    finish_job "$name" $([ "$how" = TERM ] && echo 1 || echo 0)
    every_rank "$name" "$rcs" 2 0
    expect_in "$name: says how far it got" "^# stopped by SIG$sig at step (64|128|192|256) of 293: [0-9]+ of 300000 rows evaluated; no results, predictions or JSON written"
    expect_not_in "$name: no result table" 'every example counted'
    folder_holds "$name: nothing written" "$out"
  fi
done

# --- logreg: SIGUSR1 to mpirun, SIGTERM to the ranks, SIGUSR1 to rank 1 alone ---------------
# Ends the solve at the current iterate (agreed: one iterate for every rank); the weights and
# the JSON say status stopped; exit 0.
for target in mpirun ranks rank1; do
  name=logreg_stop_$target
  out=$WORK/$name.dir rcs=$WORK/$name.rc
  mkdir -p "$out" "$rcs"
  LOGREG=("$SPMD" logreg --data "$DATA/logreg-small.h5" --maxiter 500 --tol 1e-12 --simulate-slow 1:0.02
          --weights-out "$out/w.h5" --json "$out/l.json")
  start_job "$name" mpirun -np 2 --oversubscribe bash "$WORK/rank.sh" "$rcs" "${LOGREG[@]}"
  if until_true "$name" 60 printed "$name" '^ +3 +[0-9]'; then
    case $target in
      ranks) sig=SIGTERM; pkill -TERM -f "^${LOGREG[*]}" ;;
      rank1) sig=SIGUSR1; kill -USR1 "$(rank_pid "${LOGREG[*]}" 1)" ;;
      *) sig=SIGUSR1; kill -USR1 "$JOB" ;;
    esac
    finish_job "$name" 0
    every_rank "$name" "$rcs" 2 0
    expect_in "$name: says where it stopped" "^# stopped by $sig after iteration [0-9]+ of at most 500: the weights and results are that iterate's"
    expect_in "$name: summary status" '^ +stopped +[0-9]+ '
    run "${name}_json_and_weights" 0 20 py "
import json, h5py
j = json.load(open('$out/l.json'))
assert j['status'] == 'stopped' and j['stopped_by'] == '$sig' and 3 <= j['iterations'] < 500, j
w = h5py.File('$out/w.h5', 'r')
status = w.attrs['status']
assert (status.decode() if isinstance(status, bytes) else status) == 'stopped', status"
    folder_holds "$name: the outputs, no temporary" "$out" l.json w.h5
  fi
done

# --- ensemble: two quick Ctrl-C on mpirun ------------------------------------------------
# mpirun exits at once and tells the ranks nothing (Open MPI ends them with _exit about a
# second later). The kernel's SIGHUP on the launcher's exit stops them at the next step:
# a checkpoint, and no lock file left. The next run resumes inside the epoch.
out=$WORK/ens.dir
mkdir -p "$out"
ENS=("$SPMD" ensemble --train "$DATA/fashion/train.h5" --test "$DATA/fashion/test.h5" --train-limit 6400
     --test-limit 200 --eval-batch 128 --epochs 1 --progress-every 5 --checkpoint "$out/ck.h5")
start_job ens_two_ctrl_c mpirun -np 2 --oversubscribe "${ENS[@]}"
if until_true ens_two_ctrl_c 60 printed ens_two_ctrl_c 'epoch 1 step 10/'; then
  kill -INT "$JOB"; sleep 0.1; kill -INT "$JOB"
  finish_job ens_two_ctrl_c nonzero
  run ens_two_ctrl_c_ranks_end 0 20 bash -c "while pgrep -f '^$SPMD ensemble' >/dev/null; do sleep 0.1; done"
  folder_holds "ens_two_ctrl_c: a checkpoint, no lock or temporary" "$out" ck.h5
  run ens_resume_after_two_ctrl_c 0 120 mpi 2 "${ENS[@]}" --resume
  expect_in "ens_resume_after_two_ctrl_c: resumes inside the epoch" 'resumed from .* at epoch 1 step [1-9]'
  expect_not_in "ens_resume_after_two_ctrl_c: no stale lock" 'stale lock'
  folder_holds "ens_resume_after_two_ctrl_c: no lock left" "$out" ck.h5
fi

# --- A stale lock (its holder killed outright, SIGKILL): taken over, and said -------------
out=$WORK/stale.dir
mkdir -p "$out"
echo "host ghost, pid 4242, since 2026-01-01 00:00:00" >"$out/.ck.h5.lock"
echo "half a checkpoint" >"$out/.ck.h5.tmp.4242"  # what the killed holder was writing
run stale_lock_taken_over 0 120 mpi 2 "$SPMD" ensemble --train "$DATA/fashion/train.h5" --test "$DATA/fashion/test.h5" \
  --train-limit 320 --test-limit 200 --eval-batch 128 --epochs 1 --checkpoint "$out/ck.h5"
expect_in "stale_lock_taken_over: says so at start-up" \
  "^# --checkpoint '$out/ck.h5': taking over a stale lock left by host ghost, pid 4242, since 2026-01-01 00:00:00"
expect_in "stale_lock_taken_over: removes the dead holder's temporary" "removed its unfinished '$out/.ck.h5.tmp.4242'"
folder_holds "stale_lock_taken_over: the checkpoint, no lock" "$out" ck.h5

finish
