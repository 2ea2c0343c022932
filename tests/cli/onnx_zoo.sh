#!/usr/bin/env bash
# spmd eval --model onnx on more kinds of classifiers users train, as PyTorch exports them at
# opsets 13 and 17 (tests/support/torch_zoo.py: a ViT with nn.TransformerEncoder and a class
# token, hand-written attention, a ConvNeXt block, a MobileNetV3-style squeeze-excite net with
# Hardswish, GroupNorm + SiLU, a Conv1d sequence net, DenseNet and SqueezeNet blocks, a gated MLP
# with chunk, normalize and where, attention written with torch.einsum). Against PyTorch's outputs (and ONNX Runtime's where
# installed): probabilities within 1e-4 and the same classes (but for ties within 1e-4); the
# predictions file byte-identical on 1x1 and 3x2 ranks x devices. A graph that mixes the rows
# of a batch is refused on every rank, naming the node, nothing written.
source "$(dirname "$0")/../support/cli_lib.sh"
source "$(dirname "$0")/../support/rank_exits.sh"
PY=/usr/bin/python3
SUB=$WORK/sub.h5
OUT=$WORK/out
RC=$WORK/rc
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
ZOO="$ROOT/tests/support/torch_zoo.py"
ORT_RUN="$ROOT/tools/onnx/ort_run.js"

run inputs 0 60 fashion_subset 401 "$SUB"
run torch_export 0 300 $PY "$ZOO" export "$WORK"
run torch_outputs 0 120 $PY "$ZOO" outputs "$WORK" "$SUB"
run names 0 30 $PY "$ZOO" names
mapfile -t MODELS < "$LAST_OUT"

compare() {  # NAME INPUT_SHAPE PREDICTIONS ONNX
  $PY - "$WORK" "$SUB" "$ORT_RUN" "$@" <<'PYEOF'
import os, sys, subprocess, h5py, numpy as np
work, sub, ort_run, name, shape, predictions, model = sys.argv[1:8]
with h5py.File(predictions) as f:
    probs, predicted = f["probabilities"][...], f["predicted"][...]
refs = {"PyTorch": np.load(f"{work}/{name}.torch.npy")}
if os.path.isdir(os.path.join(os.path.dirname(ort_run), "node_modules", "onnxruntime-node")):
    with h5py.File(sub) as f:
        x = f["images"][...].astype(np.float32) / np.float32(255)
    dims = [len(x)] + [int(d) for d in shape.split(",")]
    (x.transpose(0, 3, 1, 2) if dims[1] == 1 else x).reshape(dims).astype("<f4").tofile(f"{work}/{name}.in")
    subprocess.run(["node", ort_run, model, f"{work}/{name}.in", ",".join(map(str, dims)), f"{work}/{name}.ort"],
                   check=True, stdout=subprocess.DEVNULL)
    y = np.fromfile(f"{work}/{name}.ort", "<f4").reshape(len(x), -1)
    if name == "gated": y = np.exp(y)
    else: y = np.exp(y - y.max(1, keepdims=True)); y /= y.sum(1, keepdims=True)
    refs["ONNX Runtime"] = y
bad = False
for ref_name, ref in refs.items():
    top2 = np.sort(ref, axis=1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > 1e-4
    diff = float(np.abs(ref - probs).max())
    wrong = int(((ref.argmax(1) != predicted) & clear).sum())
    print(f"{os.path.basename(model)} vs {ref_name}: max |diff| {diff:.2e}, {wrong} of {len(probs)} classes differ")
    bad = bad or diff > 1e-4 or wrong > 0
sys.exit(1 if bad else 0)
PYEOF
}

for entry in "${MODELS[@]}"; do
  m=${entry% *}
  shape=${entry#* }
  for opset in 13 17; do
    model="$WORK/$m.opset$opset.onnx"
    run "eval_${m}_$opset" 0 120 "$SPMD" eval --data "$SUB" --model onnx --weights "$model" --predictions "$WORK/$m.$opset.h5"
    expect_in "eval_${m}_$opset counts every example" " pad +[0-9]+ +401 "
    run "compare_${m}_$opset" 0 60 compare "$m" "$shape" "$WORK/$m.$opset.h5" "$model"
    cat "$LAST_OUT"
  done
  run "eval_${m}_3x2" 0 180 mpi 3 "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/$m.opset17.onnx" --devices 2 \
    --per-device-batch 23 --strategy infinite-pad --predictions "$WORK/$m.3x2.h5"
  run "${m}_same_bytes" 0 10 cmp "$WORK/$m.17.h5" "$WORK/$m.3x2.h5"
done

# The same models on the GPU (needs one; skipped visibly without): --backend auto runs each on
# the GPU, or on the CPU where the CUDA executor lacks one of its ops (saying which); the
# probabilities within 1e-5 of the CPU's and the same classes.
if "$SPMD" info --backend cuda >/dev/null 2>&1; then
  gpu_close() {
    $PY - "$1" "$2" <<'PYEOF'
import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1]), h5py.File(sys.argv[2])
pa, pb = a["probabilities"][...], b["probabilities"][...]
top2 = np.sort(pa, axis=1)[:, -2:]
clear = top2[:, 1] - top2[:, 0] > 2e-5
d = float(np.abs(pa - pb).max())
wrong = int(((a["predicted"][...] != b["predicted"][...]) & clear).sum())
print(f"{sys.argv[2]}: max |diff| {d:.2e} from the CPU's, {wrong} classes differ")
sys.exit(0 if d <= 1e-5 and wrong == 0 else 1)
PYEOF
  }
  for entry in "${MODELS[@]}"; do
    m=${entry% *}
    run "eval_${m}_gpu" 0 120 "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/$m.opset17.onnx" --backend auto \
      --predictions "$WORK/$m.gpu.h5"
    grep -o "backend auto: --model onnx runs on the CPU ([^)]*)" "$LAST_OUT" || echo "$m: on the GPU"
    run "${m}_gpu_vs_cpu" 0 30 gpu_close "$WORK/$m.17.h5" "$WORK/$m.gpu.h5"
    cat "$LAST_OUT"
  done
else
  echo "SKIP onnx_zoo_on_cuda: no GPU here (spmd info --backend cuda fails)"
fi

# Binary classifiers with one score per example (PyTorch's BCEWithLogitsLoss habit): a logit
# [batch, 1], a sigmoid probability [batch, 1], a logit squeezed to [batch]. Class 1's
# probability within 1e-6 of PyTorch's, the two probabilities summing to 1, the same bytes on
# 1x1 and 2x2 ranks x devices, the start-up line saying how the score is read.
run binary_models 0 120 $PY - "$WORK" "$SUB" <<'PYEOF'
import sys, numpy as np, h5py, torch
from torch import nn
work, sub = sys.argv[1:3]
class Logit(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.fc = nn.Conv2d(1, 4, 3), nn.Linear(4 * 26 * 26, 1)
    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).flatten(1))
class Probability(Logit):
    def forward(self, x):
        return torch.sigmoid(super().forward(x))
class Squeezed(Logit):
    def forward(self, x):
        return super().forward(x).squeeze(1)
with h5py.File(sub) as f, h5py.File(f"{work}/binary.h5", "w") as g:
    g["images"] = f["images"][...]
    g["labels"] = (f["labels"][...] >= 5).astype(np.int64)  # Fashion-MNIST: footwear and bags vs the rest
x = torch.from_numpy(h5py.File(f"{work}/binary.h5")["images"][...].astype(np.float32) / 255).permute(0, 3, 1, 2).contiguous()
for name, cls in (("logit", Logit), ("probability", Probability), ("squeezed", Squeezed)):
    torch.manual_seed(3)
    m = cls().eval()
    torch.onnx.export(m, torch.zeros(2, 1, 28, 28), f"{work}/binary_{name}.onnx", opset_version=13, input_names=["input"],
                      output_names=["output"], dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    with torch.no_grad():
        y = m(x).reshape(-1)
    np.save(f"{work}/binary_{name}.torch.npy", (y if name == "probability" else torch.sigmoid(y)).numpy())
PYEOF
binary_compare() {
  $PY - "$1" "$2" <<'PYEOF'
import sys, h5py, numpy as np
ref = np.load(sys.argv[2])
with h5py.File(sys.argv[1]) as f:
    p, predicted = f["probabilities"][...], f["predicted"][...]
d, s = float(np.abs(p[:, 1] - ref).max()), float(np.abs(p.sum(1) - 1).max())
clear = np.abs(ref - 0.5) > 1e-6
wrong = int(((predicted == 1) != (ref > 0.5))[clear].sum())
print(f"{sys.argv[1]}: P(class 1) max |diff| {d:.2e}, |P0 + P1 - 1| <= {s:.1e}, {wrong} classes differ")
sys.exit(0 if p.shape[1] == 2 and d <= 1e-6 and s <= 1e-6 and wrong == 0 else 1)
PYEOF
}
for b in logit probability squeezed; do
  run "eval_binary_$b" 0 60 "$SPMD" eval --data "$WORK/binary.h5" --model onnx --weights "$WORK/binary_$b.onnx" \
    --predictions "$WORK/binary_$b.1x1.h5"
  expect_in "the start-up line says the one score is class 1's" "one score per example: a binary classifier"
  run "compare_binary_$b" 0 60 binary_compare "$WORK/binary_$b.1x1.h5" "$WORK/binary_$b.torch.npy"
  cat "$LAST_OUT"
  run "eval_binary_${b}_2x2" 0 120 mpi 2 "$SPMD" eval --data "$WORK/binary.h5" --model onnx --weights "$WORK/binary_$b.onnx" \
    --devices 2 --per-device-batch 29 --predictions "$WORK/binary_$b.2x2.h5"
  run "binary_${b}_same_bytes" 0 10 cmp "$WORK/binary_$b.1x1.h5" "$WORK/binary_$b.2x2.h5"
done
run eval_binary_probability_reading 0 60 "$SPMD" eval --data "$WORK/binary.h5" --model onnx \
  --weights "$WORK/binary_probability.onnx" --dry-run
expect_in "a Sigmoid at the end is read as the probability" "probabilities \(as the file says: the graph ends in Sigmoid"
refuse binary_labels_beyond 1 "label [0-9], outside \[0, 2\) \(classes = 2\)" \
  "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/binary_logit.onnx" --predictions "$OUT/p.h5"

# A graph whose rows are not independent (features centred by the batch's mean: ReduceMean over
# axis 0) is refused at load on every rank, naming the first node whose row 0 changes.
run mixing_model 0 60 $PY - "$WORK" <<'PYEOF'
import sys, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto as T
w = numpy_helper.from_array(np.random.default_rng(1).normal(size=(784, 10)).astype(np.float32), "w")
g = helper.make_graph([helper.make_node("Flatten", ["x"], ["f"]),
                       helper.make_node("ReduceMean", ["f"], ["m"], axes=[0], keepdims=1),
                       helper.make_node("Sub", ["f", "m"], ["centred"], name="centre_by_batch"),
                       helper.make_node("MatMul", ["centred", "w"], ["y"])], "mixing",
                      [helper.make_tensor_value_info("x", T.FLOAT, ["batch", 28, 28, 1])],
                      [helper.make_tensor_value_info("y", T.FLOAT, ["batch", 10])], [w])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), f"{sys.argv[1]}/mixing.onnx")
PYEOF
refuse mixing_rows 2 "mixing.onnx' mixes the rows of a batch: .*first at node 'centre_by_batch' \(Sub\)" \
  "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/mixing.onnx" --predictions "$OUT/p.h5"
run mixing_info 0 60 "$SPMD" model info "$WORK/mixing.onnx"
expect_in "spmd model info says eval would refuse it, and why" "spmd eval refuses it: .*mixes the rows of a batch"
# Statistics over the whole batch that random rows beside row 0 reveal only by chance (a row
# whose maximum is below row 0's leaves x / x.max() unchanged): scaled by the batch's maximum,
# shifted by its minimum (ReduceMax / ReduceMin over every axis), and a dynamic quantization's
# range written out by hand (Max - Min: the DynamicQuantizeLinear op itself runs an example at a time).
run batch_statistics 0 60 $PY - "$WORK" <<'PYEOF'
import sys, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto as T
w = numpy_helper.from_array(np.random.default_rng(1).normal(size=(784, 10)).astype(np.float32), "w")
n = helper.make_node
for name, nodes in (("batch_max", [n("ReduceMax", ["f"], ["s"], keepdims=1), n("Div", ["f", "s"], ["h"], name="scale_by_batch")]),
                    ("batch_min", [n("ReduceMin", ["f"], ["s"], keepdims=1), n("Sub", ["f", "s"], ["h"], name="scale_by_batch")]),
                    ("batch_range", [n("ReduceMax", ["f"], ["hi"], keepdims=1), n("ReduceMin", ["f"], ["lo"], keepdims=1),
                                     n("Sub", ["hi", "lo"], ["s"]), n("Div", ["f", "s"], ["h"], name="scale_by_batch")])):
    g = helper.make_graph([n("Flatten", ["x"], ["f"])] + nodes + [n("MatMul", ["h", "w"], ["y"])], name,
                          [helper.make_tensor_value_info("x", T.FLOAT, ["batch", 28, 28, 1])],
                          [helper.make_tensor_value_info("y", T.FLOAT, ["batch", 10])], [w])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), f"{sys.argv[1]}/{name}.onnx")
PYEOF
for m in batch_max batch_min batch_range; do
  refuse "mixing_$m" 2 "$m.onnx' mixes the rows of a batch: .*first at node '(scale_by_batch|s|hi|lo)'" \
    "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/$m.onnx" --predictions "$OUT/p.h5"
done
finish
