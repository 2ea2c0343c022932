#!/usr/bin/env bash
# The CNN ensemble on images of other shapes than Fashion-MNIST's: the geometry comes from the
# data ([N, H, W, C] or [N, H, W]), the classes from the labels, the architecture from
# --conv-features / --dense-features. A learnable 32x32x3 set of 5 classes trains well above
# chance, with the same bits on 1 rank x 2 devices and 2 ranks x 1 device; eval rebuilds the
# model from the checkpoint alone; its ONNX export gives ONNX Runtime spmd's probabilities.
# Shapes the CNN cannot take are refused up front.
source "$(dirname "$0")/../support/cli_lib.sh"
py() { /usr/bin/python3 -c "$1"; }
S=$WORK/shapes
mkdir -p "$S"
run make_sets 0 60 /usr/bin/python3 - "$S" <<'PY'
import sys, h5py, numpy as np
d = sys.argv[1]
def colour_squares(n, seed):
    # Class k: a bright 8x8 square at one of five places, in colour channel k % 3, over noise.
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 5, n)
    x = rng.integers(0, 70, (n, 32, 32, 3)).astype(np.uint8)
    corners = [(2, 2), (2, 22), (22, 2), (22, 22), (12, 12)]
    for i, k in enumerate(y):
        r, c = corners[k]
        x[i, r:r + 8, c:c + 8, k % 3] = 230
    return x, y.astype(np.int64)
for name, n, seed in (("train", 640, 1), ("test", 203, 2)):
    x, y = colour_squares(n, seed)
    with h5py.File(f"{d}/rgb_{name}.h5", "w") as f:
        f.create_dataset("images", data=x)
        f.create_dataset("labels", data=y)
    with h5py.File(f"{d}/nchw_{name}.h5", "w") as f:  # PyTorch's layout
        f.create_dataset("images", data=x.transpose(0, 3, 1, 2))
        f.create_dataset("labels", data=y)
# Grey 30x26 images without a channel axis, 3 classes (the brighter half, or none).
rng = np.random.default_rng(3)
g = rng.random((96, 30, 26)).astype(np.float32) * 0.3
gy = rng.integers(0, 3, 96)
g[gy == 1, :15, :] += 0.6
g[gy == 2, 15:, :] += 0.6
with h5py.File(f"{d}/grey.h5", "w") as f:
    f.create_dataset("images", data=g)
    f.create_dataset("labels", data=gy.astype(np.int32))
# The same test rows, one of them huge but finite (what float32 holds): no forward carries it.
g[5] = 3e38
with h5py.File(f"{d}/grey_huge.h5", "w") as f:
    f.create_dataset("images", data=g)
    f.create_dataset("labels", data=gy.astype(np.int32))
with h5py.File(f"{d}/tiny.h5", "w") as f:
    f.create_dataset("images", data=np.zeros((8, 3, 3, 1), np.float32))
    f.create_dataset("labels", data=np.arange(8) % 2)
PY

ARCH=(--conv-features 8,16 --dense-features 32 --epochs 3 --batch-size 16 --learning-rate 0.05 --seed 4)
run rgb_1x2 0 300 mpi 1 "$SPMD" ensemble --train "$S/rgb_train.h5" --test "$S/rgb_test.h5" "${ARCH[@]}" --devices 2 \
  --json "$WORK/rgb_1x2.json" --checkpoint "$WORK/rgb.h5"
expect_in "the model is reported as resolved from the data" '# model 32x32x3 conv 8,16 dense 32 classes 5'
run rgb_2x1 0 300 mpi 2 "$SPMD" ensemble --train "$S/rgb_train.h5" --test "$S/rgb_test.h5" "${ARCH[@]}" --devices 1 \
  --json "$WORK/rgb_2x1.json"
run rgb_json 0 10 py "
import json
a, b = (json.load(open('$WORK/rgb_%s.json' % k)) for k in ('1x2', '2x1'))
m = a['model']
assert (m['height'], m['width'], m['channels'], m['classes']) == (32, 32, 3, 5), m
assert m['conv_features'] == [8, 16] and m['dense_features'] == [32], m
assert a['params_digest'] == b['params_digest'], (a['params_digest'], b['params_digest'])
assert a['epochs'][-1] == {**b['epochs'][-1], 'seconds': a['epochs'][-1]['seconds'], 'images_per_second': a['epochs'][-1]['images_per_second']}
acc = a['epochs'][-1]['test_accuracy']
assert acc >= 0.6, acc   # chance is 0.2
assert a['train']['examples'] == 640 and a['test']['examples'] == 203, (a['train'], a['test'])
print('test accuracy', acc)"
run rgb_eval 0 120 mpi 2 "$SPMD" eval --model cnn --weights "$WORK/rgb.h5" --data "$S/rgb_test.h5" --strategy pad \
  --per-device-batch 64 --json "$WORK/rgb_eval.json"
run rgb_eval_same 0 10 py "
import json
e, a = json.load(open('$WORK/rgb_eval.json')), json.load(open('$WORK/rgb_1x2.json'))
assert e['total'] == 203, e['total']
assert abs(e['accuracy'] - a['epochs'][-1]['test_accuracy']) < 1e-12, (e['accuracy'], a['epochs'][-1]['test_accuracy'])"
# Exported, the three-channel model runs in ONNX Runtime as in spmd (cli.export checks one
# channel only, where a convolution's input-channel order cannot be wrong).
run rgb_export 0 60 "$SPMD" export --weights "$WORK/rgb.h5" --out "$WORK/rgb.onnx"
run rgb_predictions 0 120 "$SPMD" eval --model cnn --weights "$WORK/rgb.h5" --data "$S/rgb_test.h5" \
  --predictions "$WORK/rgb_pred.h5"
run rgb_export_in_ort 0 120 /usr/bin/python3 - "$WORK" "$S/rgb_test.h5" "$(cd "$(dirname "$0")/../.." && pwd)/tools/onnx/ort_run.js" <<'PY'
import sys, subprocess, h5py, numpy as np
work, test, runner = sys.argv[1:4]
with h5py.File(test) as f:
    x = f["images"][...].astype(np.float32) / np.float32(255)
with h5py.File(f"{work}/rgb_pred.h5") as f:
    spmd = f["probabilities"][...]
def ort(images, tag):
    images.astype("<f4").tofile(f"{work}/{tag}.f32")
    subprocess.run(["node", runner, f"{work}/rgb.onnx", f"{work}/{tag}.f32", ",".join(map(str, images.shape)),
                    f"{work}/{tag}.out"], check=True, stdout=subprocess.DEVNULL)
    return np.fromfile(f"{work}/{tag}.out", "<f4").reshape(len(images), -1)
diff = np.abs(ort(x, "rgb") - spmd).max()
reversed_gap = np.abs(ort(x[..., ::-1].copy(), "bgr") - spmd).max()
print(f"max |ORT - spmd eval| {diff:.2e}; with the channels reversed {reversed_gap:.2e}")
sys.exit(0 if diff < 1e-5 and reversed_gap > 1e-3 else 1)
PY
cat "$LAST_OUT"

# One file holding /train/* and /test/*: the test keys say which is which.
run one_file 0 60 /usr/bin/python3 -c "
import h5py
with h5py.File('$S/both.h5', 'w') as out:
    for part in ('train', 'test'):
        with h5py.File('$S/rgb_%s.h5' % part, 'r') as f:
            out['%s/x' % part] = f['images'][()]
            out['%s/y' % part] = f['labels'][()]"
run split_keys 0 300 mpi 2 "$SPMD" ensemble --train "$S/both.h5" --test "$S/both.h5" "${ARCH[@]}" --features-key train/x \
  --labels-key train/y --test-features-key test/x --test-labels-key test/y --json "$WORK/split.json"
expect_in "both splits are named with their keys and sizes" "# train .*both.h5 train/x/train/y \(640 examples\), test .*both.h5 test/x/test/y \(203\)"
run split_same 0 10 py "
import json
s, a = json.load(open('$WORK/split.json')), json.load(open('$WORK/rgb_2x1.json'))
keys = {'features': 'test/x', 'labels': 'test/y', 'features_auto': False, 'labels_auto': False, 'rule': ''}
assert s['test'] == {'data': '$S/both.h5', 'path': '$S/both.h5', 'examples': 203, 'dataset_rows': 203, 'keys': keys,
                     **keys}, s['test']
assert s['params_digest'] == a['params_digest'] and s['epochs'][-1]['test_accuracy'] == a['epochs'][-1]['test_accuracy']"

# Grey images without a channel axis, odd sizes, no hidden dense layer.
run grey 0 300 mpi 2 "$SPMD" ensemble --train "$S/grey.h5" --test "$S/grey.h5" --conv-features 5,7 --dense-features none \
  --epochs 1 --batch-size 8 --json "$WORK/grey.json"
run grey_json 0 10 py "
import json; m = json.load(open('$WORK/grey.json'))['model']
assert (m['height'], m['width'], m['channels'], m['classes'], m['dense_features']) == (30, 26, 1, 3, []), m"

# Members whose test outputs are NaN or infinite stop the run at that epoch's test pass,
# before their parameters reach the checkpoint (the run's first: none is written).
run huge_test nonzero 120 mpi 2 "$SPMD" ensemble --train "$S/grey.h5" --test "$S/grey_huge.h5" --input-scale none \
  --conv-features 5 --dense-features none --epochs 1 --batch-size 8 --devices 2 --checkpoint "$WORK/huge.h5"
expect_in "non-finite test outputs: the members, rows and epoch named" \
  "member\(s\) 0, 1, 2, 3 gave non-finite probabilities on 1 of 96 test rows after epoch 1: .*--input-scale.*huge.h5' was not updated"
checks=$((checks + 1))
if [ -e "$WORK/huge.h5" ]; then fail "a checkpoint was written with non-finite test outputs"; else echo "ok   no checkpoint written"; fi

# Refused up front, on every rank, naming the file and what to do.
run nchw nonzero 60 mpi 2 "$SPMD" ensemble --train "$S/nchw_train.h5" --test "$S/nchw_test.h5" --conv-features 8,16
expect_in "channels-first images: the transpose to apply" "nchw_train.h5' dataset 'images' has shape \[N, 3, 32, 32\], which looks channels-first .*transpose\(0, 2, 3, 1\)"
run tiny nonzero 60 mpi 2 "$SPMD" ensemble --train "$S/tiny.h5" --test "$S/tiny.h5" --batch-size 2
expect_in "images smaller than the receptive field: the field is named" "tiny.h5' dataset 'images' .*'height' must be >= 4"
run bad_widths nonzero 30 "$SPMD" ensemble --train "$S/grey.h5" --test "$S/grey.h5" --conv-features 8,x
expect_in "a bad width list is refused with the option" "--conv-features must be a comma-separated list"
finish
