#!/usr/bin/env bash
# spmd eval --model onnx on three-channel images, against PyTorch: every other test's images
# have one channel, where NHWC and NCHW are the same bytes and a channel axis cannot be read
# wrongly. A CIFAR-style PyTorch CNN (NCHW input [batch, 3, 32, 32], BatchNorm, pooling), its
# first layer weighing the channels apart, on 37 images stored as h5py users store them:
#  - uint8 NHWC [32, 32, 3] (transposed to NCHW, scaled by 1/255), with and without
#    per-channel --input-mean / --input-std (torchvision's Normalize: on the channel axis);
#  - float32 NCHW [3, 32, 32] as a PyTorch DataLoader gives them (fed as stored), on 2 ranks x 2
#    devices with a per-device batch that divides nothing;
#  - the same net behind a Transpose, as a Keras-style NHWC model [batch, 32, 32, 3] (fed as
#    stored; the statistics on the last axis);
# each within 1e-4 of PyTorch's probabilities, the same classes. The generator checks that
# reading the channels or the statistics reversed would miss PyTorch by over 10x that. NCHW data
# for the NHWC model is refused naming both shapes.
source "$(dirname "$0")/../support/cli_lib.sh"
source "$(dirname "$0")/../support/rank_exits.sh"
OUT=$WORK/out
RC=$WORK/rc
PY=/usr/bin/python3

make_rgb() {
  $PY - "$WORK" <<'PYEOF'
import sys, h5py, numpy as np, onnx, torch, torch.nn as nn
from onnx import helper, TensorProto as T
work = sys.argv[1]
torch.manual_seed(0)
net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                    nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                    nn.Linear(32, 10)).eval()
with torch.no_grad():
    net[1].weight.uniform_(0.5, 1.5); net[1].bias.uniform_(-0.2, 0.2)
    net[1].running_mean.uniform_(-0.2, 0.2); net[1].running_var.uniform_(0.5, 2)
    net[0].weight[:, 0] *= 3; net[0].weight[:, 2] *= -2  # red weighs up, blue down
torch.onnx.export(net, torch.zeros(1, 3, 32, 32), f"{work}/cifar.onnx", input_names=["input"], output_names=["logits"],
                  dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}}, opset_version=13)
m = onnx.load(f"{work}/cifar.onnx")
m.graph.node.insert(0, helper.make_node("Transpose", ["nhwc"], ["input"], perm=[0, 3, 1, 2]))
del m.graph.input[:]
m.graph.input.append(helper.make_tensor_value_info("nhwc", T.FLOAT, ["batch", 32, 32, 3]))
onnx.save(m, f"{work}/cifar_nhwc.onnx")

rng = np.random.default_rng(1)
n = 37
x = rng.integers(0, 256, (n, 32, 32, 3)).astype(np.uint8)
x[:, :, :16, 0] = rng.integers(200, 256, (n, 32, 16))  # a bright red left half: channels differ
y = rng.integers(0, 10, n)
with h5py.File(f"{work}/nhwc_u8.h5", "w") as f:
    f["images"], f["labels"] = x, y
xf = x.astype(np.float32) / np.float32(255)
with h5py.File(f"{work}/nchw_f32.h5", "w") as f:
    f["images"], f["labels"] = xf.transpose(0, 3, 1, 2), y
mean, std = np.array([0.49, 0.48, 0.45], np.float32), np.array([0.25, 0.24, 0.26], np.float32)
def probs(nhwc):
    with torch.no_grad():
        return torch.softmax(net(torch.from_numpy(nhwc.transpose(0, 3, 1, 2).copy())), 1).numpy()
plain, normed = probs(xf), probs((xf - mean) / std)
np.save(f"{work}/plain.npy", plain)
np.save(f"{work}/normed.npy", normed)
for wrong, what in ((probs(xf[..., ::-1].copy()), "channels reversed"), (probs((xf - mean[::-1]) / std[::-1]), "statistics reversed")):
    gap = np.abs(wrong - (plain if what == "channels reversed" else normed)).max()
    print(f"{what}: {gap:.2e} from PyTorch")
    assert gap > 1e-3, f"the net does not tell {what} apart (10x the tolerance): the test could not fail"
PYEOF
}

compare() {  # PREDICTIONS TORCH_NPY
  $PY - "$@" <<'PYEOF'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1]) as f:
    probs, predicted = f["probabilities"][...], f["predicted"][...]
ref = np.load(sys.argv[2])
diff = float(np.abs(ref - probs).max())
# PyTorch's float kernels sum in a host-dependent order (oneDNN or OpenBLAS by instruction set):
# a class counts where its top two lie further apart than the probabilities' tolerance.
top2 = np.sort(ref, axis=1)[:, -2:]
wrong = int(((ref.argmax(1) != predicted) & (top2[:, 1] - top2[:, 0] > 1e-4)).sum())
print(f"{sys.argv[1]} vs PyTorch: max |diff| {diff:.2e}, {wrong} of {len(probs)} classes with a top two 1e-4 apart differ")
sys.exit(1 if diff > 1e-4 or wrong > 0 or len(probs) != len(ref) else 0)
PYEOF
}

NORM=(--input-mean 0.49,0.48,0.45 --input-std 0.25,0.24,0.26)
run make_rgb 0 300 make_rgb
cat "$LAST_OUT"

run nhwc_u8 0 120 "$SPMD" eval --data "$WORK/nhwc_u8.h5" --model onnx --weights "$WORK/cifar.onnx" --predictions "$WORK/a.h5"
expect_in "nhwc_u8: the start-up line says the transposition" "from stored NHWC \[32, 32, 3\] transposed to NCHW"
run nhwc_u8_vs_torch 0 60 compare "$WORK/a.h5" "$WORK/plain.npy"
cat "$LAST_OUT"

run nhwc_u8_normed 0 120 "$SPMD" eval --data "$WORK/nhwc_u8.h5" --model onnx --weights "$WORK/cifar.onnx" "${NORM[@]}" \
  --predictions "$WORK/b.h5"
expect_in "nhwc_u8_normed: the start-up line says the normalisation" "transposed to NCHW, normalised by --input-mean / --input-std"
run nhwc_u8_normed_vs_torch 0 60 compare "$WORK/b.h5" "$WORK/normed.npy"
cat "$LAST_OUT"

run nchw_f32_2x2 0 180 mpi 2 "$SPMD" eval --data "$WORK/nchw_f32.h5" --model onnx --weights "$WORK/cifar.onnx" "${NORM[@]}" \
  --devices 2 --per-device-batch 7 --strategy infinite-pad --predictions "$WORK/c.h5"
expect_in "nchw_f32: fed as stored" "input 'input' \[batch, 3, 32, 32\], normalised"
expect_in "nchw_f32: every example counted once" "every example counted exactly once: total 37 = 37 in the file"
run nchw_f32_vs_torch 0 60 compare "$WORK/c.h5" "$WORK/normed.npy"
cat "$LAST_OUT"

run nhwc_model 0 120 "$SPMD" eval --data "$WORK/nhwc_u8.h5" --model onnx --weights "$WORK/cifar_nhwc.onnx" "${NORM[@]}" \
  --predictions "$WORK/d.h5"
expect_not_in "nhwc_model: fed as stored, not transposed" "transposed to NCHW"
run nhwc_model_vs_torch 0 60 compare "$WORK/d.h5" "$WORK/normed.npy"
cat "$LAST_OUT"

refuse nchw_for_nhwc_model 2 "holds samples of shape \[3, 32, 32\]; the ONNX model .*takes input 'nhwc' \[batch, 32, 32, 3\]" \
  "$SPMD" eval --data "$WORK/nchw_f32.h5" --model onnx --weights "$WORK/cifar_nhwc.onnx" --predictions "$OUT/p.h5"
finish
