#!/usr/bin/env bash
# There: on the lent GPU machine, through the device tool, after tools/device/pack.sh here
# (tools/device/README.md has the calls to make, with their carry lists):
#   run(command="bash tools/device/run.sh PART...", carry=["device-rt"])
# PART: tests | sanitize | workloads | bench | cli | peers | profile | all. Every call begins with the probe
# (environment, info, no CUDA in a CPU run), since each call may find a fresh machine.
#   tests      the unit, CUDA and MPI tests (1 and 2 ranks) from device-rt/bin, ONNX's node tests
#              on the CUDA graph executor
#   sanitize   compute-sanitizer memcheck, racecheck, initcheck, synccheck over the CUDA tests
#   workloads  CPU against CUDA: logreg and eval on generated float32 rows, uint8 Fashion-MNIST
#              eval (logreg, cnn), ensemble of 1 and 4 members, --model onnx (PyTorch's models
#              and an exported ensemble) within 1e-5, an op the GPU lacks refused / run on the CPU
#   bench      bench_gpu_logreg, ensemble training and eval images/s on the GPU (ONNX too)
#   cli        the GPU sections of tests/cli/{eval,ensemble,logreg,logreg_intercept}.sh
#   peers      the seeds' Flax ensemble and JAXopt-style L-BFGS (tools/bench/gpu/jax_peers.py)
#   profile    Nsight Systems' kernel summaries of the logreg benchmark and ensemble training
# $OUT/device.log gets every step's output (appended: parts chained in one call, or several
# run.sh in one command, keep each other's); $OUT/gpu-results.json the record (tools/device/
# record.py): device, driver, each step's status and seconds, the comparisons, the figures.
# Each step has its own limit (120-180 s) and none starts past the call's deadline
# (SPMD_DEVICE_DEADLINE_S, 530 s from the call's first run.sh). SPMD_DEVICE_ONLY=REGEX runs
# only the steps it names (a spare call). Without a GPU every CUDA step is a SKIP line and the
# rest runs (tests/cli/device_scripts.sh does so in CI). Exit status: the failed steps' number.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
RT=$(cd "${SPMD_DEVICE_RT:-device-rt}" 2>/dev/null && pwd) ||
  { echo "run.sh: ${SPMD_DEVICE_RT:-device-rt} missing: run tools/device/pack.sh here first and carry device-rt" >&2; exit 1; }
[ -d "$RT/bin" ] || { echo "run.sh: $RT/bin missing: run tools/device/pack.sh" >&2; exit 1; }
BIN=$RT/bin DATA=$RT/data
# PyTorch's exports (pack.sh makes them here; the GPU machine has no torch), for the CUDA tests.
[ -d "$DATA/onnx" ] && export SPMD_ONNX_MODELS=$DATA/onnx
OUTDIR=${OUT:-$RT/out}
mkdir -p "$OUTDIR"
LOG=$OUTDIR/device.log RECORD=$OUTDIR/gpu-results.json
source "$ROOT/tools/device/lib.sh"
CALL_START=$(rec start) || { echo "run.sh: cannot write $RECORD with $PY" >&2; exit 1; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
PARTS=("$@")
[ ${#PARTS[@]} -eq 0 ] && PARTS=(all)
[ "${PARTS[*]}" = all ] && PARTS=(tests sanitize workloads bench cli peers profile)
for p in "${PARTS[@]}"; do
  case $p in tests|sanitize|workloads|bench|cli|peers|profile) ;; *) echo "run.sh: unknown part '$p'" >&2; exit 2 ;; esac
done
echo "===== run.sh ${PARTS[*]} ($(date -u +%FT%TZ))" >>"$LOG"
rec put parts "$("$PY" -c 'import json,sys; print(json.dumps(sys.argv[1:]))' "${PARTS[@]}")"
setup_runtime "$RT" || exit 1
SPMD=$BIN/spmd

part_probe() {
  host_step environment 120 bash "$DEVICE_DIR/check_env.sh"
  step info 60 mpirun -np 1 "$SPMD" info --backend auto
  [ $GPU = 1 ] && host_step info_uses_the_gpu 10 grep -E 'backend cuda' "$WORK/info.out"
  # The loader's own file= lines: spmd info's words ("libspmd_cuda.so not loaded") are no evidence.
  # Our CUDA module and its runtime only: the driver, libcuda.so.1, is loaded on the lent machine
  # by hwloc's OpenCL plugin (Open MPI's topology discovery, through NVIDIA's OpenCL library).
  step no_cuda_in_cpu_run 60 bash -c '
    LD_DEBUG=files "$1" info --backend cpu 2>&1 | grep -oE "file=[^ ]+" | sort -u >"$2"
    cat "$2"
    grep -q "libspmd\.so" "$2" || { echo "no file= line for libspmd.so: LD_DEBUG gave nothing to judge"; exit 1; }
    ! grep -E "libcudart|libcublas|libspmd_cuda" "$2"' _ "$SPMD" "$WORK/cpu_run_files.txt"
}

part_tests() {
  # SPMD_DEVICE_GTEST_FILTER: a subset of the CPU and MPI tests (CI runs them all elsewhere).
  local filter=(${SPMD_DEVICE_GTEST_FILTER:+--gtest_filter="$SPMD_DEVICE_GTEST_FILTER"})
  step unit_tests 180 "$BIN/spmd_unit_tests" --gtest_brief=1 "${filter[@]}"
  local note=""
  [ $GPU = 1 ] || note="no GPU visible: the binary ran and its tests skipped themselves"
  SKIP_IF_OK=$note step cuda_tests 180 "$BIN/spmd_cuda_tests" --gtest_brief=1 --gtest_output=json:"$WORK/cuda_tests.json"
  [ -f "$WORK/cuda_tests.json" ] && rec gtest cuda_tests "$WORK/cuda_tests.json"
  # ONNX's node tests on the CUDA graph executor (the CPU runs them in CI): 0 failures.
  [ -f "$DATA/onnx-tests.tar.gz" ] && gpu_step onnx_conformance_cuda 150 bash -c \
    'set -o pipefail; mkdir -p "$1" && tar xzf "$2" -C "$1" && "$3" --backend cuda "$1" | grep -vE "^[a-z0-9_:]+ +[0-9]+ +0 +[0-9]+$"' _ \
    "$WORK/onnx-tests" "$DATA/onnx-tests.tar.gz" "$BIN/spmd_onnx_conformance"
  step mpi_tests_np1 120 mpirun -np 1 "$BIN/spmd_mpi_tests" --gtest_brief=1 "${filter[@]}"
  step mpi_tests_np2 150 mpirun -np 2 --bind-to none "$BIN/spmd_mpi_tests" --gtest_brief=1 "${filter[@]}"
}

part_sanitize() {
  local sanitizer tool
  sanitizer=$(find_sanitizer)
  for tool in memcheck racecheck initcheck synccheck; do
    if [ $GPU = 0 ]; then skip "$tool" "no GPU visible"; continue; fi
    if [ -z "$sanitizer" ]; then
      selected "$tool" && verdict "$tool" fail 0 127 "no compute-sanitizer (PATH, /usr/local/cuda*/bin, the toolkit's compute-sanitizer/)"
      continue
    fi
    # Judged by its summary line, "ERROR SUMMARY: 0 errors" (racecheck: "RACECHECK SUMMARY: 0
    # hazards displayed (0 errors, 0 warnings)"), as well as by its exit status.
    # Left out: CudaCheck.CudaErrorNamesRankCallFileLineErrorAndHint calls cudaSetDevice(-1) on
    # purpose, two API errors memcheck counts (H100, 2026-11-26). racecheck instruments every
    # shared-memory access and took > 180 s over all the tests (the CNN ones): it runs one test
    # per kernel file with shared memory (byte_stager.cu, ops/common.cu, cnn_member.cu).
    # SPMD_SANITIZER_FILTER replaces the filter for every tool.
    local filter="-CudaCheck.CudaErrorNamesRankCallFileLineErrorAndHint"
    [ "$tool" = racecheck ] &&
      filter="CudaByteStager.*:CudaLogregShard.PartialsMatchCpuBitwiseOnManyShapes:CudaCnnMember.ForwardMatchesCpuIncludingTiledBatches:CudaCnnMember.TrainStepsMatchCpu"
    # The tool in the machine's environment, the tests (its child, through rtenv.sh) in the runtime's.
    host_step "$tool" 180 bash -c '"$@" 2>&1 | tee "$0"; rc=${PIPESTATUS[0]}; [ $rc -eq 0 ] &&
      grep -qE "ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards displayed \(0 errors, 0 warnings\)" "$0"' \
      "$WORK/$tool.log" "$sanitizer" --tool "$tool" --error-exitcode 9 --target-processes all \
      "$DEVICE_DIR/rtenv.sh" "$BIN/spmd_cuda_tests" --gtest_filter="${SPMD_SANITIZER_FILTER:-$filter}"
    [ -f "$WORK/$tool.log" ] && rec sanitizer "$tool" "$WORK/$tool.log"
  done
}

for p in probe "${PARTS[@]}"; do
  case $p in
    probe) part_probe ;;
    tests) part_tests ;;
    sanitize) part_sanitize ;;
    workloads|bench|cli|profile) source "$DEVICE_DIR/workloads.sh"; "part_$p" ;;
    peers)
      if "$PY" -c 'import jax' 2>/dev/null; then
        host_step peers 180 env PYTHONUNBUFFERED=1 "$PY" "$ROOT/tools/bench/gpu/jax_peers.py" --out "$WORK/peers.json"
        [ -f "$WORK/peers.json" ] && rec merge_into "$WORK/peers.json" >/dev/null
      else
        skip peers "no jax in $PY (the device machine's python3 has JAX, Flax and optax)"
      fi ;;
  esac
done
echo "===== run.sh ${PARTS[*]}: $failed step(s) failed" >>"$LOG"
rec summary
echo "run.sh: $failed step(s) failed; log $LOG, record $RECORD"
exit $((failed > 99 ? 99 : failed))
