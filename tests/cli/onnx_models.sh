#!/usr/bin/env bash
# spmd eval --model onnx on classifiers users train, exported the way users export them:
# PyTorch's (Debian's python3-torch, torch.onnx.export, opset 13, dynamic batch; a LeNet, a
# ResNet with BatchNorm and skip connections, an MLP with LayerNorm and GELU ending in
# LogSoftmax, a channels-last net with Concat, Sigmoid, AvgPool and Softmax, a MobileNet-style
# net with depthwise and grouped strided convolutions, ReLU6, a padded max-pool and Hardswish; and
# recurrent ones over the image's rows: an LSTM, a bidirectional 2-layer GRU, a ReLU RNN, also
# exported at opset 14; builders in tests/support/torch_models.py) and spmd's own exports (spmd export). Against PyTorch's
# outputs and ONNX Runtime's: probabilities within 1e-4, the same argmax except where the top
# two lie within 1e-4; the predictions file byte-identical on 1x1 and 3x2 ranks x devices
# and other batch sizes; refusals that name the file, the op, the input or the shape, or the
# damaged tensor (too few or too many values for its shape, a dimension past any model).
source "$(dirname "$0")/../support/cli_lib.sh"
source "$(dirname "$0")/../support/rank_exits.sh"
PY=/usr/bin/python3
SUB=$WORK/sub.h5
OUT=$WORK/out
RC=$WORK/rc
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
ORT_RUN="$ROOT/tools/onnx/ort_run.js"
GPU_MODELS="lenet resnet mlp channels_last mobile"
RECURRENT="lstm gru rnn"  # CPU only: the CUDA backend lacks LSTM, GRU and RNN
MODELS="$GPU_MODELS $RECURRENT"

run inputs 0 60 fashion_subset 1003 "$SUB"
run torch_export 0 120 $PY "$ROOT/tests/support/torch_models.py" export "$WORK"
run torch_outputs 0 120 $PY "$ROOT/tests/support/torch_models.py" outputs "$WORK" "$SUB"

for m in $MODELS; do
  run "eval_$m" 0 120 "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/$m.onnx" --predictions "$WORK/$m.1x1.h5"
  expect_in "eval_$m counts every example" " pad +[0-9]+ +1003 "
  run "eval_${m}_3x2" 0 180 mpi 3 "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/$m.onnx" --devices 2 \
    --per-device-batch 37 --strategy infinite-pad --predictions "$WORK/$m.3x2.h5"
  run "eval_${m}_same_bytes" 0 10 cmp "$WORK/$m.1x1.h5" "$WORK/$m.3x2.h5"
done
run start_line_lenet 0 60 "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/lenet.onnx" --dry-run
expect_in "the start-up line says the NHWC -> NCHW transposition" "stored NHWC \[28, 28, 1\] transposed to NCHW"
expect_in "the start-up line says how the output is read" "logits \(as the file says: the graph ends in Gemm"
run start_line_mlp 0 60 "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/mlp.onnx" --dry-run
expect_in "LogSoftmax is read as log-probabilities" "log-probabilities \(as the file says: the graph ends in LogSoftmax"

compare() {
  $PY - "$WORK" "$SUB" "$ORT_RUN" "$1" <<'PYEOF'
import os, sys, subprocess, h5py, numpy as np
work, sub, ort_run, name = sys.argv[1:5]
base = name.split("_opset")[0]  # an export at another opset: its model's PyTorch outputs and input shape
with h5py.File(f"{work}/{name}.1x1.h5") as f:
    probs, predicted = f["probabilities"][...], f["predicted"][...]
refs = {"PyTorch": np.load(f"{work}/{base}.torch.npy")}
if os.path.isdir(os.path.join(os.path.dirname(ort_run), "node_modules", "onnxruntime-node")):
    with h5py.File(sub) as f:
        x = f["images"][...].astype(np.float32) / np.float32(255)
    shape = {"lenet": (len(x), 1, 28, 28), "resnet": (len(x), 1, 28, 28), "mlp": (len(x), 28, 28),
             "channels_last": (len(x), 28, 28, 1), "mobile": (len(x), 1, 28, 28), "lstm": (len(x), 28, 28),
             "gru": (len(x), 28, 28), "rnn": (len(x), 28, 28)}[base]
    (x.transpose(0, 3, 1, 2) if shape[1] == 1 else x).reshape(shape).astype("<f4").tofile(f"{work}/{name}.in")
    subprocess.run(["node", ort_run, f"{work}/{name}.onnx", f"{work}/{name}.in", ",".join(map(str, shape)),
                    f"{work}/{name}.ort"], check=True, stdout=subprocess.DEVNULL)
    y = np.fromfile(f"{work}/{name}.ort", "<f4").reshape(len(x), -1)
    if base == "mlp": y = np.exp(y)
    elif base != "channels_last": y = np.exp(y - y.max(1, keepdims=True)); y /= y.sum(1, keepdims=True)
    refs["ONNX Runtime"] = y
bad = False
for ref_name, ref in refs.items():
    top2 = np.sort(ref, axis=1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > 1e-4
    diff = float(np.abs(ref - probs).max())
    wrong = int(((ref.argmax(1) != predicted) & clear).sum())
    print(f"{name} vs {ref_name}: max |diff| {diff:.2e}, argmax differs on {int((ref.argmax(1) != predicted).sum())} "
          f"of {len(probs)} ({wrong} with a clear top class)")
    bad = bad or diff > 1e-4 or wrong > 0
sys.exit(1 if bad else 0)
PYEOF
}
for m in $MODELS; do
  run "compare_$m" 0 60 compare "$m"
  cat "$LAST_OUT"
done

# Other opsets, against PyTorch and ONNX Runtime as above: the MLP at 17 (LayerNorm as one
# LayerNormalization node), the recurrent models at 14 (where LSTM and GRU gained `layout`), and
# the opsets older tutorials pin, 9 and 11.
for m in mlp_opset17 lstm_opset14 gru_opset14 rnn_opset14 lenet_opset9 resnet_opset9 gru_opset9 mobile_opset11 \
  mlp_opset11 lstm_opset11; do
  run "eval_$m" 0 120 "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/$m.onnx" --predictions "$WORK/$m.1x1.h5"
  run "compare_$m" 0 60 compare "$m"
  cat "$LAST_OUT"
done

# spmd's own exports read back: the same classes as the native models, probabilities within 1e-5.
run ensemble 0 300 mpi 2 "$SPMD" ensemble --train "$SUB" --test "$SUB" --train-limit 300 --test-limit 64 \
  --conv-features 4,4 --dense-features 16 --checkpoint "$WORK/ck.h5" --quiet
run export_ck 0 60 "$SPMD" export --weights "$WORK/ck.h5" --out "$WORK/ck.onnx"
run eval_cnn 0 60 "$SPMD" eval --data "$SUB" --model cnn --weights "$WORK/ck.h5" --predictions "$WORK/native.h5"
run eval_ck_onnx 0 60 mpi 2 "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/ck.onnx" --predictions "$WORK/ck_onnx.h5"
expect_in "an exported ensemble's Mean of softmaxes reads as probabilities" "probabilities \(as the file says: the graph ends in Softmax"
round_trip() {
  $PY - "$WORK/native.h5" "$WORK/ck_onnx.h5" <<'PYEOF'
import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1]), h5py.File(sys.argv[2])
d = float(np.abs(a["probabilities"][...] - b["probabilities"][...]).max())
same = bool((a["predicted"][...] == b["predicted"][...]).all())
print(f"exported ensemble through --model onnx vs --model cnn: max |diff| {d:.2e}, same classes: {same}")
sys.exit(0 if d < 1e-5 and same else 1)
PYEOF
}
run round_trip 0 30 round_trip
cat "$LAST_OUT"

# Normalisation outside the graph: --input-mean / --input-std on the LeNet give the classes of
# the same LeNet with Sub and Div in front of its graph, probabilities within 1e-5.
normalised_lenet() {
  $PY - "$WORK" <<'PYEOF'
import sys, onnx
from onnx import helper, numpy_helper
import numpy as np
work = sys.argv[1]
m = onnx.load(f"{work}/lenet.onnx")
g = m.graph
old = g.input[0].name
for node in g.node:
    for k, name in enumerate(node.input):
        if name == old:
            node.input[k] = "normalised"
g.initializer.extend([numpy_helper.from_array(np.array([0.286], np.float32), "mean"),
                      numpy_helper.from_array(np.array([0.353], np.float32), "std")])
g.node.insert(0, helper.make_node("Div", ["centred", "std"], ["normalised"]))
g.node.insert(0, helper.make_node("Sub", [old, "mean"], ["centred"]))
onnx.checker.check_model(m)
onnx.save(m, f"{work}/lenet_norm.onnx")
PYEOF
}
run normalised_lenet 0 60 normalised_lenet
run eval_norm_outside 0 120 "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/lenet.onnx" --input-mean 0.286 \
  --input-std 0.353 --predictions "$WORK/norm_outside.h5"
expect_in "the start-up line says the inputs are normalised" "normalised by --input-mean / --input-std"
run eval_norm_inside 0 120 "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/lenet_norm.onnx" --predictions "$WORK/norm_inside.h5"
same_within() {
  $PY - "$1" "$2" "$3" <<'PYEOF'
import sys, h5py, numpy as np
a, b, tol = h5py.File(sys.argv[1]), h5py.File(sys.argv[2]), float(sys.argv[3])
d = float(np.abs(a["probabilities"][...] - b["probabilities"][...]).max())
same = bool((a["predicted"][...] == b["predicted"][...]).all())
print(f"max |diff| {d:.2e}, same classes: {same}")
sys.exit(0 if d <= tol and same else 1)
PYEOF
}
run norm_same 0 30 same_within "$WORK/norm_outside.h5" "$WORK/norm_inside.h5" 1e-5
cat "$LAST_OUT"

# The same on the GPU (needs one; skipped visibly without): every model and the normalised
# LeNet within 1e-5 of the CPU's probabilities, the same classes; a graph the CUDA backend cannot
# run (a Cast of float data to int64, the LSTM) is refused by --backend cuda naming the node and
# the op, and --backend auto runs it on the CPU, saying so. Without a GPU, --backend cuda gives its usual error.
if "$SPMD" info --backend cuda >/dev/null 2>&1; then
  for m in $GPU_MODELS; do
    run "eval_${m}_cuda" 0 120 "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/$m.onnx" --backend cuda \
      --predictions "$WORK/$m.cuda.h5"
    run "${m}_cuda_vs_cpu" 0 30 same_within "$WORK/$m.1x1.h5" "$WORK/$m.cuda.h5" 1e-5
    cat "$LAST_OUT"
  done
  run eval_norm_cuda 0 120 "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/lenet.onnx" --input-mean 0.286 \
    --input-std 0.353 --backend cuda --predictions "$WORK/norm_cuda.h5"
  run norm_cuda_vs_cpu 0 30 same_within "$WORK/norm_outside.h5" "$WORK/norm_cuda.h5" 1e-5
  run cast_model 0 60 $PY -c "
import onnx
from onnx import helper, TensorProto as T
g = helper.make_graph([helper.make_node('Flatten', ['x'], ['f']), helper.make_node('Cast', ['f'], ['c'], name='c', to=T.INT64),
                       helper.make_node('Cast', ['c'], ['y'], to=T.FLOAT)], 'c',
    [helper.make_tensor_value_info('x', T.FLOAT, ['batch', 28, 28, 1])], [helper.make_tensor_value_info('y', T.FLOAT, ['batch', 784])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)]), '$WORK/cast.onnx')"
  run cast_cuda nonzero 60 "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/cast.onnx" --backend cuda
  expect_in "--backend cuda names the node and what it cannot run" "node 'c' \\(Cast giving int64 from float data, which the CUDA backend does not run\\)"
  run cast_auto 0 60 "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/cast.onnx" --backend auto
  expect_in "--backend auto runs it on the CPU, saying why" "--backend auto: --model onnx runs on the CPU \\(node 'c' \\(Cast giving int64"
  run lstm_cuda nonzero 60 "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/lstm.onnx" --backend cuda
  expect_in "--backend cuda names the recurrent node it lacks" "node '/lstm/LSTM' \\(LSTM, which the CUDA backend lacks\\)"
  run lstm_auto 0 120 "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/lstm.onnx" --backend auto \
    --predictions "$WORK/lstm.auto.h5"
  expect_in "--backend auto runs the LSTM on the CPU" "--backend auto: --model onnx runs on the CPU \\(node '/lstm/LSTM' \\(LSTM"
  run lstm_auto_same_bytes 0 10 cmp "$WORK/lstm.1x1.h5" "$WORK/lstm.auto.h5"
else
  echo "SKIP onnx_on_cuda: no GPU here (spmd info --backend cuda fails)"
  run cuda_without_gpu nonzero 60 "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/lenet.onnx" --backend cuda
  expect_in "--backend cuda without a GPU: the usual error" "--backend cuda but no GPU is usable here"
fi
run output_override 0 60 "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/mlp.onnx" --model-output logits --dry-run
expect_in "--model-output overrides the graph's LogSoftmax" "output 'output' logits \(--model-output\)"

# Flat samples ([784], as sklearn's MNIST) for the LeNet's [1, 28, 28]: read row-major, the
# bits of the images as stored; for a 3-channel input ([3, 16, 16] from [768]) HWC and CHW are
# both plausible: refused.
run flat_data 0 60 $PY - "$SUB" "$WORK" <<'PYEOF'
import sys, h5py, numpy as np, onnx
from onnx import helper, TensorProto as T
sub, work = sys.argv[1:3]
with h5py.File(sub) as f, h5py.File(f"{work}/flat.h5", "w") as g, h5py.File(f"{work}/flat768.h5", "w") as h:
    g["images"] = f["images"][...].reshape(len(f["images"]), -1)
    g["labels"] = f["labels"][...]
    h["images"] = np.zeros((5, 768), np.uint8)
    h["labels"] = np.zeros(5, np.int64)
g = helper.make_graph([helper.make_node("Flatten", ["x"], ["f"]), helper.make_node("Slice", ["f", "s", "e", "a"], ["y"])], "rgb",
                      [helper.make_tensor_value_info("x", T.FLOAT, ["batch", 3, 16, 16])],
                      [helper.make_tensor_value_info("y", T.FLOAT, ["batch", 10])],
                      [helper.make_tensor(n, T.INT64, [1], [v]) for n, v in (("s", 0), ("e", 10), ("a", 1))])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), f"{work}/rgb.onnx")
PYEOF
run eval_flat 0 60 "$SPMD" eval --data "$WORK/flat.h5" --model onnx --weights "$WORK/lenet.onnx" --predictions "$WORK/flat_pred.h5"
expect_in "the start-up line says how flat samples are read" "from stored flat \[784\], read row-major"
run flat_same_bits 0 30 same_within "$WORK/lenet.1x1.h5" "$WORK/flat_pred.h5" 0
refuse flat_channels 1 "holds samples of shape \[768\]; the ONNX model .*takes input 'x' \[batch, 3, 16, 16\]" \
  "$SPMD" eval --data "$WORK/flat768.h5" --model onnx --weights "$WORK/rgb.onnx" --predictions "$OUT/p.h5"

# Refusals: every rank fails within seconds naming the culprit, nothing written.
refuse model_output_not_onnx 2 "--model-output, --input-mean and --input-std apply to --model onnx" \
  "$SPMD" eval --data "$SUB" --model zero --model-output logits --predictions "$OUT/p.h5"
refuse bad_mean 1 "--input-mean / --input-std take a number or a comma-separated list" \
  "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/lenet.onnx" --input-mean 0.5,x --predictions "$OUT/p.h5"
refuse mean_channels 2 "3 values of --input-mean / --input-std match no channel dimension" \
  "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/lenet.onnx" --input-mean 0.4,0.5,0.6 --predictions "$OUT/p.h5"
make_bad_models() {
  $PY - "$WORK" <<'PYEOF'
import sys, onnx
from onnx import numpy_helper
from onnx import helper, TensorProto as T
work = sys.argv[1]
def save(name, nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), f"{work}/{name}.onnx")
x = helper.make_tensor_value_info("x", T.FLOAT, ["batch", 28, 28, 1])
y = helper.make_tensor_value_info("y", T.FLOAT, ["batch", 10])
save("unsupported", [helper.make_node("GlobalLpPool", ["x"], ["e"]),
                     helper.make_node("Det", ["e"], ["y"])], [x], [y])
save("dynamic", [helper.make_node("Flatten", ["x"], ["y"])],
     [helper.make_tensor_value_info("x", T.FLOAT, ["batch", "h", 29, 1])], [y])
save("wrong_input", [helper.make_node("Flatten", ["x"], ["y"])],
     [helper.make_tensor_value_info("x", T.FLOAT, ["batch", 3, 32, 32])], [y])
open(f"{work}/garbage.onnx", "wb").write(b"this is not a protobuf \xff\xfe")
# PyTorch's LeNet with its largest weight damaged as a file can be: its bytes cut in half, one
# byte too many, a dimension past any model or negative, its values moved to float_data one short.
# The ONNX checker passes all but the negative dimension; each must be refused, not padded.
def damaged(name, change):
    m = onnx.load(f"{work}/lenet.onnx")
    change(max(m.graph.initializer, key=lambda t: len(t.raw_data)))
    onnx.save(m, f"{work}/{name}.onnx")
def float_data_one_short(t):
    values = numpy_helper.to_array(t).ravel()[:-1]
    t.ClearField("raw_data")
    t.float_data.extend(values.tolist())
damaged("half_weight", lambda t: setattr(t, "raw_data", t.raw_data[:len(t.raw_data) // 2]))
damaged("odd_bytes", lambda t: setattr(t, "raw_data", t.raw_data + b"\0"))
damaged("huge_dim", lambda t: t.dims.__setitem__(0, 1 << 40))
damaged("negative_dim", lambda t: t.dims.__setitem__(0, -3))
damaged("float_data_short", float_data_one_short)
# Attributes or shapes no run can take: a Conv's group that divides no channel count; a fixed
# input dimension of 2^38; an output shape of 2^41 elements computed at run time.
def conv_group_7(m):
    next(a for a in m.graph.node[0].attribute if a.name == "group").i = 7
def edited(name, change):
    m = onnx.load(f"{work}/lenet.onnx")
    change(m)
    onnx.save(m, f"{work}/{name}.onnx")
edited("bad_group", conv_group_7)
# Window attributes ONNX does not allow (ONNX Runtime refuses them all): they divided by zero,
# wrote outside a buffer, read past the weights or built stride^2 phase planes.
def attr(node, name, values):
    def change(m):
        next(a for a in m.graph.node[node].attribute if a.name == name).ints[:] = values
    return change
edited("zero_stride", attr(0, "strides", [0, 1]))
edited("negative_pad", attr(0, "pads", [-1, 0, 0, 0]))
edited("zero_dilation", attr(0, "dilations", [1, 0]))
edited("kernel_not_weights", attr(0, "kernel_shape", [7, 7]))
edited("pool_zero_kernel", attr(2, "kernel_shape", [0, 2]))
edited("huge_stride", attr(0, "strides", [1 << 30, 1 << 30]))
# A pool's pad as wide as its kernel: a window wholly in the padding (ONNX Runtime refuses it;
# a pad of 2^20 had spmd pool 2^20 rows of nothing for seconds before a later node failed).
edited("pool_pad_of_kernel", attr(2, "pads", [0, 2, 0, 0]))
m = onnx.load(f"{work}/channels_last.onnx")
perm = next(n for n in m.graph.node if n.op_type == "Transpose").attribute[0]
perm.ints[:] = [0, 1, 1, 2]
onnx.save(m, f"{work}/perm_twice.onnx")
# The same through a 1-D Conv (its own path for a length's one value) and DepthToSpace (b^2).
n = helper.make_node
rows = helper.make_tensor("rows", T.INT64, [3], [-1, 28, 28])
save("conv1d_zero_stride", [n("Flatten", ["x"], ["f"]), n("Reshape", ["f", "rows"], ["r"]),
                            n("Conv", ["r", "w1"], ["c"], strides=[0]), n("ReduceMean", ["c"], ["y"], axes=[2], keepdims=0)],
     [x], [helper.make_tensor_value_info("y", T.FLOAT, ["batch", 10])],
     [rows, helper.make_tensor("w1", T.FLOAT, [10, 28, 3], [0.01] * 840)])
blocks = helper.make_tensor("blocks", T.INT64, [4], [-1, 16, 7, 7])
save("huge_blocksize", [n("Flatten", ["x"], ["f"]), n("Reshape", ["f", "blocks"], ["r"]),
                        n("DepthToSpace", ["r"], ["d"], blocksize=1 << 62), n("ReduceMean", ["d"], ["y"], axes=[2, 3], keepdims=0)],
     [x], [helper.make_tensor_value_info("y", T.FLOAT, ["batch", 4])], [blocks])
edited("huge_input", lambda m: setattr(m.graph.input[0].type.tensor_type.shape.dim[2], "dim_value", 1 << 38))
n = helper.make_node
save("huge_output", [n("Flatten", ["x"], ["f"]), n("Shape", ["f"], ["s"]), n("Mul", ["s", "big"], ["t"]),
                     n("ConstantOfShape", ["t"], ["c"]), n("ReduceSum", ["c"], ["r"], keepdims=0),
                     n("Add", ["f", "r"], ["y"])], [x], [helper.make_tensor_value_info("y", T.FLOAT, ["batch", 784])],
     [helper.make_tensor("big", T.INT64, [2], [1 << 20, 1 << 21])])
PYEOF
}
run bad_models 0 60 make_bad_models
refuse unsupported_ops 2 "uses ops spmd does not run: Det \(1 node\), GlobalLpPool \(1 node\)" \
  "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/unsupported.onnx" --predictions "$OUT/p.h5"
refuse dynamic_dim 2 "input 'x' \[batch, -1, 29, 1\] \(-1: symbolic\) cannot take its sizes from the data's samples \[28, 28, 1\]" \
  "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/dynamic.onnx" --predictions "$OUT/p.h5"
refuse wrong_input 2 "holds samples of shape \[28, 28, 1\]; the ONNX model .*takes input 'x' \[batch, 3, 32, 32\]" \
  "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/wrong_input.onnx" --predictions "$OUT/p.h5"
refuse not_onnx 2 "garbage.onnx' is not an ONNX model" \
  "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/garbage.onnx" --predictions "$OUT/p.h5"
# Damaged tensors and shapes, and attributes no run can take: the file, then the culprit.
# (The list on descriptor 3: mpirun reads standard input.)
while read -r name culprit <&3; do
  refuse "$name" 2 "$name.onnx'$culprit" \
    "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/$name.onnx" --predictions "$OUT/p.h5"
done 3<<'EOF'
half_weight : tensor '[^']+' holds [0-9]+ values, but its shape \[[0-9, ]+\] needs [0-9]+
float_data_short : tensor '[^']+' holds [0-9]+ values, but its shape
odd_bytes : tensor '[^']+' has [0-9]+ bytes of raw data, not a whole number of its 4-byte elements
huge_dim : tensor '[^']+' has the shape \[1099511627776, [0-9, ]+\], more elements than any model holds
negative_dim .*(negative|-3)
bad_group : ONNX node '[^']+' \(Conv\): group 7 does not divide
huge_input : its input '[^']+' \[1, 1, 274877906944, 28\] \(a trial batch\) needs more memory than this rank can allocate
huge_output : ONNX node '[^']*' \(ConstantOfShape\): too large for this rank: a tensor of shape \[1048576, 1644167168\]: past 2\^40 elements
zero_stride : ONNX node '[^']+' \(Conv\): strides \[0, 1\]: each must be at least 1 and at most 2\^24
negative_pad : ONNX node '[^']+' \(Conv\): pads \[-1, 0, 0, 0\]: each must be at least 0
zero_dilation : ONNX node '[^']+' \(Conv\): dilations \[1, 0\]: each must be at least 1
kernel_not_weights : ONNX node '[^']+' \(Conv\): kernel_shape \[7, 7\] is not the weights' \[6, 1, 5, 5\] spatial shape
pool_zero_kernel : ONNX node '[^']+' \(MaxPool\): kernel_shape \[0, 2\]: each must be at least 1
pool_pad_of_kernel : ONNX node '[^']+' \(MaxPool\): pads \[0, 2, 0, 0\]: each must be smaller than the kernel along its axis \(kernel_shape \[2, 2\]\)
huge_stride : ONNX node '[^']+' \(Conv\): strides \[1073741824, 1073741824\]: each must be at least 1 and at most 2\^24
perm_twice : ONNX node '[^']+' \(Transpose\): perm \[0, 1, 1, 2\] is not a permutation of the dimensions
conv1d_zero_stride : ONNX node '[^']+' \(Conv\): strides \[0\]: each must be at least 1
huge_blocksize : ONNX node '[^']+' \(DepthToSpace\): blocksize \[4611686018427387904\]: each must be at least 1 and at most 2\^24
EOF
finish
