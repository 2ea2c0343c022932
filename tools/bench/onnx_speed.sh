#!/usr/bin/env bash
# spmd eval --model onnx against ONNX Runtime on the same models, in the same run (issue 28's
# speed target: at least 1.0x on a LeNet- and a ResNet-style model, one rank, one device, one
# thread, per-device batch 512). Models: tests/support/torch_models.py (PyTorch's export).
#   tools/bench/onnx_speed.sh [ROUNDS]     (build/ and tools/onnx/node_modules must exist)
# Prints images/s of both and the ratio per model, rounds alternated (spmd, ORT, spmd, ...).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
rounds=${1:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
data=$root/build/test-data/fashion/test.h5
/usr/bin/python3 "$root/tests/support/torch_models.py" export "$work"
printf '%-8s %6s %14s %14s %8s\n' model round "spmd img/s" "ORT img/s" ratio
for model in lenet resnet; do
  for ((r = 1; r <= rounds; r++)); do
    spmd=$("$root/build/spmd" eval --data "$data" --model onnx --weights "$work/$model.onnx" --per-device-batch 512 \
      --json "$work/e.json" --quiet >/dev/null && /usr/bin/python3 -c "import json; print(json.load(open('$work/e.json'))['examples_per_second'])")
    ort=$(node "$root/tools/onnx/ort_bench.js" "$work/$model.onnx" 512,1,28,28 |
      /usr/bin/python3 -c "import json, sys; print(json.load(sys.stdin)['images_per_second'])")
    /usr/bin/python3 -c "print('%-8s %6d %14.0f %14.0f %8.3f' % ('$model', $r, $spmd, $ort, $spmd / $ort))"
  done
done
