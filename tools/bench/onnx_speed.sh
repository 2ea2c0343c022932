#!/usr/bin/env bash
# spmd eval --model onnx against ONNX Runtime on the same models, in the same run (issue 28's
# speed target: at least 1.0x on a LeNet- and a ResNet-style model, one rank, one device, one
# thread, per-device batch 512). Models: tests/support/torch_models.py (PyTorch's export).
#   tools/bench/onnx_speed.sh [ROUNDS]     (build/ and tools/onnx/node_modules must exist)
# Prints images/s of both and the ratio per model, rounds alternated (spmd, ORT, spmd, ...),
# and what each achieves in GFLOP/s (FLOPs per example from spmd model info: 2 per
# multiply-add of Conv, Gemm, MatMul) against one core's FMA peak (build/bench_fma_peak).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
rounds=${1:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
data=$root/build/test-data/fashion/test.h5
/usr/bin/python3 "$root/tests/support/torch_models.py" export "$work"
peak=$("$root/build/bench_fma_peak" --json | /usr/bin/python3 -c "import json, sys; print(json.load(sys.stdin)['gflops'])")
echo "# FMA peak of one core: $peak GFLOP/s"
printf '%-8s %6s %12s %12s %8s %14s %14s\n' model round "spmd img/s" "ORT img/s" ratio "spmd GFLOP/s" "ORT GFLOP/s"
for model in lenet resnet; do
  "$root/build/spmd" model info "$work/$model.onnx" --json "$work/$model.info.json" >/dev/null
  flops=$(/usr/bin/python3 -c "import json; print(json.load(open('$work/$model.info.json'))['flops_per_example'])")
  for ((r = 1; r <= rounds; r++)); do
    spmd=$("$root/build/spmd" eval --data "$data" --model onnx --weights "$work/$model.onnx" --per-device-batch 512 \
      --json "$work/e.json" --quiet >/dev/null && /usr/bin/python3 -c "import json; print(json.load(open('$work/e.json'))['examples_per_second'])")
    ort=$(node "$root/tools/onnx/ort_bench.js" "$work/$model.onnx" 512,1,28,28 |
      /usr/bin/python3 -c "import json, sys; print(json.load(sys.stdin)['images_per_second'])")
    /usr/bin/python3 -c "
s, o, f, p = $spmd, $ort, $flops, $peak
print('%-8s %6d %12.0f %12.0f %8.3f %7.1f (%3.0f%%) %7.1f (%3.0f%%)' % ('$model', $r, s, o, s / o, s * f / 1e9, 100 * s * f / 1e9 / p, o * f / 1e9, 100 * o * f / 1e9 / p))"
  done
done
