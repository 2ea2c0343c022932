#!/usr/bin/env bash
# spmd eval --model onnx on random classifiers made of PyTorch's layers (tests/support/
# torch_random_models.py: convolutional nets with every padding mode, stride, dilation and group
# count, norms, pools, upsampling, shuffles and residuals; attention, recurrent, token-mixing and
# MLP nets), exported at random opsets 11-17, each run on its own random layout of ranks x
# devices, batch and strategy. Against ONNX Runtime on the same file: probabilities within 1e-4,
# the same classes but for ties within 1e-4, every example counted once. ONNX Runtime is the
# reference, not PyTorch: PyTorch 1.13 exports some layers with other semantics than it runs
# (circular padding, reflection padding before a dilated convolution), and spmd follows the file.
source "$(dirname "$0")/../support/cli_lib.sh"
PY=/usr/bin/python3
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
GEN="$ROOT/tests/support/torch_random_models.py"
ORT_RUN="$ROOT/tools/onnx/ort_run.js"
SUB=$WORK/sub.h5
if [ ! -d "$ROOT/tools/onnx/node_modules/onnxruntime-node" ]; then
  echo "SKIP onnx_random_models: no ONNX Runtime (tools/setup.sh installs onnxruntime-node), the reference"
  exit 0
fi

run inputs 0 60 fashion_subset 61 "$SUB"
run export 0 300 $PY "$GEN" export "$WORK" "${SPMD_RANDOM_MODELS_FIRST:-0}" "${SPMD_RANDOM_MODELS:-24}"
mapfile -t MODELS < "$WORK/models.txt"
[ ${#MODELS[@]} -ge 16 ] || fail "export: only ${#MODELS[@]} of ${SPMD_RANDOM_MODELS:-24} random models exported"
for entry in "${MODELS[@]}"; do
  read -r seed dims kind ranks devices batch strategy <<<"$entry"
  run "eval_r$seed" 0 120 mpi "$ranks" "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/r$seed.onnx" \
    --devices "$devices" --per-device-batch "$batch" --strategy "$strategy" --predictions "$WORK/r$seed.h5"
  expect_in "r$seed ($ranks x $devices, batch $batch, $strategy) counts every example once" " $strategy +[0-9]+ +61 "
  run "r${seed}_vs_ort" 0 60 $PY "$GEN" compare "$WORK/r$seed.onnx" "$dims" "$kind" "$WORK/r$seed.h5" "$SUB" "$ORT_RUN"
  cat "$LAST_OUT"
done
finish
