#!/usr/bin/env bash
# The lent-GPU scripts (tools/device/pack.sh, run.sh) run here as they would there, on a
# machine without a GPU: every CUDA step a SKIP line, the CPU steps passing, exit 0, and the
# record gpu-results.json with its structure. Then the machinery that must be able to fail:
# the environment step (a carried file with a library not found), the call's deadline, two
# run.sh in one call keeping each other's log and record, the comparisons, the merge.
source "$(dirname "$0")/../support/cli_lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(dirname "$SPMD")
RT=$WORK/rt OUTD=$WORK/out
py() { /usr/bin/python3 -c "$1"; }
if nvidia-smi -L >/dev/null 2>&1; then
  echo "SKIP device_scripts: this machine has a GPU (the scripts are checked without one)"
  finish; exit
fi

run stage 0 120 env BUILD="$BUILD" SPMD_DEVICE_RT="$RT" bash "$ROOT/tools/device/pack.sh" --stage-only
mkdir -p "$OUTD"
DEVICE=(env OUT="$OUTD" SPMD_DEVICE_RT="$RT" SPMD_DEVICE_SCALE=small)
RUN_SH=(bash "$ROOT/tools/device/run.sh")
run all_parts 0 400 "${DEVICE[@]}" SPMD_DEVICE_GTEST_FILTER='ShardingSplit.*:PartialSumTree.*:Agree.*:BinomialBroadcast.*' "${RUN_SH[@]}" all
expect_not_in "no step failed" '^FAIL'
for s in environment info no_cuda_in_cpu_run unit_tests mpi_tests_np2 make_data logreg_cpu logreg_float64_cpu eval_pad_cpu \
         fashion_logreg_fit eval_fashion_logreg_cpu ensemble_m4_cpu eval_fashion_cnn_cpu export_onnx eval_onnx_ensemble_cpu \
         eval_onnx_lenet_cpu eval_onnx_mlp_cpu; do
  expect_in "$s passes on the CPU" "^ok   $s \("
done
expect_in "the CUDA tests ran and skipped themselves" '^SKIP cuda_tests: no GPU visible: the binary ran'
for s in onnx_conformance_cuda memcheck racecheck initcheck synccheck logreg_cuda logreg_cpu_vs_cuda logreg_float64_cuda \
         logreg_float64_cpu_vs_cuda eval_pad_bitwise eval_fashion_logreg_cuda \
         ensemble_m1_cuda ensemble_m4_cpu_vs_cuda eval_fashion_cnn_cpu_vs_cuda eval_onnx_lenet_cuda eval_onnx_mlp_cpu_vs_cuda \
         onnx_unsupported_refused_on_cuda onnx_unsupported_auto_on_cpu bench_gpu_logreg bench_eval_onnx_resnet \
         bench_ensemble_b256_m8 bench_eval_cnn cli_eval cli_logreg_intercept profile_logreg profile_ensemble \
         ensemble_m4_cpu_lr0.10000001; do
  expect_in "$s is a visible SKIP" "^SKIP $s: no GPU visible"
done
expect_in "the peers skip without jax" '^SKIP peers: no jax'
run record_structure 0 10 py "
import json
r = json.load(open('$OUTD/gpu-results.json'))
assert r['device'] is None and r['driver'] is None, r
assert r['parts'] == ['tests', 'sanitize', 'workloads', 'bench', 'cli', 'peers', 'profile'], r['parts']
assert set(r['steps']) == set(r['step_order']) and len(r['steps']) >= 60, len(r['steps'])
for name, s in r['steps'].items():
    assert s['status'] in ('ok', 'skip') and isinstance(s['seconds'], float) and s['rc'] == 0, (name, s)
assert r['steps']['cuda_tests']['status'] == 'skip' and r['steps']['unit_tests']['status'] == 'ok'
assert r['cuda_tests_failed'] == 0 and r['cuda_tests_skipped'] > 10, r  # some pass without a GPU: no-GPU errors
assert r['eval_images_per_s']['onnx_cpu'] > 0, r
assert r['call_started'] > 1.7e9"

# Chained in one call: a second run.sh appends to the log and the record.
run chained 0 60 "${DEVICE[@]}" SPMD_DEVICE_ONLY='environment|info' "${RUN_SH[@]}" workloads
run chained_log 0 10 grep -cE '^===== run.sh [a-z ]+ \(20' "$OUTD/device.log"
expect_in "both run.sh headers in one log" '^2$'
run chained_record 0 10 py "
import json; r = json.load(open('$OUTD/gpu-results.json'))
assert r['steps']['unit_tests']['status'] == 'ok' and r['parts'] == ['workloads'], r['parts']"

# The environment step fails on a carried file whose library is not found.
mkdir -p "$WORK/lib"
echo 'int gone(void) { return 0; }' >"$WORK/gone.c"
echo 'int gone(void); int main(void) { return gone(); }' >"$WORK/main.c"
run broken_build 0 60 bash -c "cc -shared -fPIC -o '$WORK/lib/libgone.so' '$WORK/gone.c' &&
  cc -o '$RT/bin/needs_gone' '$WORK/main.c' -L'$WORK/lib' -lgone && rm '$WORK/lib/libgone.so'"
run broken_environment nonzero 60 env OUT="$WORK/out2" SPMD_DEVICE_RT="$RT" SPMD_DEVICE_ONLY=environment bash "$ROOT/tools/device/run.sh"
expect_in "a library not found fails the environment step" '^FAIL environment \(fail'
run broken_log 0 10 cat "$WORK/out2/device.log"
expect_in "naming the file and the library" 'FAIL ldd needs_gone'
expect_in "and the library" 'libgone.so => not found'
rm -f "$RT/bin/needs_gone"

# No step starts past the call's deadline.
run deadline nonzero 60 env OUT="$WORK/out3" SPMD_DEVICE_RT="$RT" SPMD_DEVICE_DEADLINE_S=5 bash "$ROOT/tools/device/run.sh" tests
expect_in "a step past the deadline is a failure saying so" '^FAIL unit_tests \(deadline, .*not run'

# The comparisons: the same bytes pass; one changed probability fails, its figures recorded.
run eval_a 0 60 "$SPMD" eval --data "$DATA/fashion/test.h5" --per-device-batch 512 --predictions "$WORK/a.h5" --json "$WORK/a.json"
cp "$WORK/a.h5" "$WORK/b.h5"
run same_bits 0 30 /usr/bin/python3 "$ROOT/tools/device/compare.py" "$WORK/cmp.json" predictions same "$WORK/a.h5" "$WORK/b.h5" bitwise
py "import h5py; f = h5py.File('$WORK/b.h5', 'r+'); f['probabilities'][3, 1] += 1e-3"
run one_changed nonzero 30 /usr/bin/python3 "$ROOT/tools/device/compare.py" "$WORK/cmp.json" predictions changed "$WORK/a.h5" "$WORK/b.h5" 1e-4
run compare_record 0 10 py "
import json; c = json.load(open('$WORK/cmp.json'))['comparisons']
assert c['same']['passed'] and not c['changed']['passed'], c
assert abs(c['changed']['max_abs_difference'] - 1e-3) < 1e-6, c['changed']"
run counts_equal 0 30 /usr/bin/python3 "$ROOT/tools/device/compare.py" "$WORK/cmp.json" counts c "$WORK/a.json" "$WORK/a.json"

# Ensembles: the other backend's run must fall within the spread that rounding alone gives the
# CPU (runs at learning rates a few float32 steps off); a change past it (a train loss 1 % off)
# fails. The CPU plays both sides here: a perturbed run passes against the others.
ENS_ARGS=(ensemble --train "$DATA/fashion/train.h5" --test "$DATA/fashion/test.h5" --train-limit 320 --test-limit 256
  --eval-batch 128 --epochs 1 --quiet)
perturbed=()
for lr in 0.1 0.1000000{1..5} 0.0999999{9..5}; do
  run "ens_lr$lr" 0 60 "$SPMD" "${ENS_ARGS[@]}" --learning-rate $lr --json "$WORK/ens_$lr.json"
  [ $lr = 0.1 ] || [ $lr = 0.10000001 ] || perturbed+=("$WORK/ens_$lr.json")
done
run ens_within_spread 0 30 /usr/bin/python3 "$ROOT/tools/device/compare.py" "$WORK/cmp.json" ensemble e "$WORK/ens_0.1.json" \
  "$WORK/ens_0.10000001.json" "${perturbed[@]}"
py "import json; r = json.load(open('$WORK/ens_0.10000001.json')); r['epochs'][0]['train_loss'] *= 1.01
json.dump(r, open('$WORK/ens_off.json', 'w'))"
run ens_outside_spread nonzero 30 /usr/bin/python3 "$ROOT/tools/device/compare.py" "$WORK/cmp.json" ensemble e "$WORK/ens_0.1.json" \
  "$WORK/ens_off.json" "${perturbed[@]}"
expect_in "names the figure outside its bounds" '"train_loss": \{[^}]*"inside": false'

# The sanitizers' verdicts: memcheck's ERROR SUMMARY line and racecheck's own summary.
printf '========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n' >"$WORK/race0.log"
printf '========= RACECHECK SUMMARY: 1 hazard displayed (0 errors, 1 warning)\n' >"$WORK/race1.log"
run racecheck_clean 0 10 /usr/bin/python3 "$ROOT/tools/device/record.py" sanitizer "$WORK/cmp.json" racecheck "$WORK/race0.log"
run racecheck_hazard nonzero 10 /usr/bin/python3 "$ROOT/tools/device/record.py" sanitizer "$WORK/cmp.json" racecheck "$WORK/race1.log"

# Several calls' records as one, named by device and date.
run merge 0 30 /usr/bin/python3 "$ROOT/tools/device/record.py" merge "$WORK" "$OUTD/gpu-results.json" "$WORK/out3/gpu-results.json"
run merged 0 10 py "
import glob, json; (f,) = glob.glob('$WORK/gpu-unknown-*.json'); r = json.load(open(f))
assert len(r['calls']) == 2 and r['steps']['unit_tests']['status'] == 'deadline', r['steps']['unit_tests']"
finish
