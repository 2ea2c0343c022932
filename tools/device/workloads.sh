# Sourced by tools/device/run.sh: the parts that run spmd end to end (workloads, bench, cli).
# CPU against CUDA through tools/device/compare.py: bitwise where the CUDA code follows the
# CPU's order of operations (logreg: fixed chunk trees; the byte decoder), a stated tolerance
# where it does not (the CNN's cuBLAS GEMMs). SPMD_DEVICE_SCALE=small: the sizes CI can afford.
if [ "${SPMD_DEVICE_SCALE:-full}" = small ]; then
  GEN=(--samples 2000 --features 64 --informative 20) MAXITER=5 ENS=(--train-limit 320 --test-limit 256 --eval-batch 128)
else
  GEN=(--samples 20000 --features 784 --informative 50) MAXITER=20 ENS=(--train-limit 1280 --test-limit 1000 --eval-batch 128)
fi
TRAIN=$DATA/fashion/train.h5 TEST=$DATA/fashion/test.h5 ONNX=$DATA/onnx
# --model onnx, CPU against CUDA: the exported ensemble and PyTorch's models (the ResNet and
# channels-last nets cost CI's CPU most: full scale only).
ONNX_MODELS="ensemble lenet mlp"
[ "${SPMD_DEVICE_SCALE:-full}" = small ] || ONNX_MODELS="$ONNX_MODELS resnet channels_last"
PYH5=$(python_with h5py numpy) || PYH5=""
COMPARE=("$PYH5" "$DEVICE_DIR/compare.py" "$RECORD")
# CMD must fail (not time out) with PATTERN in its output.
REFUSAL=(bash -c 'out=$("${@:2}" 2>&1); rc=$?; echo "$out"; [ $rc -ne 0 ] && [ $rc -lt 124 ] && grep -qE -- "$1" <<<"$out"' _)
BACKENDS=cpu
[ "$GPU" = 1 ] && BACKENDS="cpu cuda"

# on BACKEND NAME LIMIT CMD...: a CPU step, or a GPU step (a SKIP line without a GPU).
on() { local b=$1; shift; if [ "$b" = cpu ]; then step "$@"; else gpu_step "$@"; fi; }

workloads_generated() {
  local D=$WORK/cls.h5 b s
  step make_data 60 "$SPMD" data make-classification --out "$D" "${GEN[@]}" --classes 10 --seed 0
  for b in cpu cuda; do
    on $b "logreg_$b" 150 "$SPMD" logreg --data "$D" --maxiter $MAXITER --quiet --backend $b \
      --json "$WORK/lr_$b.json" --weights-out "$WORK/w_$b.h5"
  done
  gpu_host_step logreg_cpu_vs_cuda 30 "${COMPARE[@]}" objective logreg_generated "$WORK/lr_cpu.json" "$WORK/lr_cuda.json" 1e-5
  # --precision float64: the float64 kernels follow the CPU's float64 order too, so the same value.
  for b in cpu cuda; do
    on $b "logreg_float64_$b" 150 "$SPMD" logreg --data "$D" --precision float64 --maxiter $MAXITER --quiet \
      --backend $b --json "$WORK/lr64_$b.json"
  done
  gpu_host_step logreg_float64_cpu_vs_cuda 30 "${COMPARE[@]}" objective logreg_float64_generated "$WORK/lr64_cpu.json" \
    "$WORK/lr64_cuda.json" 0
  for s in keep-remainder drop-remainder pad pad-metrics infinite-pad; do
    local pred=()
    for b in cpu cuda; do
      [[ $s == *pad* ]] && pred=(--predictions "$WORK/ev_${s}_$b.h5")
      on $b "eval_${s}_$b" 120 "$SPMD" eval --data "$D" --features-key X --labels-key y --model logreg --weights "$WORK/w_cpu.h5" \
        --per-device-batch 512 --strategy "$s" --backend $b --json "$WORK/ev_${s}_$b.json" "${pred[@]}"
    done
    gpu_host_step "eval_${s}_counts" 30 "${COMPARE[@]}" counts "eval_${s}_counts" "$WORK/ev_${s}_cpu.json" "$WORK/ev_${s}_cuda.json"
    [ ${#pred[@]} -gt 0 ] && gpu_host_step "eval_${s}_bitwise" 30 "${COMPARE[@]}" predictions "eval_${s}_bitwise" \
      "$WORK/ev_${s}_cpu.h5" "$WORK/ev_${s}_cuda.h5" bitwise
  done
}

# uint8 Fashion-MNIST: the GPU takes the bytes and decodes them itself (backends/cuda/byte_stager).
workloads_fashion() {
  local b m
  step fashion_logreg_fit 150 "$SPMD" logreg --data "$TRAIN" --features-key images --labels-key labels --maxiter $MAXITER \
    --quiet --weights-out "$WORK/fw.h5"
  for b in cpu cuda; do
    on $b "eval_fashion_logreg_$b" 120 "$SPMD" eval --data "$TEST" --model logreg --weights "$WORK/fw.h5" --per-device-batch 512 \
      --backend $b --json "$WORK/efl_$b.json" --predictions "$WORK/efl_$b.h5"
  done
  gpu_host_step eval_fashion_logreg_bitwise 30 "${COMPARE[@]}" predictions eval_fashion_logreg_bitwise \
    "$WORK/efl_cpu.h5" "$WORK/efl_cuda.h5" bitwise
  local lr envelope
  for m in 1 4; do
    for b in cpu cuda; do
      on $b "ensemble_m${m}_$b" 180 "$SPMD" ensemble --train "$TRAIN" --test "$TEST" "${ENS[@]}" --epochs 1 --devices $m \
        --backend $b --quiet --json "$WORK/ens_m${m}_$b.json" --checkpoint "$WORK/ck_m${m}_$b.h5"
    done
    # How far rounding alone moves an epoch of SGD: the CPU again with the learning rate a few
    # float32 steps off 0.1 (the default). The GPU's sums, in cuBLAS's order, must land inside
    # that spread (compare.py ensemble). Only where a GPU runs the other side.
    envelope=()
    for lr in 0.1000000{1..8} 0.0999999{9..2}; do
      gpu_step "ensemble_m${m}_cpu_lr$lr" 120 "$SPMD" ensemble --train "$TRAIN" --test "$TEST" "${ENS[@]}" --epochs 1 \
        --devices $m --backend cpu --learning-rate $lr --quiet --json "$WORK/ens_m${m}_lr$lr.json"
      envelope+=("$WORK/ens_m${m}_lr$lr.json")
    done
    gpu_host_step "ensemble_m${m}_cpu_vs_cuda" 30 "${COMPARE[@]}" ensemble "ensemble_m${m}" "$WORK/ens_m${m}_cpu.json" \
      "$WORK/ens_m${m}_cuda.json" "${envelope[@]}"
  done
  for b in cpu cuda; do  # the same (CPU-trained) members on both backends
    on $b "eval_fashion_cnn_$b" 120 "$SPMD" eval --data "$TEST" --model cnn --weights "$WORK/ck_m4_cpu.h5" --per-device-batch 512 \
      --backend $b --json "$WORK/efc_$b.json" --predictions "$WORK/efc_$b.h5"
  done
  gpu_host_step eval_fashion_cnn_cpu_vs_cuda 30 "${COMPARE[@]}" predictions eval_fashion_cnn "$WORK/efc_cpu.h5" "$WORK/efc_cuda.h5" 1e-4
  # ONNX: spmd's own export of those members, and PyTorch's models (pack.sh), CPU against CUDA.
  step export_onnx 60 "$SPMD" export --weights "$WORK/ck_m4_cpu.h5" --out "$WORK/m4.onnx"
  for m in $ONNX_MODELS; do
    local weights=$ONNX/$m.onnx
    [ $m = ensemble ] && weights=$WORK/m4.onnx
    for b in cpu cuda; do
      on $b "eval_onnx_${m}_$b" 120 "$SPMD" eval --data "$TEST" --model onnx --weights "$weights" --per-device-batch 512 \
        --backend $b --json "$WORK/eo_${m}_$b.json" --predictions "$WORK/eo_${m}_$b.h5"
    done
    gpu_host_step "eval_onnx_${m}_cpu_vs_cuda" 30 "${COMPARE[@]}" predictions "eval_onnx_$m" "$WORK/eo_${m}_cpu.h5" \
      "$WORK/eo_${m}_cuda.h5" 1e-5
  done
  [ -f "$WORK/eo_ensemble_cpu.json" ] && rec take eval_images_per_s.onnx_cpu "$WORK/eo_ensemble_cpu.json" examples_per_second
  # A graph the CUDA backend cannot run (a Cast of float data to int64): --backend cuda refuses it by
  # node and op; auto runs it on the CPU.
  gpu_step onnx_unsupported_refused_on_cuda 60 "${REFUSAL[@]}" "node 'c' \(Cast giving int64 from float data" \
    "$SPMD" eval --data "$TEST" --model onnx --weights "$ONNX/cast.onnx" --backend cuda
  gpu_step onnx_unsupported_auto_on_cpu 60 bash -c 'out=$("$@" 2>&1); rc=$?; echo "$out"; [ $rc -eq 0 ] &&
    grep -q "backend auto: --model onnx runs on the CPU (node .c. (Cast giving int64" <<<"$out"' _ \
    "$SPMD" eval --data "$TEST" --model onnx --weights "$ONNX/cast.onnx" --backend auto
}

part_workloads() {
  [ -n "$PYH5" ] || echo "note: no python3 with h5py and numpy: the comparisons will fail"
  workloads_generated
  workloads_fashion
}

# Throughput on the GPU: the logreg objective against one read of X, ensemble training at
# batch 32 and 256 with 1, 4 and 8 members on the GPU (3 epochs, the last one's images/s), eval at batch 512 (logreg, cnn, and
# PyTorch's LeNet- and ResNet-style models through --model onnx).
part_bench() {
  local b m limit
  gpu_step bench_gpu_logreg 180 "$BIN/bench_gpu_logreg" --json "$WORK/bench_logreg.json"
  [ -f "$WORK/bench_logreg.json" ] && rec bench "$WORK/bench_logreg.json"
  for b in 32 256; do
    limit=$((b * 100)); [ $limit -gt 10000 ] && limit=10000
    for m in 1 4 8; do
      gpu_step "bench_ensemble_b${b}_m$m" 150 "$SPMD" ensemble --train "$TRAIN" --test "$TEST" --train-limit $limit --test-limit 512 \
        --batch-size $b --epochs 3 --devices $m --backend cuda --quiet --json "$WORK/be_${b}_$m.json" --checkpoint "$WORK/be_${b}_$m.h5"
      # The last epoch's rate: the first pays for the start (a 1-epoch run of 3200 images was
      # mostly that on the H100), as the Flax peer's timing leaves out its compilation.
      [ -f "$WORK/be_${b}_$m.json" ] && rec take "ensemble_train_img_s.b${b}_m$m" "$WORK/be_${b}_$m.json" epochs.-1.images_per_second
    done
    # The same steps without CUDA graphs (cuda/step_graph.hpp): what replaying a step saves.
    for m in 1 8; do
      gpu_step "bench_ensemble_eager_b${b}_m$m" 150 env SPMD_CUDA_GRAPHS=0 "$SPMD" ensemble --train "$TRAIN" --test "$TEST" \
        --train-limit $limit --test-limit 512 --batch-size $b --epochs 3 --devices $m --backend cuda --quiet \
        --json "$WORK/bee_${b}_$m.json" --checkpoint "$WORK/bee_${b}_$m.h5"
      [ -f "$WORK/bee_${b}_$m.json" ] &&
        rec take "ensemble_train_img_s_eager.b${b}_m$m" "$WORK/bee_${b}_$m.json" epochs.-1.images_per_second
    done
  done
  gpu_step bench_logreg_fit 120 "$SPMD" logreg --data "$TRAIN" --features-key images --labels-key labels --maxiter 5 --quiet \
    --weights-out "$WORK/bw.h5"
  for m in logreg:bw.h5 cnn:be_32_4.h5; do
    gpu_step "bench_eval_${m%%:*}" 120 "$SPMD" eval --data "$TEST" --model "${m%%:*}" --weights "$WORK/${m#*:}" \
      --per-device-batch 512 --strategy pad --backend cuda --json "$WORK/bev_${m%%:*}.json"
    [ -f "$WORK/bev_${m%%:*}.json" ] && rec take "eval_images_per_s.${m%%:*}_cuda" "$WORK/bev_${m%%:*}.json" examples_per_second
  done
  for m in lenet resnet; do
    gpu_step "bench_eval_onnx_$m" 120 "$SPMD" eval --data "$TEST" --model onnx --weights "$ONNX/$m.onnx" --per-device-batch 512 \
      --strategy pad --backend cuda --json "$WORK/bev_onnx_$m.json"
    [ -f "$WORK/bev_onnx_$m.json" ] && rec take "eval_images_per_s.onnx_${m}_cuda" "$WORK/bev_onnx_$m.json" examples_per_second
  done
}

# The GPU sections of the CLI tests, from a copy whose python3 is one with h5py and numpy
# (the tests name Debian's /usr/bin/python3; the device machine's is its venv's).
part_cli() {
  local t
  mkdir -p "$WORK/cli/tests"
  cp -r "$ROOT/tests/cli" "$ROOT/tests/support" "$WORK/cli/tests/"
  [ -n "$PYH5" ] && sed -i "s#/usr/bin/python3#$PYH5#g" "$WORK"/cli/tests/cli/*.sh "$WORK"/cli/tests/support/*.sh
  for t in eval ensemble logreg logreg_intercept; do
    gpu_step "cli_$t" 180 env SPMD_CLI="$SPMD" SPMD_TEST_DATA_DIR="$DATA" SPMD_SOURCE_DIR="$ROOT" OPENBLAS_NUM_THREADS=1 \
      bash "$WORK/cli/tests/cli/$t.sh"
  done
}

# Where the GPU time goes: per kernel, Nsight Systems' summaries (--stats) where nsys is
# installed, else Nsight Compute's (ncu, in the toolkit's bin/ on the H100 machine of
# 2026-11-26, which had no nsys): each kernel's duration over a window of launches past the
# warm-up, at the clocks the GPU runs at (--clock-control none). Of the logreg objective's
# benchmark and of ensemble training (batch 256, 1 member), in the log.
part_profile() {
  local tool="" c kind
  for c in "$(command -v nsys)" /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems*/bin/nsys \
           "$(command -v ncu)" /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute*/ncu; do
    [ -n "$c" ] && [ -x "$c" ] && { tool=$c; break; }
  done
  if [ $GPU = 0 ]; then skip profile_logreg "no GPU visible"; skip profile_ensemble "no GPU visible"; return; fi
  if [ -z "$tool" ]; then
    selected profile_logreg && verdict profile_logreg fail 0 127 "neither nsys nor ncu (PATH, /usr/local/cuda*/bin, /opt/nvidia)"
    return
  fi
  # profiled NAME SKIP COUNT COMMAND...: the tool's per-kernel summary of COMMAND.
  profiled() {
    local name=$1 skip=$2 count=$3; shift 3
    case $tool in
      */nsys) host_step "$name" 150 "$tool" profile --stats=true --force-overwrite true -o "$WORK/$name" \
                "$DEVICE_DIR/rtenv.sh" "$@" ;;
      *) host_step "$name" 150 "$tool" --clock-control none --print-summary per-kernel --launch-skip "$skip" \
           --launch-count "$count" --target-processes all "$DEVICE_DIR/rtenv.sh" "$@" ;;
    esac
  }
  profiled profile_logreg 10 30 "$BIN/bench_gpu_logreg" 50000 784 10 5 --budget-ms 0
  profiled profile_ensemble 400 120 "$SPMD" ensemble --train "$TRAIN" --test "$TEST" --train-limit 10000 --test-limit 512 \
    --batch-size 256 --epochs 1 --devices 1 --backend cuda --quiet --checkpoint "$WORK/prof_ens.h5"
}
