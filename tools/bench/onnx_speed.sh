#!/usr/bin/env bash
# spmd eval --model onnx against ONNX Runtime on the same models, in the same run (issue 28's
# speed target: at least 1.0x on a LeNet- and a ResNet-style model, one rank, one device, one
# thread, per-device batch 512). Models: tests/support/torch_models.py and torch_zoo.py
# (PyTorch's exports; the zoo's at opset 17).
#   tools/bench/onnx_speed.sh [ROUNDS] [MODEL ...]   (build/ and tools/onnx/node_modules must exist)
# MODEL: lenet resnet (the default), mlp channels_last mobile lstm gru rnn, or a zoo model
# (vit attention convnext squeeze_excite groupnorm_silu sequence1d densenet squeezenet gated);
# "all" for every one; resnet18 (not in "all": a ResNet-18 at 224 x 224 on 256 random RGB
# images, batch 32 for both, from tools/bench/resnet18.py).
# Prints images/s of both and the ratio per model, rounds alternated (spmd, ORT, spmd, ...),
# and what each achieves in GFLOP/s (FLOPs per example from spmd model info: 2 per
# multiply-add of Conv, Gemm, MatMul) against one core's FMA peak (build/bench_fma_peak).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
rounds=${1:-3}
shift || true
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(lenet resnet)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
data=$root/build/test-data/fashion/test.h5
/usr/bin/python3 "$root/tests/support/torch_models.py" export "$work" >/dev/null 2>&1
/usr/bin/python3 "$root/tests/support/torch_zoo.py" export "$work" >/dev/null 2>&1
for z in $(/usr/bin/python3 "$root/tests/support/torch_zoo.py" names | cut -d' ' -f1); do cp "$work/$z.opset17.onnx" "$work/$z.onnx"; done
if [ "${models[0]}" = all ]; then
  models=(lenet resnet mlp channels_last mobile lstm gru rnn $(/usr/bin/python3 "$root/tests/support/torch_zoo.py" names | cut -d' ' -f1))
fi
for model in "${models[@]}"; do
  [ "$model" = resnet18 ] && /usr/bin/python3 "$root/tools/bench/resnet18.py" "$work/resnet18.onnx" "$work/resnet18.h5" >/dev/null 2>&1
done
peak=$("$root/build/bench_fma_peak" --json | /usr/bin/python3 -c "import json, sys; print(json.load(sys.stdin)['gflops'])")
echo "# FMA peak of one core: $peak GFLOP/s"
printf '%-14s %6s %12s %12s %8s %14s %14s\n' model round "spmd img/s" "ORT img/s" ratio "spmd GFLOP/s" "ORT GFLOP/s"
for model in "${models[@]}"; do
  model_data=$data batch=512
  [ "$model" = resnet18 ] && model_data=$work/resnet18.h5 batch=32
  # ONNX Runtime's batch: the model's input with $batch rows (its first dimension symbolic).
  dims=$(/usr/bin/python3 -c "
import onnx
d = onnx.load('$work/$model.onnx').graph.input[0].type.tensor_type.shape.dim
print(','.join(['$batch'] + [str(x.dim_value) for x in d[1:]]))")
  "$root/build/spmd" model info "$work/$model.onnx" --json "$work/$model.info.json" >/dev/null
  flops=$(/usr/bin/python3 -c "import json; print(json.load(open('$work/$model.info.json'))['flops_per_example'])")
  for ((r = 1; r <= rounds; r++)); do
    spmd=$("$root/build/spmd" eval --data "$model_data" --model onnx --weights "$work/$model.onnx" --per-device-batch "$batch" \
      --json "$work/e.json" --quiet >/dev/null && /usr/bin/python3 -c "import json; print(json.load(open('$work/e.json'))['examples_per_second'])")
    ort=$(node "$root/tools/onnx/ort_bench.js" "$work/$model.onnx" "$dims" |
      /usr/bin/python3 -c "import json, sys; print(json.load(sys.stdin)['images_per_second'])")
    /usr/bin/python3 -c "
s, o, f, p = $spmd, $ort, $flops, $peak
print('%-14s %6d %12.0f %12.0f %8.3f %7.1f (%3.0f%%) %7.1f (%3.0f%%)' % ('$model', $r, s, o, s / o, s * f / 1e9, 100 * s * f / 1e9 / p, o * f / 1e9, 100 * o * f / 1e9 / p))"
  done
done
