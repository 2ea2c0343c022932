#!/usr/bin/env bash
# There: on the lent GPU machine, through the device tool, after tools/device/pack.sh here:
#   run(command="bash tools/device/run.sh [all|tests|sanitize|workloads|bench]", carry=["device-rt"])
# Unpacks device-rt/debs into a private prefix (never into /: it would overwrite the
# machine's own libraries), points the loader and Open MPI at it, and runs:
#   tests      the unit tests (the CUDA ones run on the GPU) and the MPI tests on 1 and 2 ranks;
#   sanitize   compute-sanitizer memcheck and racecheck over the CUDA unit tests;
#   workloads  eval (every strategy) and logreg on --backend cpu and cuda over the same
#              generated data: eval counts must be equal, the logreg objective within 1e-5;
#   bench      bench_gpu_logreg: the objective's time per evaluation against one read of X
#              at the measured device bandwidth.
# Everything goes to $OUT/device.log (what the device tool brings back); the steps' tails
# are printed. Exit status: the number of failed steps. Locally (no GPU) it runs too, as a
# check of the prefix: the CUDA tests then skip.
set -uo pipefail
cd "$(dirname "$0")/../.."
RT=$PWD/device-rt
WHAT=${1:-all}
LOGDIR=${OUT:-$RT/out}
mkdir -p "$LOGDIR"
LOG=$LOGDIR/device.log
: >"$LOG"
PREFIX=${SPMD_RT_PREFIX:-/tmp/spmd-rt}
[ -d "$RT/debs" ] && [ -d "$RT/bin" ] || { echo "run.sh: $RT/{debs,bin} missing: run tools/device/pack.sh here first and carry device-rt" >&2; exit 1; }

unpack() {  # dpkg-deb when the machine has it, else ar + tar
  local deb=$1 tmp
  if command -v dpkg-deb >/dev/null; then dpkg-deb -x "$deb" "$PREFIX"; return; fi
  tmp=$(mktemp -d); (cd "$tmp" && ar x "$deb" && tar -xf data.tar.* -C "$PREFIX"); rm -rf "$tmp"
}
if [ ! -f "$PREFIX/.unpacked" ]; then
  mkdir -p "$PREFIX"
  for deb in "$RT"/debs/*.deb; do unpack "$deb" || { echo "run.sh: cannot unpack $deb" >&2; exit 1; }; done
  # dpkg -x sets up no alternatives: mpirun and mpiexec are orterun's links there.
  for name in mpirun mpiexec; do [ -e "$PREFIX/usr/bin/$name" ] || ln -s orterun "$PREFIX/usr/bin/$name"; done
  touch "$PREFIX/.unpacked"
fi
LIB=$PREFIX/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$LIB:$LIB/openmpi/lib:$LIB/openblas-pthread:$PREFIX/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export OPAL_PREFIX=$PREFIX/usr PATH=$PREFIX/usr/bin:$PATH
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
# No InfiniBand or other fabric here: shared memory and TCP only, without the probing noise.
export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_pml=ob1 OMPI_MCA_mtl=^ofi,psm,psm2
BIN=$(cd "$RT/bin" && pwd)
export LD_LIBRARY_PATH=$BIN:$LD_LIBRARY_PATH  # libspmd.so; spmd finds libspmd_cuda.so beside it
WORK=$(mktemp -d)
failed=0

step() {  # step NAME CMD...: runs CMD, its output into the log, a verdict and a tail here
  local name=$1 rc; shift
  echo "===== $name: $*" >>"$LOG"
  timeout -k 10 900 "$@" >"$WORK/step.out" 2>&1; rc=$?
  cat "$WORK/step.out" >>"$LOG"
  echo "===== $name: rc=$rc" >>"$LOG"
  if [ $rc -eq 0 ]; then echo "ok   $name"; else echo "FAIL $name (rc=$rc)"; failed=$((failed + 1)); fi
  tail -n 6 "$WORK/step.out" | sed 's/^/     | /'
}

gpu=0
nvidia-smi -L >/dev/null 2>&1 && gpu=1
[ $gpu = 1 ] || echo "NOTE no GPU visible: the CUDA steps are skipped (a check of the prefix only)"
step environment bash -c 'nvidia-smi -L; nvcc --version | tail -1; ! ldd '"$BIN"'/spmd | grep "not found"; command -v mpirun; mpirun --version | head -1'
step info mpirun -np 1 "$BIN/spmd" info --backend auto
step no_cuda_in_cpu_run bash -c '! LD_DEBUG=files "'"$BIN"'/spmd" info --backend cpu 2>&1 | grep -E "libcudart|libcublas|libspmd_cuda"' 

if [ "$WHAT" = all ] || [ "$WHAT" = tests ]; then
  step unit_tests "$BIN/spmd_unit_tests" --gtest_brief=1
  step cuda_tests "$BIN/spmd_cuda_tests" --gtest_brief=1
  step mpi_tests_np1 mpirun -np 1 "$BIN/spmd_mpi_tests" --gtest_brief=1
  step mpi_tests_np2 mpirun -np 2 "$BIN/spmd_mpi_tests" --gtest_brief=1
fi
if [ "$WHAT" = all ] || [ "$WHAT" = sanitize ]; then
  if [ $gpu = 1 ] && command -v compute-sanitizer >/dev/null; then
    step memcheck compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/spmd_cuda_tests" --gtest_brief=1
    step racecheck compute-sanitizer --tool racecheck --error-exitcode 9 "$BIN/spmd_cuda_tests" --gtest_brief=1
  else
    echo "SKIP sanitize: no GPU or no compute-sanitizer on PATH"
  fi
fi
if [ "$WHAT" = all ] || [ "$WHAT" = workloads ]; then
  D=$WORK/cls.h5
  step make_data "$BIN/spmd" data make-classification --out "$D" --samples 20000 --features 784 --classes 10 --informative 50 --seed 0
  step logreg_cpu "$BIN/spmd" logreg --data "$D" --maxiter 20 --backend cpu --json "$WORK/lr_cpu.json" --weights-out "$WORK/w.h5"
  [ $gpu = 1 ] && step logreg_cuda "$BIN/spmd" logreg --data "$D" --maxiter 20 --backend cuda --json "$WORK/lr_cuda.json"
  [ $gpu = 1 ] && step logreg_same_objective python3 -c "
import json, sys
a, b = (json.load(open('$WORK/lr_%s.json' % k)) for k in ('cpu', 'cuda'))
fa, fb = a['value'], b['value']
print('final value cpu %.9g cuda %.9g, relative difference %.2e' % (fa, fb, abs(fa - fb) / abs(fa)))
sys.exit(abs(fa - fb) > 1e-5 * abs(fa))"
  for s in keep-remainder drop-remainder pad pad-metrics infinite-pad; do
    backends=cpu
    [ $gpu = 1 ] && backends="cpu cuda"
    for backend in $backends; do
      step "eval_${s}_$backend" "$BIN/spmd" eval --data "$D" --features-key X --labels-key y --model logreg --weights "$WORK/w.h5" \
        --per-device-batch 512 --strategy "$s" --backend "$backend" --json "$WORK/ev_${s}_$backend.json"
    done
    [ $gpu = 1 ] && step "eval_${s}_same_counts" python3 -c "
import json, sys
a, b = (json.load(open('$WORK/ev_${s}_%s.json' % k)) for k in ('cpu', 'cuda'))
print('cpu', a['correct'], a['total'], 'cuda', b['correct'], b['total'])
sys.exit((a['correct'], a['total']) != (b['correct'], b['total']))"
  done
fi
if [ "$WHAT" = all ] || [ "$WHAT" = bench ]; then
  [ $gpu = 1 ] && step bench_gpu_logreg "$BIN/bench_gpu_logreg"
fi
rm -rf "$WORK"
echo "run.sh: $failed step(s) failed; full log: $LOG"
exit $failed
