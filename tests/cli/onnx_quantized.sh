#!/usr/bin/env bash
# spmd eval --model onnx on quantized models (tests/support/quantized_models.py: a CNN trained
# briefly in PyTorch, exported, and quantized as onnxruntime's quantize_static writes it, QDQ and
# QOperator, with calibrated uint8 activations and int8 per-channel weights; an MLP as
# quantize_dynamic writes it; the CNN quantized by PyTorch itself, eager mode with fbgemm's qconfig, and
# exported by torch.onnx.export, and a residual net quantized by PyTorch's FX graph mode (a zero
# point passed through an Identity): against PyTorch's quantized models too). Against ONNX Runtime (npm's onnxruntime-node, with all its graph
# optimisations: its integer kernels, and with none: each node as ONNX defines it):
# probabilities within 1e-5, the same classes (a QDQ graph optimised, whose fused integer kernels
# round otherwise than its nodes: a mean within 2e-4, the clear classes; integer kernels that may
# saturate on a CPU without VNNI skipped there); the float export beside them. A dynamically
# quantized model takes its scale from the whole batch: eval runs it one example per run and
# says so, and matches ONNX Runtime run an example at a time (the whole batch at once gives
# other results: checked, so that the comparison means something). The predictions file is
# byte-identical on 1x1 and 3x2 ranks x devices; spmd model info counts the quantized models'
# integer multiply-adds as the float model's.
source "$(dirname "$0")/../support/cli_lib.sh"
source "$(dirname "$0")/../support/rank_exits.sh"
PY=/usr/bin/python3
SUB=$WORK/sub.h5
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
ORT_RUN="$ROOT/tools/onnx/ort_run.js"

run inputs 0 60 fashion_subset 1003 "$SUB"
run quantize 0 180 $PY "$ROOT/tests/support/quantized_models.py" "$WORK" "$SUB"

for m in float qdq qoperator dynamic torch_quantized fx_residual; do
  run "eval_$m" 0 120 "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/$m.onnx" --predictions "$WORK/$m.h5"
  expect_in "eval_$m counts every example" " pad +[0-9]+ +1003 "
  run "eval_${m}_3x2" 0 180 mpi 3 "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/$m.onnx" --devices 2 \
    --per-device-batch 37 --strategy infinite-pad --predictions "$WORK/$m.3x2.h5"
  run "${m}_same_bytes" 0 10 cmp "$WORK/$m.h5" "$WORK/$m.3x2.h5"
done
# spmd's integer kernels give the same bytes at every instruction-set level this host allows
# (SPMD_MAX_CPU_ISA; cli.cpu_levels does the float models): the answer of an AVX2-only host.
for cap in avx2 portable; do
  for m in qdq qoperator dynamic torch_quantized fx_residual; do
    SPMD_MAX_CPU_ISA=$cap run "eval_${m}_$cap" 0 120 "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/$m.onnx" \
      --predictions "$WORK/$m.$cap.h5"
    run "${m}_${cap}_same_bytes" 0 10 cmp "$WORK/$m.h5" "$WORK/$m.$cap.h5"
  done
done
run start_line_qdq 0 60 "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/qdq.onnx" --dry-run
expect_not_in "a statically quantized model runs whole batches" "one example per run"
run start_line_dynamic 0 60 "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/dynamic.onnx" --dry-run
expect_in "a dynamically quantized model runs an example at a time, and says why" \
  "node 'q1' \(DynamicQuantizeLinear\) takes its scale from the whole batch \(quantize_dynamic\): one example per run"

flops_of() { sed -n 's/.*compute *\([0-9.]*\) MFLOP.*/\1/p' "$LAST_OUT"; }
run info_float 0 60 "$SPMD" model info "$WORK/float.onnx"
FLOAT_FLOPS=$(flops_of)
for m in qdq qoperator; do
  run "info_$m" 0 60 "$SPMD" model info "$WORK/$m.onnx"
  run "info_${m}_flops" 0 5 test "$(flops_of)" = "$FLOAT_FLOPS" -a "$FLOAT_FLOPS" != 0.000
done
echo "MFLOP per example: $FLOAT_FLOPS (float, qdq and qoperator alike)"

# NAME ORT_LEVEL ROWS_PER_RUN (0: the whole file in one run) WANT (same | differs) [MEAN MARGIN]:
# "same" is probabilities within 1e-5 and every class the same; with MEAN and MARGIN, a mean
# |diff| below MEAN and the classes the same wherever ONNX Runtime's top two lie MARGIN apart
# (a QDQ graph's float ops sum in another order than ONNX Runtime's, and a value on a rounding
# boundary of the next QuantizeLinear then moves by one step).
compare() {
  $PY - "$WORK" "$ORT_RUN" "$@" <<'PYEOF'
import os, sys, subprocess, h5py, numpy as np
work, ort_run, name, level, per, want = sys.argv[1:7]
mean_tol, margin = (float(sys.argv[7]), float(sys.argv[8])) if len(sys.argv) > 8 else (None, 0.0)
with h5py.File(f"{work}/{name}.h5") as f:
    probs, predicted = f["probabilities"][...], f["predicted"][...]
env = {**os.environ, "ORT_GRAPH_OPTIMIZATION": level}
if per != "0":
    env["ORT_ROWS_PER_RUN"] = per
shape = open(f"{work}/shape").read().strip()
subprocess.run(["node", ort_run, f"{work}/{name}.onnx", f"{work}/data.in", shape, f"{work}/{name}.ort"], check=True,
               stdout=subprocess.DEVNULL, env=env)
y = np.fromfile(f"{work}/{name}.ort", "<f4").reshape(len(probs), -1)
y = np.exp(y - y.max(1, keepdims=True))
y /= y.sum(1, keepdims=True)
top2 = np.sort(y, axis=1)[:, -2:]
diff, mean = float(np.abs(y - probs).max()), float(np.abs(y - probs).mean())
differ = int((y.argmax(1) != predicted).sum())
clear = int(((y.argmax(1) != predicted) & (top2[:, 1] - top2[:, 0] > margin)).sum())
print(f"{name} vs ONNX Runtime (optimisations {level}, rows per run {'all' if per == '0' else per}): max |diff| {diff:.2e}, "
      f"mean {mean:.2e}, {differ} of {len(probs)} classes differ ({clear} with a top two {margin} apart)")
same = clear == 0 and (mean < mean_tol if mean_tol is not None else diff <= 1e-5)
sys.exit(0 if same == (want == "same") else 1)
PYEOF
}
# PyTorch's quantized models, a statistical check only. PyTorch's answer moves with the host (the
# float model is trained by host-dependent float kernels, and the engine differs: fbgemm, oneDNN,
# QNNPACK), and its kernels requantize otherwise than the ONNX graph it exports, so a value on a
# rounding boundary lands one step away and moves a probability by up to ~0.07. Bits and every
# class are judged against ONNX Runtime and the ops' definitions below
# (compare_torch_quantized_{all,disabled}: within 1e-5, the same classes). Here: each PyTorch
# variant (tests/support/quantized_models.py ran those this host has) on average within MEAN of
# spmd and, given a float export of the same model, ten times closer than the float model is;
# the classes the same wherever every variant picks one class with its top two 0.02 apart, but
# for 0.5% of those: over 6 seeds x 3000 images here one such class differed (top two 0.094
# apart, every variant agreeing), the issue-54 host had one in 1003; a wrong model fails on the
# mean (compare_torch_refuses_float). The variants' own spread is printed beside it.
compare_torch() {  # NAME (the PyTorch model) H5 (spmd's predictions) MEAN [FLOAT_H5]
  $PY - "$WORK" "$@" <<'PYEOF'
import glob, sys, h5py, numpy as np
work, name, h5, mean_tol = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
paths = sorted(glob.glob(f"{work}/{name}.torch.*.npy"))
refs = np.stack([np.load(p) for p in paths])  # [variants, N, C]
with h5py.File(f"{work}/{h5}.h5") as f:
    probs, predicted = f["probabilities"][...], f["predicted"][...]
top2 = np.sort(refs, axis=2)[:, :, -2:]
classes = refs.argmax(2)
settled = (classes == classes[0]).all(0) & (top2[:, :, 1] - top2[:, :, 0] > 0.02).all(0)
wrong = int((settled & (classes[0] != predicted)).sum())
allowed = int(0.005 * settled.sum())
means = np.abs(refs - probs).mean((1, 2))
float_mean = None
if len(sys.argv) > 5:
    with h5py.File(f"{work}/{sys.argv[5]}.h5") as g:
        float_mean = float(np.abs(refs - g["probabilities"][...]).mean((1, 2)).min())
spread = float(np.abs(refs - refs[0]).max())
print(f"{h5} vs PyTorch's quantized {name} ({len(paths)} kernel variants: "
      f"{' '.join(p.split('.torch.')[1][:-4] for p in paths)}; they differ by up to {spread:.2e} among themselves, "
      f"{int((~(classes == classes[0]).all(0)).sum())} classes move): mean |diff| {means.max():.2e}"
      + (f" (the float model's: {float_mean:.2e})" if float_mean is not None else "")
      + f", max {float(np.abs(refs - probs).max()):.2e}, {wrong} of {int(settled.sum())} settled classes differ "
      f"(at most {allowed})")
sys.exit(0 if wrong <= allowed and means.max() < mean_tol and (float_mean is None or means.max() < float_mean / 10) else 1)
PYEOF
}
run compare_torch_quantized 0 60 compare_torch torch_quantized torch_quantized 3e-4 float
cat "$LAST_OUT"
run compare_fx_residual 0 60 compare_torch fx_residual fx_residual 1e-3
cat "$LAST_OUT"
# The check can fail: the float model's predictions are not the quantized model's.
run compare_torch_refuses_float 1 60 compare_torch torch_quantized float 3e-4
cat "$LAST_OUT"

if [ -d "$ROOT/tools/onnx/node_modules/onnxruntime-node" ]; then
  # ONNX Runtime's uint8 x int8 kernels (MLAS) multiply-add byte pairs with VPMADDUBSW on CPUs
  # without VNNI (AVX2; AVX-512 before Cascade Lake), which saturates a pair's sum at 32767
  # (255 x 127 x 2 does not fit): there its integer kernels are not the ops' definitions. On such
  # a host the runs that take those kernels (every quantized model optimised, the QOperator and
  # dynamic models at any level) are skipped, visibly; the QDQ graphs unoptimised (float ops
  # between QuantizeLinear and DequantizeLinear) and spmd's own bytes at every instruction-set
  # level (above) still hold there.
  # SPMD_TEST_NO_VNNI=1 takes this branch on any host (tests/README.md: an AVX2 host's run).
  if grep -qwE 'avx512_vnni|avx_vnni' /proc/cpuinfo && [ "${SPMD_TEST_NO_VNNI:-0}" != 1 ]; then ort_u8s8_exact=1
  else ort_u8s8_exact=0; fi
  ort_integer_kernels() {  # NAME LEVEL: whether ONNX Runtime runs NAME at LEVEL by its integer kernels
    [ "$1" != float ] && { [ "$2" = all ] || [ "$1" = qoperator ] || [ "$1" = dynamic ]; }
  }
  skip_saturating() {  # NAME LEVEL: true (and says so) where that run is not exact on this CPU
    if [ $ort_u8s8_exact = 0 ] && ort_integer_kernels "$1" "$2"; then
      echo "SKIP compare_$1_$2: this CPU has no VNNI, so ONNX Runtime's U8S8 kernels may saturate (VPMADDUBSW)"
      return 0
    fi
    return 1
  }
  # A QDQ graph optimised is ONNX Runtime's integer kernels (the QDQ pairs fused into QLinearConv:
  # an exact integer sum, then one rescale), where spmd computes each node as ONNX defines it (the
  # float Conv of dequantized values, then QuantizeLinear): the same wherever no value lies on a
  # rounding boundary, which depends on the model (here trained by the host's float kernels; an
  # AVX2-capped OpenBLAS trained one with a single step's difference, 1.6e-4). So those are
  # judged by the mean and the clear classes; unoptimised, every node is compared exactly.
  for m in float qdq qoperator torch_quantized fx_residual; do
    for level in all disabled; do
      skip_saturating "$m" "$level" && continue
      if [ $m = fx_residual ] || { [ $level = all ] && [ $m != float ] && [ $m != qoperator ]; }; then
        run "compare_${m}_$level" 0 60 compare "$m" "$level" 0 same 2e-4 0.01
      else
        run "compare_${m}_$level" 0 60 compare "$m" "$level" 0 same
      fi
      cat "$LAST_OUT"
    done
  done
  if ! skip_saturating dynamic all; then
    run compare_dynamic_per_example 0 120 compare dynamic all 1 same
    cat "$LAST_OUT"
  fi
  run compare_dynamic_whole_batch 0 60 compare dynamic all 0 differs
  cat "$LAST_OUT"
else
  echo "SKIP compare: no ONNX Runtime here (tools/onnx/node_modules; tools/setup.sh installs it)"
fi
finish
