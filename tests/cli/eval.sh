#!/usr/bin/env bash
# spmd eval end to end on Fashion-MNIST test (10000 examples, 1000 per class): the zero
# model must count correct 1000, total 10000 on every layout with pad, pad-metrics and
# infinite-pad; the evaluation guide's numbers for keep-remainder and drop-remainder; the 4097-example
# multi-host case; dry run; bad inputs.
source "$(dirname "$0")/../support/cli_lib.sh"
TEST=$DATA/fashion/test.h5
jq_py() { /usr/bin/python3 -c "import json,sys; j=json.load(open('$1')); $2"; }

# The evaluation guide's problem, reproduced.
run keep_remainder 0 60 "$SPMD" eval --data "$TEST" --strategy keep-remainder --per-device-batch 512 --json "$WORK/keep.json"
run keep_json 0 10 jq_py "$WORK/keep.json" "assert j['batch_shapes']=={'512':19,'272':1}, j['batch_shapes']; assert j['total']==10000 and j['correct']==1000"
run drop_remainder 0 60 "$SPMD" eval --data "$TEST" --strategy drop-remainder --per-device-batch 512 --json "$WORK/drop.json"
expect_in "drop-remainder says examples were dropped" 'WARNING: 272 of 10000 examples were not evaluated'
run drop_json 0 10 jq_py "$WORK/drop.json" "assert j['total']==9728, j['total']"
run split6 0 120 mpi 6 "$SPMD" eval --data "$TEST" --strategy pad --json "$WORK/split6.json"
run split6_json 0 10 jq_py "$WORK/split6.json" "assert j['examples_per_rank']==[1667]*4+[1666]*2, j['examples_per_rank']"

# Exact counts on every layout.
for np in 1 2 3 4 6; do
  for d in 1 2 3; do
    for s in pad pad-metrics infinite-pad; do
      B=512; [ $s = infinite-pad ] && B=7; [ $s = pad-metrics ] && B=5000
      name="layout_np${np}_d${d}_${s}_B${B}"
      run "$name" 0 120 mpi $np "$SPMD" eval --data "$TEST" --devices $d --strategy $s --per-device-batch $B --json "$WORK/$name.json"
      run "${name}_counts" 0 10 jq_py "$WORK/$name.json" "assert (j['correct'],j['total'])==(1000,10000), (j['correct'],j['total']); assert len(j['batch_shapes'])==1"
    done
  done
done

# --benchmark: every strategy counts the same examples in every round, and a ratio per
# round is reported (timings are never asserted).
run benchmark 0 120 mpi 2 "$SPMD" eval --data "$TEST" --benchmark --repeat 3 --passes 2 --json "$WORK/bench.json"
run benchmark_json 0 10 jq_py "$WORK/bench.json" "b=j['benchmark']; assert set(b)=={'plain-forward','pad','infinite-pad'}, b.keys(); assert all((v['correct'],v['total'])==(2000,20000) for v in b.values()), b; assert all(len(v['ratios'])==3 and v['ratio']>0 for v in b.values()); assert b['plain-forward']['ratios']==[1.0]*3"

# The evaluation guide's multi-host case: 4097 examples, 8 hosts x 8 devices, B=128.
run guide_4097 0 300 mpi 8 "$SPMD" eval --data "$DATA/rows4097.h5" --features-key X --labels-key y --classes 3 \
  --devices 8 --per-device-batch 128 --strategy infinite-pad --json "$WORK/g4097.json"
run guide_4097_total 0 10 jq_py "$WORK/g4097.json" "assert j['total']==4097, j['total']"

# --drop-label: per-rank counts unknown in advance. infinite-pad is exact; pad either
# agrees (same step counts) or stops with an error pointing to infinite-pad.
run drop_label_inf 0 60 mpi 3 "$SPMD" eval --data "$TEST" --strategy infinite-pad --drop-label 0 --json "$WORK/dl.json"
run drop_label_counts 0 10 jq_py "$WORK/dl.json" "assert (j['correct'],j['total'])==(0,9000), (j['correct'],j['total'])"
run drop_label_pad_mismatch nonzero 60 mpi 3 "$SPMD" eval --data "$TEST" --strategy pad --drop-label 0 --per-device-batch 1000
expect_in "pad names infinite-pad when step counts differ" 'infinite-pad'
expect_not_in "no abort needed" 'MPI_ABORT'

# CPU and CUDA give the same counts for every strategy (needs a GPU; skipped visibly without).
if "$SPMD" info --backend cuda >/dev/null 2>&1; then
  build_model() { "$SPMD" logreg --data "$DATA/fashion/train.h5" --features-key images --labels-key labels --maxiter 20 \
    --quiet --weights-out "$WORK/fw.h5"; }
  run gpu_model 0 300 build_model
  # The images are uint8: the GPU takes them as bytes (a quarter of the floats) and decodes
  # them itself (backends/cuda/byte_stager.hpp); its predictions are still the CPU's bits.
  for s in pad pad-metrics infinite-pad; do
    for backend in cpu cuda; do
      run "backend_${backend}_$s" 0 120 "$SPMD" eval --data "$TEST" --model logreg --weights "$WORK/fw.h5" --strategy $s \
        --backend $backend --json "$WORK/b_${backend}_$s.json" --predictions "$WORK/b_${backend}_$s.h5"
    done
    run "cpu_equals_cuda_$s" 0 10 jq_py "$WORK/b_cpu_$s.json" "
k=json.load(open('$WORK/b_cuda_$s.json')); assert (j['correct'],j['total'])==(k['correct'],k['total']), (j['correct'],k['correct'])"
    same_predictions() {
      /usr/bin/python3 - "$WORK/b_cpu_$s.h5" "$WORK/b_cuda_$s.h5" <<'PYEOF'
import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1]), h5py.File(sys.argv[2])
for key in ("predicted", "probabilities"):
    x, y = a[key][...], b[key][...]
    assert x.shape == y.shape and x.tobytes() == y.tobytes(), (key, np.argwhere(x != y)[:5])
PYEOF
    }
    run "cpu_equals_cuda_bitwise_$s" 0 30 same_predictions
  done
else
  echo "SKIP cpu_equals_cuda: no GPU here (spmd info --backend cuda fails)"
fi

# Dry run: shapes only.
run dry_run 0 60 mpi 3 "$SPMD" eval --data "$TEST" --dry-run --devices 2 --per-device-batch 128
expect_in "dry run lists rank 2's split" '^ +2 +6667 +3333 +14 +\[2, 128, 28, 28, 1\]'

# Bad inputs: message names the culprit, non-zero exit on every rank, quickly.
printf 'not hdf5' > "$WORK/not.h5"
head -c 3000 "$TEST" > "$WORK/truncated.h5"
run missing_file nonzero 20 mpi 2 "$SPMD" eval --data "$WORK/nope.h5"
expect_in "missing file named" 'nope.h5'
run not_hdf5 nonzero 20 mpi 2 "$SPMD" eval --data "$WORK/not.h5"
expect_in "not-HDF5 file named" 'not.h5'
run truncated nonzero 20 mpi 2 "$SPMD" eval --data "$WORK/truncated.h5"
expect_in "truncated file named" 'truncated.h5'
run missing_key nonzero 20 mpi 2 "$SPMD" eval --data "$TEST" --features-key pixels
expect_in "missing dataset named" 'pixels'
run label_range nonzero 20 mpi 2 "$SPMD" eval --data "$TEST" --classes 5
expect_in "label out of range explained" 'label'
run keep_several_devices nonzero 20 mpi 2 "$SPMD" eval --data "$TEST" --strategy keep-remainder
expect_in "keep-remainder refuses several devices" 'keep-remainder needs exactly one device'
run batch_zero nonzero 20 mpi 2 "$SPMD" eval --data "$TEST" --per-device-batch 0
expect_in "batch named" 'per-device-batch must be > 0'
run bad_strategy nonzero 20 mpi 2 "$SPMD" eval --data "$TEST" --strategy sometimes
expect_in "strategy named" 'strategy must be one of'
run json_missing_dir nonzero 20 mpi 2 "$SPMD" eval --data "$TEST" --json "$WORK/no/such/dir/out.json"
expect_in "json folder named" 'does not exist'
finish
