#!/usr/bin/env bash
# Load-time fusion of ONNX graphs (issue 28, section 5): BatchNormalization folded into the
# Conv or Gemm before it, Relu fused into the Conv or Gemm before it, GELU's five nodes as
# PyTorch exports them into one, where the intermediate tensors have no other reader; graphs built from PyTorch modules' parameters with the BN and
# Relu nodes PyTorch's own export would fold away (tests/support/onnx_fusion_models.py),
# PyTorch computing the unfused reference. Probabilities within 1e-5, the same argmax where
# the top two differ by more than 1e-4; the start-up line's node count says what was fused;
# the predictions file byte-identical on 1x1 and 2x2 ranks x devices. --dry-run's memory
# within 10 % of the measured peak RSS (issue 28, section 5; the runner's storage stays what the
# estimate's trial runs saw, run after run), the activations bounded by the chunk of rows the
# graph runs at a time; a run that does not fit refused up front, nothing written.
source "$(dirname "$0")/../support/cli_lib.sh"
PY=/usr/bin/python3
SUB=$WORK/sub.h5
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

run inputs 0 60 fashion_subset 300 "$SUB"
run build_models 0 120 $PY "$ROOT/tests/support/onnx_fusion_models.py" "$WORK" "$SUB"

compare() {
  $PY - "$WORK/$1.torch.npy" "$WORK/$1.1x1.h5" <<'PYEOF'
import sys, h5py, numpy as np
ref = np.load(sys.argv[1])
with h5py.File(sys.argv[2]) as f:
    probs, predicted = f["probabilities"][...], f["predicted"][...]
top2 = np.sort(ref, axis=1)[:, -2:]
clear = top2[:, 1] - top2[:, 0] > 1e-4
diff = float(np.abs(ref - probs).max())
wrong = int(((ref.argmax(1) != predicted) & clear).sum())
print(f"{sys.argv[1]}: max |diff| {diff:.2e} against PyTorch, {wrong} clear classes differ")
sys.exit(0 if diff < 1e-5 and wrong == 0 else 1)
PYEOF
}

# model, its node count after loading (the file's, less the nodes folded or fused)
for case in "fusable 6" "shared 6" "wide 5" "gelu 6" "gelu_read 12" "not_gelu 10"; do
  set -- $case
  run "eval_$1" 0 120 "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/$1.onnx" --predictions "$WORK/$1.1x1.h5"
  expect_in "$1: $2 nodes after loading" "opset 13, $2 nodes"
  run "compare_$1" 0 60 compare "$1"
  cat "$LAST_OUT"
  run "eval_${1}_2x2" 0 120 mpi 2 "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/$1.onnx" --devices 2 \
    --per-device-batch 29 --predictions "$WORK/$1.2x2.h5"
  run "same_bytes_$1" 0 10 cmp "$WORK/$1.1x1.h5" "$WORK/$1.2x2.h5"
done
# --dry-run's estimate against the peak RSS of the runs it describes, per-device batch 256 and
# 1024: neither run above its estimate by more than 10 %, and what the larger batch adds (its
# batch buffers) within 10 % of what the estimate adds, give or take 1 MiB (the peak RSS of two
# runs of the same batch differs by up to 0.5 MiB: 0 added was read as -0.5 MiB). The graph runs a device batch in chunks
# that fit the cache, so the activations do not grow with the batch: 768 more rows of this
# model's (about 150 KiB a row) would add 110 MiB; the larger batch adds less than 20 MiB. (The
# estimate's prefetch allowance is an upper bound a 3000-row file does not fill.)
BIG=$WORK/big.h5
run inputs_big 0 60 fashion_subset 3000 "$BIG"
memory_estimate() {
  local batch est rss line=""
  for batch in 256 1024; do
    est=$("$SPMD" eval --data "$BIG" --model onnx --weights "$WORK/wide.onnx" --per-device-batch "$batch" --dry-run |
      sed -n 's/^# memory: rank 0 needs \([0-9.]*\) MiB.*/\1/p')
    rss=$(/usr/bin/time -f %M "$SPMD" eval --data "$BIG" --model onnx --weights "$WORK/wide.onnx" \
      --per-device-batch "$batch" --quiet 2>&1 >/dev/null | tail -1)
    echo "batch $batch: --dry-run says $est MiB, peak RSS $((rss / 1024)) MiB"
    line="$line $est $rss"
  done
  awk -v v="$line" 'BEGIN { split(v, a, " "); e1 = a[1]; r1 = a[2] / 1024; e2 = a[3]; r2 = a[4] / 1024
    printf "batch 1024 - 256: estimate %+.1f MiB, peak RSS %+.1f MiB\n", e2 - e1, r2 - r1
    exit !(r1 <= 1.1 * e1 && r2 <= 1.1 * e2 && (e2 - e1) >= 0.9 * (r2 - r1) - 1 && (e2 - e1) <= 1.1 * (r2 - r1) + 1 &&
           r2 - r1 < 20) }'
}
run memory_estimate 0 120 memory_estimate
cat "$LAST_OUT"

# A run that does not fit: ulimit -v set so that it leaves the run half of what --dry-run says
# it needs (measured under a first limit: what the process has mapped by then varies by
# machine). Refused before anything runs, the model's share named, no predictions file.
half_limit() {
  bash -c 'ulimit -v 780000; "$0" eval --data "$1" --model onnx --weights "$2" --per-device-batch 3000 --dry-run' \
    "$SPMD" "$BIG" "$WORK/wide.onnx" |
    sed -n 's/^# memory: rank 0 needs \([0-9.]*\) MiB.*ulimit -v leaves \([0-9.]*\) MiB.*/\1 \2/p' |
    awk 'NF == 2 { printf "%d\n", 780000 - ($2 - $1 / 2) * 1024; found = 1 } END { exit !found }'
}
run half_limit 0 60 half_limit
LIMIT=$(cat "$LAST_OUT")
run does_not_fit 1 60 bash -c 'ulimit -v "$4"; "$0" eval --data "$1" --model onnx --weights "$2" --per-device-batch 3000 \
  --predictions "$3"' "$SPMD" "$BIG" "$WORK/wide.onnx" "$WORK/unfit.h5" "$LIMIT"
expect_in "the refusal names what the model needs" "not enough memory for this run: rank 0 .* model [0-9.]+ MiB"
run does_not_fit_wrote_nothing 1 5 test -e "$WORK/unfit.h5"
finish
