#!/usr/bin/env bash
# A GPU run's host side, without a GPU: --backend cuda with a stand-in driver (the probe) and
# a stand-in module (tests/support/stand_in_gpu_module.cpp: CPU threads whose models take
# uint8 samples as bytes and decode them, as the GPU's do). On uint8 Fashion-MNIST, with
# float batches refused by the stand-in (the workloads must hand the bytes over):
#  - the start-up table assigns stand-in GPUs by node-local rank;
#  - spmd ensemble (2 ranks x 2 devices: the trainer's byte steps, the test set's byte
#    forward passes) gives the CPU run's epochs and parameters digest, bit for bit;
#  - eval --model cnn of its checkpoint, and spmd logreg then eval --model logreg (byte
#    predictions), on 3 ranks x 2 devices: the CPU run's predictions file byte for byte.
# Skipped visibly where the build has no CUDA module (the registry then loads none).
source "$(dirname "$0")/../support/cli_lib.sh"
STAND_IN=$(dirname "$SPMD")/stand-in-gpu
if [ ! -f "$STAND_IN/libspmd_cuda.so" ]; then
  echo "SKIP stand_in_gpu: no $STAND_IN/libspmd_cuda.so (tests/CMakeLists.txt builds it)"
  exit 0
fi
if "$SPMD" info --backend auto 2>&1 | grep -q 'cuda: not built'; then
  echo "SKIP stand_in_gpu: this build has no CUDA module, so --backend cuda loads none"
  exit 0
fi
DRIVER=$WORK/driver
mkdir -p "$DRIVER"
printf 'int cuInit(unsigned f) { (void)f; return 0; }\nint cuDeviceGetCount(int* n) { *n = 2; return 0; }\n' >"$DRIVER/driver.c"
run driver_build 0 60 cc -shared -fPIC -o "$DRIVER/libcuda.so.1" "$DRIVER/driver.c"
export LD_LIBRARY_PATH="$DRIVER${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" SPMD_MODULE_DIR="$STAND_IN" SPMD_STAND_IN_BYTES_ONLY=1
# NP ranks with the stand-in's environment on each.
on_ranks() { local np=$1; shift; mpirun -np "$np" --oversubscribe -x LD_LIBRARY_PATH -x SPMD_MODULE_DIR \
  -x SPMD_STAND_IN_BYTES_ONLY "$@"; }
TRAIN=$WORK/train.h5 TEST=$WORK/test.h5
run inputs_train 0 60 fashion_subset 640 "$TRAIN"
run inputs_test 0 60 fashion_subset 203 "$TEST"

run info 0 60 on_ranks 2 "$SPMD" info --backend cuda
expect_in "rank 0 holds stand-in GPU 0" '^# +0 .* cuda:0 stand-in'
expect_in "rank 1, the node's second, holds stand-in GPU 1" '^# +1 .* cuda:1 stand-in'

for b in cpu cuda; do
  run "ensemble_$b" 0 300 on_ranks 2 "$SPMD" ensemble --train "$TRAIN" --test "$TEST" --devices 2 --batch-size 32 \
    --epochs 2 --eval-batch 64 --backend $b --json "$WORK/ens_$b.json" --checkpoint "$WORK/ck_$b.h5"
  grep -oE 'parameters digest [0-9a-f]+' "$LAST_OUT" >"$WORK/digest_$b"
done
checks=$((checks + 1))
if [ -s "$WORK/digest_cpu" ] && cmp -s "$WORK/digest_cpu" "$WORK/digest_cuda"; then
  echo "ok   ensemble: the same parameters digest ($(cat "$WORK/digest_cpu"))"
else
  fail "ensemble: digests differ: cpu '$(cat "$WORK/digest_cpu")', stand-in '$(cat "$WORK/digest_cuda")'"
fi
run ensemble_epochs 0 10 /usr/bin/python3 -c "
import json
a, b = (json.load(open('$WORK/ens_%s.json' % x))['epochs'] for x in ('cpu', 'cuda'))
keys = ('train_loss', 'train_accuracy', 'test_loss', 'test_accuracy', 'member_test_accuracy')
assert len(a) == 2 and [[e[k] for k in keys] for e in a] == [[e[k] for k in keys] for e in b], (a, b)"

for b in cpu cuda; do
  run "eval_cnn_$b" 0 120 on_ranks 3 "$SPMD" eval --data "$TEST" --model cnn --weights "$WORK/ck_cpu.h5" --devices 2 \
    --per-device-batch 17 --backend $b --predictions "$WORK/cnn_$b.h5" --json "$WORK/cnn_$b.json"
  expect_in "eval_cnn_$b: every example counted once" 'every example counted exactly once: total 203'
done
run eval_cnn_same 0 10 cmp "$WORK/cnn_cpu.h5" "$WORK/cnn_cuda.h5"

for b in cpu cuda; do
  run "logreg_$b" 0 120 on_ranks 2 "$SPMD" logreg --data "$TRAIN" --maxiter 8 --backend $b --json "$WORK/lr_$b.json" \
    --weights-out "$WORK/w_$b.h5"
done
run logreg_same 0 10 /usr/bin/python3 -c "
import json; a, b = (json.load(open('$WORK/lr_%s.json' % x))['value'] for x in ('cpu', 'cuda')); assert a == b, (a, b)"
for b in cpu cuda; do
  run "eval_logreg_$b" 0 120 on_ranks 3 "$SPMD" eval --data "$TEST" --model logreg --weights "$WORK/w_cpu.h5" \
    --devices 2 --per-device-batch 17 --backend $b --predictions "$WORK/lr_$b.h5"
done
run eval_logreg_same 0 10 cmp "$WORK/lr_cpu.h5" "$WORK/lr_cuda.h5"

# The stand-in's guard bites: float32 images reach it as floats, and it refuses them.
FLOATS=$WORK/floats.h5
run float_inputs 0 60 /usr/bin/python3 -c "
import h5py, numpy as np
with h5py.File('$TEST') as f, h5py.File('$FLOATS', 'w') as g:
    g['images'] = (f['images'][...] / 255.0).astype('f4'); g['labels'] = f['labels'][...]"
run guard nonzero 60 on_ranks 2 "$SPMD" eval --data "$FLOATS" --model cnn --weights "$WORK/ck_cpu.h5" --backend cuda
expect_in "the guard names the floats it refused" 'stand-in GPU: .*given floats.*bytes expected'
finish
