#!/usr/bin/env bash
# spmd eval --model onnx on PyTorch exports made the other ways users make them
# (tests/support/torch_export_styles.py): without dynamic_axes, so the file fixes the batch of
# the example input (1, 64; a Keras-style NHWC model at 32) and, where the model reads
# x.size(0), a Reshape holds it too; a file that fixes a batch its graph does not hold
# (torch.flatten); a fully convolutional net with dynamic height and width (the sizes taken from
# the data; refused where they cannot be); two outputs; the logits second of three, read with
# --onnx-output (the other outputs' nodes not run; an unknown name refused listing them); a [batch, 1, classes] output; LocalResponseNorm, which PyTorch exports
# as an If on a shape around a 3-D AveragePool; uint8 images in, scaled inside the graph (fed the
# stored bytes; a scale or float features refused); text classifiers on stored token ids (a GRU; an
# EmbeddingBag, exported as a Loop); F.interpolate (Resize: nearest, bilinear,
# bicubic with align_corners); ConvTranspose 1-D and 2-D (strided, output_padding, grouped,
# dilated); a float16 model (weights, input and output float16, computed in float32: against
# PyTorch on the same rounded values); Conv3d and MaxPool3d; PixelShuffle / PixelUnshuffle; torch.std,
# var and var_mean (their element count as int64 shape arithmetic); F.grid_sample in each mode
# (bilinear / zeros, nearest / border with align_corners, bicubic / reflection); max_pool2d's
# indices (MaxPool's Indices output); x[:, mask] with a boolean buffer (NonZero). Each against PyTorch's outputs: probabilities within 1e-4, the
# same classes (but for ties within 1e-4); the predictions file byte-identical on 1x1 and 3x2
# ranks x devices with a per-device batch that is no multiple of the fixed one. Exports made
# without their weights (export_params=False) or in training mode are refused naming the option;
# exported with do_constant_folding=False, keep_initializers_as_inputs=True,
# export_modules_as_functions=True or the ATen fallback evaluate as PyTorch does;
# a float64 model (model.double()) runs in float32, within 1e-4 of PyTorch in float64.
source "$(dirname "$0")/../support/cli_lib.sh"
source "$(dirname "$0")/../support/rank_exits.sh"
OUT=$WORK/out
RC=$WORK/rc
PY=/usr/bin/python3
SUB=$WORK/sub.h5
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
STYLES="$ROOT/tests/support/torch_export_styles.py"

run inputs 0 60 fashion_subset 203 "$SUB"
run torch_export 0 300 $PY "$STYLES" export "$WORK"
run torch_outputs 0 120 $PY "$STYLES" outputs "$WORK" "$SUB"

compare() {  # PREDICTIONS TORCH_NPY
  $PY - "$@" <<'PYEOF'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1]) as f:
    probs, predicted = f["probabilities"][...], f["predicted"][...]
ref = np.load(sys.argv[2])
top2 = np.sort(ref, axis=1)[:, -2:]
clear = top2[:, 1] - top2[:, 0] > 1e-4
diff = float(np.abs(ref - probs).max())
wrong = int(((ref.argmax(1) != predicted) & clear).sum())
print(f"{sys.argv[1]} vs PyTorch: max |diff| {diff:.2e}, {wrong} of {len(probs)} classes differ")
sys.exit(1 if diff > 1e-4 or wrong > 0 else 0)
PYEOF
}

# name, then what the start-up line must say of its batch, then eval's options for it
check() {
  local m=$1 said=$2
  shift 2
  run "eval_$m" 0 120 "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/$m.onnx" --predictions "$WORK/$m.1x1.h5" "$@"
  expect_in "eval_$m counts every example" " pad +[0-9]+ +203 "
  expect_in "eval_$m: the start-up line says how the batch runs" "$said"
  run "compare_$m" 0 60 compare "$WORK/$m.1x1.h5" "$WORK/$m.torch.npy"
  cat "$LAST_OUT"
  run "eval_${m}_3x2" 0 180 mpi 3 "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/$m.onnx" --devices 2 \
    --per-device-batch 23 --strategy infinite-pad --predictions "$WORK/$m.3x2.h5" "$@"
  run "${m}_same_bytes" 0 10 cmp "$WORK/$m.1x1.h5" "$WORK/$m.3x2.h5"
}

check view_batch1 "the graph holds the batch size the file fixes: 1 row per run"
check view_batch64 "the graph holds the batch size the file fixes: 64 rows per run"
check keras_batch32 "input 'input' \[batch, 28, 28, 1\]; the graph holds the batch size the file fixes: 32 rows per run"
check flatten_batch8 "transposed to NCHW, output 'output'"
LAST_OUT=$WORK/eval_flatten_batch8.out
expect_not_in "flatten_batch8: a graph that holds no batch runs whole batches" "holds the batch size"
check two_outputs "output 'logits' logits \\(.*\\); eval reads the first of its 2 outputs \\(also 'embedding'\\): --onnx-output NAME reads another"
# (embedding, logits, aux): --onnx-output names the logits; the auxiliary head's nodes do not run.
check logits_second "output 'logits' \\(--onnx-output\\) logits \\(as the file says" --onnx-output logits
LAST_OUT=$WORK/eval_logits_second.out  # check ran other commands after eval
expect_not_in "logits_second: the chosen output alone, no word of others" "outputs \\(also"
nodes_of() { sed -n 's/.*opset [0-9]*, \([0-9]*\) nodes).*/\1/p' "$LAST_OUT" | head -1; }
run logits_second_all 0 60 "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/logits_second.onnx" --dry-run
expect_in "logits_second: unnamed, eval reads the first and names the others" \
  "output 'embedding' logits .*eval reads the first of its 3 outputs \\(also 'logits', 'aux'\\)"
ALL_NODES=$(nodes_of)
run logits_second_chosen 0 60 "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/logits_second.onnx" \
  --onnx-output logits --dry-run
CHOSEN_NODES=$(nodes_of)
run logits_second_fewer_nodes 0 5 test "${CHOSEN_NODES:-0}" -ge 1 -a "${CHOSEN_NODES:-0}" -lt "${ALL_NODES:-0}"
echo "logits_second: $ALL_NODES nodes for all outputs, $CHOSEN_NODES for 'logits'"
run logits_second_aux 0 60 "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/logits_second.onnx" \
  --onnx-output aux --dry-run
expect_in "--onnx-output aux: its LogSoftmax read as log-probabilities of 5 classes" \
  "output 'aux' \\(--onnx-output\\) log-probabilities \\(as the file says: the graph ends in LogSoftmax\\)"
refuse onnx_output_unknown 2 "ONNX model '.*logits_second.onnx' has no output 'scores'; its outputs: 'embedding', 'logits', 'aux'" \
  "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/logits_second.onnx" --onnx-output scores --predictions "$OUT/p.h5"
run no_partial_output 0 5 test ! -e "$OUT/p.h5"
refuse onnx_output_not_onnx 2 "--onnx-output, --model-output, --input-mean and --input-std apply to --model onnx" \
  "$SPMD" eval --data "$SUB" --model zero --onnx-output logits --predictions "$OUT/p.h5"
check token_output "output 'output' logits"
LAST_OUT=$WORK/eval_token_output.out  # check ran other commands after eval
expect_not_in "token_output: one output, no word of others" "outputs \\(also"
check lrn "output 'output' log-probabilities"
check interpolate "output 'output' logits"
check transposed "output 'output' logits"
check volume "output 'output' logits"
check pixel_shuffle "output 'output' logits"
check standardize "output 'output' logits"
for mode in bilinear nearest bicubic; do check "grid_sample_$mode" "output 'output' logits"; done
check pool_indices "output 'output' logits"
check mask_select "output 'output' logits"
check float16 "\[batch, 1, 28, 28\] from stored NHWC .*, float16: the features rounded to it, computed in float32"
check uint8_images "input 'input' \[batch, 28, 28, 1\], uint8: the stored values as they are"
refuse uint8_scaled 2 "--input-scale 1/255: the ONNX model's input 'input' is uint8, which takes the stored values as they are" \
  "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/uint8_images.onnx" --input-scale 1/255 --predictions "$OUT/p.h5"
run float_images 0 30 $PY -c "
import h5py, numpy as np
with h5py.File('$SUB') as f, h5py.File('$WORK/float.h5', 'w') as g:
    g['images'] = f['images'][...].astype(np.float32) / 255
    g['labels'] = f['labels'][...]"
refuse uint8_for_floats 2 "holds float32 features and the ONNX model's input 'input' is uint8: it takes stored integers" \
  "$SPMD" eval --data "$WORK/float.h5" --model onnx --weights "$WORK/uint8_images.onnx" --predictions "$OUT/p.h5"
check dynamic_hw "input 'input' \[batch, 1, 28, 28\] \(its symbolic sizes from the data's samples\) from stored NHWC"
run info_dynamic_hw 0 60 "$SPMD" model info "$WORK/dynamic_hw.onnx"
expect_in "spmd model info: eval takes the sizes from the data" "spmd eval takes height, width from the data's samples"
refuse rgb_for_gray 2 "input 'input' \[batch, 3, -1, -1\] \(-1: symbolic\) cannot take its sizes from the data's samples \[28, 28, 1\]" \
  "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/rgb_dynamic_hw.onnx" --predictions "$OUT/p.h5"

# Text classifiers: int32 token ids stored, an int64 input; nn.Embedding (Gather) + nn.GRU +
# Linear; nn.EmbeddingBag (mean of each row's embeddings; PyTorch exports a Loop over the
# bags) + Linear; one position's embedding per row, at the largest id (ArgMax of int64, as CLIP
# pools) or the last non-padding token (int64 Clip); RoBERTa's position ids (an int CumSum of the
# padding mask): fed the stored ids as they are; against
# PyTorch, the same bytes on both layouts.
run text_models 0 120 $PY - "$WORK" <<'PYEOF'
import sys, numpy as np, h5py, torch
from torch import nn
work = sys.argv[1]
class Text(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.gru, self.fc = nn.Embedding(100, 16), nn.GRU(16, 8, batch_first=True), nn.Linear(8, 4)
    def forward(self, ids):
        return self.fc(self.gru(self.emb(ids))[1][0])
class Bag(nn.Module):
    def __init__(self):
        super().__init__()
        self.bag, self.fc = nn.EmbeddingBag(100, 16), nn.Linear(16, 4)
    def forward(self, ids):
        return self.fc(torch.relu(self.bag(ids)))
class Pooled(nn.Module):  # one position's embedding per row, picked by index pairs as CLIP's text encoder does
    def __init__(self, last):
        super().__init__()
        self.last, self.emb, self.fc = last, nn.Embedding(100, 16), nn.Linear(16, 4)
    def forward(self, ids):
        h = self.emb(ids)
        at = ((ids != 0).sum(1) - 1).clamp(min=0) if self.last else ids.argmax(dim=-1)  # int64 Clip / ArgMax
        return self.fc(h[torch.arange(h.shape[0]), at])
class Positions(nn.Module):  # RoBERTa's position ids: padding_idx + the cumulative count of real tokens (int CumSum)
    def __init__(self):
        super().__init__()
        self.tok, self.pos, self.fc = nn.Embedding(100, 16, padding_idx=0), nn.Embedding(14, 16, padding_idx=1), nn.Linear(16, 4)
    def forward(self, ids):
        mask = ids.ne(0).int()
        positions = (torch.cumsum(mask, dim=1).type_as(mask) * mask).long() + 1
        return self.fc(torch.tanh(self.tok(ids) + self.pos(positions)).mean(1))
rng = np.random.default_rng(1)
ids = rng.integers(0, 100, size=(211, 12)).astype(np.int32)
ids[::3, 9:] = 0  # padded rows
with h5py.File(f"{work}/text.h5", "w") as f:
    f["features"], f["labels"] = ids, rng.integers(0, 4, size=211)
for name, make in (("text", Text), ("bag", Bag), ("argmax_token", lambda: Pooled(False)), ("last_token", lambda: Pooled(True)),
                   ("positions", Positions)):
    torch.manual_seed(5)
    m = make().eval()
    torch.onnx.export(m, torch.zeros(2, 12, dtype=torch.int64), f"{work}/{name}.onnx", input_names=["ids"], output_names=["logits"],
                      dynamic_axes={"ids": {0: "batch"}, "logits": {0: "batch"}}, opset_version=13)
    with torch.no_grad():
        np.save(f"{work}/{name}.torch.npy", torch.softmax(m(torch.from_numpy(ids).long()), 1).numpy())
PYEOF
for m in text bag argmax_token last_token positions; do
  run "eval_$m" 0 60 "$SPMD" eval --data "$WORK/text.h5" --model onnx --weights "$WORK/$m.onnx" --predictions "$WORK/$m.1x1.h5"
  expect_in "$m: the token ids are fed as stored" "input 'ids' \[batch, 12\], int64: the stored values as they are"
  run "compare_$m" 0 60 compare "$WORK/$m.1x1.h5" "$WORK/$m.torch.npy"
  cat "$LAST_OUT"
  run "eval_${m}_3x2" 0 120 mpi 3 "$SPMD" eval --data "$WORK/text.h5" --model onnx --weights "$WORK/$m.onnx" --devices 2 \
    --per-device-batch 23 --predictions "$WORK/$m.3x2.h5"
  run "${m}_same_bytes" 0 10 cmp "$WORK/$m.1x1.h5" "$WORK/$m.3x2.h5"
done

# --dry-run's memory: a fixed batch's run tensors are that batch's whatever the per-device batch;
# only the device batch's own buffers (features and labels, 784 * 4 + 4 bytes a row) grow.
for b in 64 200; do
  run "dry_fixed_$b" 0 60 "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/view_batch64.onnx" --dry-run \
    --per-device-batch $b --json "$WORK/dry$b.json"
done
run dry_fixed_memory 0 30 $PY -c "
import json, sys
a, b = (json.load(open(f'$WORK/dry{n}.json'))['per_rank'][0]['device_bytes'] for n in (64, 200))
print('device bytes', a, b); sys.exit(0 if b - a == 136 * (784 * 4 + 4) else 1)"
run info_fixed 0 60 "$SPMD" model info "$WORK/view_batch1.onnx"
expect_in "spmd model info: eval runs it" "spmd eval runs it"

# Exports that cannot evaluate, each refused saying which export option made it so: the
# weights left out (export_params=False: every weight an input without a value), and a
# module exported in training mode (BatchNormalization's and Dropout's training_mode).
run export_options 0 120 $PY - "$WORK" "$SUB" <<'PYEOF'
import sys, torch, torch.nn as nn
work = sys.argv[1]
torch.manual_seed(0)
net = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Dropout(0.3), nn.Flatten(), nn.Linear(2704, 10))
x, axes = torch.zeros(1, 1, 28, 28), {"input": {0: "batch"}}
torch.onnx.export(net.eval(), x, f"{work}/no_params.onnx", export_params=False, input_names=["input"], dynamic_axes=axes)
torch.onnx.export(net.train(), x, f"{work}/training.onnx", training=torch.onnx.TrainingMode.TRAINING,
                  input_names=["input"], dynamic_axes=axes)
# Export options that change the file, not the function: each evaluates as PyTorch does.
import h5py, numpy as np
net.eval()
variants = {"no_folding": dict(do_constant_folding=False), "initializers_as_inputs": dict(keep_initializers_as_inputs=True),
            "modules_as_functions": dict(export_modules_as_functions=True, opset_version=15),
            "aten_fallback": dict(operator_export_type=torch.onnx.OperatorExportTypes.ONNX_ATEN_FALLBACK)}
for name, options in variants.items():
    torch.onnx.export(net, x, f"{work}/{name}.onnx", input_names=["input"], dynamic_axes=axes, **options)
with h5py.File(sys.argv[2]) as f:
    images32 = torch.from_numpy(f["images"][...].astype(np.float32).transpose(0, 3, 1, 2) / 255)
with torch.no_grad():
    np.save(f"{work}/float.torch.npy", torch.softmax(net(images32), 1).numpy())
# And one in float64 (model.double()), against PyTorch in float64.
net = net.eval().double()
torch.onnx.export(net, x.double(), f"{work}/double.onnx", input_names=["input"], dynamic_axes=axes)
with h5py.File(sys.argv[2]) as f:
    images = torch.from_numpy(f["images"][...].astype(np.float64).transpose(0, 3, 1, 2) / 255)
with torch.no_grad():
    np.save(f"{work}/double.torch.npy", torch.softmax(net(images), 1).numpy())
PYEOF
refuse no_params 2 "has 5 inputs \('input', .*spmd eval feeds one .*exported with export_params=False\?" \
  "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/no_params.onnx" --predictions "$OUT/p.h5"
for v in no_folding initializers_as_inputs modules_as_functions aten_fallback; do
  run "eval_$v" 0 120 "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/$v.onnx" --predictions "$WORK/$v.1x1.h5"
  run "compare_$v" 0 60 compare "$WORK/$v.1x1.h5" "$WORK/float.torch.npy"
  cat "$LAST_OUT"
done
run eval_double 0 120 "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/double.onnx" --predictions "$WORK/double.1x1.h5"
expect_in "eval_double: the start-up line says float64 runs in float32" "float64: computed in float32"
run compare_double 0 60 compare "$WORK/double.1x1.h5" "$WORK/double.torch.npy"
cat "$LAST_OUT"
refuse training_mode 2 "\(BatchNormalization\): training_mode: only inference is supported \(exported with training=TrainingMode.TRAINING" \
  "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/training.onnx" --predictions "$OUT/p.h5"
finish
