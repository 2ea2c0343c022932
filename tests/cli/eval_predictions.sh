#!/usr/bin/env bash
# spmd eval --predictions and the confusion matrix: per-example outputs, exactly one per
# example and none from padding, in the input file's row order.
#  - the file's bytes are identical on every layout (ranks x devices x batch size) and for
#    every exact strategy, for logreg (with and without an intercept) and a CNN ensemble,
#    with N = 1003 (divisible by none of the layouts' step sizes);
#  - with --drop-label the dropped rows are present and marked (predicted -1, probabilities
#    0, their label kept); every other row is the full run's;
#  - logreg's classes are numpy's argmax of X W (+ b) and its probabilities the softmax;
#  - the JSON confusion matrix is numpy's, from the file's predictions and labels;
#  - rows whose outputs overflow (float32 rows of 3e38 through positive weights: logreg, and an
#    ONNX graph with a free and with a fixed batch size, whose last run is padded with copies of
#    its first row) are counted once each, on every layout, with a warning: JSON's
#    non_finite_rows is the number of rows whose probabilities in the file are not finite;
#  - a bad destination is refused up front, and a failed run leaves an existing file as it was.
source "$(dirname "$0")/../support/cli_lib.sh"
PY=/usr/bin/python3
SUB=$WORK/sub.h5

make_inputs() {
  $PY - "$DATA/fashion/test.h5" "$WORK" <<'EOF'
import sys, h5py, numpy as np
src, work = sys.argv[1], sys.argv[2]
with h5py.File(src) as f, h5py.File(work + "/sub.h5", "w") as g:
    g["images"] = f["images"][:1003]
    g["labels"] = f["labels"][:1003]
# A logreg model with an intercept, as any tool would write it: W [784, 10], b [10].
rng = np.random.default_rng(7)
with h5py.File(work + "/wb.h5", "w") as g:
    g["W"] = (rng.standard_normal((784, 10)) * 0.05).astype(np.float32)
    g["b"] = np.linspace(-2, 2, 10).astype(np.float32)
    g.attrs["model"] = "logreg"
EOF
}
run inputs 0 60 make_inputs
run logreg_model 0 120 "$SPMD" logreg --data "$SUB" --features-key images --labels-key labels --maxiter 10 --quiet --weights-out "$WORK/w.h5"
run cnn_model 0 300 mpi 2 "$SPMD" ensemble --train "$SUB" --test "$SUB" --train-limit 300 --test-limit 64 \
  --conv-features 4,4 --dense-features 16 --checkpoint "$WORK/ck.h5"

# Every layout and exact strategy writes the same bytes.
layouts=("1 1 pad 64" "2 3 pad 64" "3 1 pad 64" "2 3 infinite-pad 7" "3 1 pad-metrics 50" "1 1 keep-remainder 100"
         "3 2 infinite-pad 1")
for model in logreg logreg_b cnn; do
  case $model in
    logreg) args=(--model logreg --weights "$WORK/w.h5") ;;
    logreg_b) args=(--model logreg --weights "$WORK/wb.h5") ;;
    cnn) args=(--model cnn --weights "$WORK/ck.h5") ;;
  esac
  first=""
  for l in "${layouts[@]}"; do
    set -- $l
    name="${model}_np$1_d$2_$3_B$4"
    run "$name" 0 120 mpi "$1" "$SPMD" eval --data "$SUB" "${args[@]}" --devices "$2" --strategy "$3" \
      --per-device-batch "$4" --predictions "$WORK/$name.h5" --json "$WORK/$name.json"
    expect_in "$name prints where the predictions went" "# predictions: .*$name.h5 \(1003 rows\)"
    if [ -z "$first" ]; then first=$name; continue; fi
    run "${name}_same_bytes" 0 10 cmp "$WORK/$first.h5" "$WORK/$name.h5"
  done
  # The counts in JSON are the file's: accuracy, total and the confusion matrix.
  check_json() {
    $PY - "$WORK/$first.h5" "$WORK/$first.json" "$SUB" <<'EOF'
import sys, json, h5py, numpy as np
p, j = h5py.File(sys.argv[1]), json.load(open(sys.argv[2]))
pred, label, probs = p["predicted"][...], p["label"][...], p["probabilities"][...]
assert pred.dtype == np.int32 and probs.dtype == np.float32 and label.dtype == np.int32, (pred.dtype, probs.dtype)
assert pred.shape == (1003,) and probs.shape == (1003, 10), (pred.shape, probs.shape)
assert (label == h5py.File(sys.argv[3])["labels"][...]).all(), "labels differ from the input's"
assert (pred >= 0).all() and p.attrs["evaluated"] == 1003
assert np.allclose(probs.sum(1), 1, atol=1e-5), "probabilities do not sum to 1"
assert (np.argmax(probs, 1) == pred).all(), "the class is not the most probable one"
cm = np.zeros((10, 10), np.int64)
np.add.at(cm, (label, pred), 1)
assert j["confusion_matrix"] == cm.tolist(), (j["confusion_matrix"], cm.tolist())
assert j["correct"] == int(np.trace(cm)) and j["total"] == 1003, (j["correct"], np.trace(cm))
assert j["non_finite_rows"] == 0, j["non_finite_rows"]
EOF
  }
  run "${model}_json_is_the_file" 0 30 check_json
done

# logreg: numpy's argmax of X W (+ b) (float64; rows whose two best logits are within
# 1e-4 are ties that float32 may order either way) and its softmax.
check_numpy() {
  $PY - "$SUB" "$1" "$2" <<'EOF'
import sys, h5py, numpy as np
X = h5py.File(sys.argv[1])["images"][...].reshape(1003, -1).astype(np.float64) / 255.0
w = h5py.File(sys.argv[2])
z = X @ w["W"][...].astype(np.float64)
if "b" in w: z += w["b"][...]
p = h5py.File(sys.argv[3])
pred, probs = p["predicted"][...], p["probabilities"][...]
top2 = np.sort(z, 1)[:, -2:]
clear = top2[:, 1] - top2[:, 0] > 1e-4
assert clear.sum() > 990, clear.sum()
bad = np.flatnonzero(clear & (np.argmax(z, 1) != pred))
assert bad.size == 0, f"rows {bad[:10]} differ from numpy's argmax"
e = np.exp(z - z.max(1, keepdims=True)); e /= e.sum(1, keepdims=True)
err = np.abs(e - probs).max()
assert err < 1e-5, err
print("argmax equal on", clear.sum(), "rows; largest probability error", err)
EOF
}
run logreg_is_numpy 0 30 check_numpy "$WORK/w.h5" "$WORK/logreg_np1_d1_pad_B64.h5"
run logreg_b_is_numpy 0 30 check_numpy "$WORK/wb.h5" "$WORK/logreg_b_np1_d1_pad_B64.h5"
# The intercept matters here (b spans [-2, 2]): ignoring it would change many classes.
run intercept_used 0 30 $PY -c "
import h5py, numpy as np
a = h5py.File('$WORK/logreg_b_np1_d1_pad_B64.h5')['predicted'][...]
X = h5py.File('$SUB')['images'][...].reshape(1003, -1) / 255.0
no_b = np.argmax(X @ h5py.File('$WORK/wb.h5')['W'][...], 1)
assert (a != no_b).sum() > 100, (a != no_b).sum()"

# --drop-label: dropped rows stay, marked; the others are the full run's rows.
for l in "1 1 64" "2 3 7" "3 1 50"; do
  set -- $l
  name="drop_np$1_d$2"
  run "$name" 0 120 mpi "$1" "$SPMD" eval --data "$SUB" --model logreg --weights "$WORK/wb.h5" --devices "$2" \
    --strategy infinite-pad --per-device-batch "$3" --drop-label 3 --predictions "$WORK/$name.h5"
  expect_in "$name says how many rows were not evaluated" "not evaluated: predicted = -1"
  [ "$name" = drop_np1_d1 ] || run "${name}_same_bytes" 0 10 cmp "$WORK/drop_np1_d1.h5" "$WORK/$name.h5"
done
check_drop() {
  $PY - "$WORK/drop_np1_d1.h5" "$WORK/logreg_b_np1_d1_pad_B64.h5" <<'EOF'
import sys, h5py, numpy as np
d, f = h5py.File(sys.argv[1]), h5py.File(sys.argv[2])
label = d["label"][...]
dropped = label == 3
assert dropped.sum() > 50 and (label == f["label"][...]).all()
assert (d["predicted"][...][dropped] == -1).all() and (d["probabilities"][...][dropped] == 0).all()
assert (d["predicted"][...][~dropped] == f["predicted"][...][~dropped]).all()
assert (d["probabilities"][...][~dropped] == f["probabilities"][...][~dropped]).all()
assert d.attrs["evaluated"] == (~dropped).sum()
EOF
}
run drop_rows_marked 0 30 check_drop

# drop-remainder leaves rows out: they are marked the same way.
run drop_remainder 0 60 "$SPMD" eval --data "$SUB" --strategy drop-remainder --per-device-batch 100 \
  --predictions "$WORK/dr.h5"
expect_in "drop-remainder's rows left out are marked" "1003 rows; 3 not evaluated"
# The zero model: class 0 with probability 1.
run zero_model 0 60 mpi 2 "$SPMD" eval --data "$SUB" --predictions "$WORK/zero.h5"
run zero_one_hot 0 30 $PY -c "
import h5py, numpy as np
p = h5py.File('$WORK/zero.h5'); q = p['probabilities'][...]
assert (p['predicted'][...] == 0).all() and (q[:, 0] == 1).all() and (q[:, 1:] == 0).all()"

# Outputs that overflow: counted once per row on every layout, never from padding. Rows 63 and
# 1002 begin the last 7-row run of a 64-row device batch: the fixed-batch graph pads that run
# with copies of them.
make_overflow() {
  $PY - "$SUB" "$WORK" <<'EOF'
import sys, h5py, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto as T
sub, work = sys.argv[1], sys.argv[2]
with h5py.File(sub) as f, h5py.File(work + "/huge.h5", "w") as g:
    x = f["images"][...].astype(np.float32) / 255.0
    x[[5, 63, 500, 1002]] = 3e38
    g["images"] = x
    g["labels"] = f["labels"][...]
W = np.random.default_rng(3).uniform(0.005, 0.015, (784, 10)).astype(np.float32)
with h5py.File(work + "/wpos.h5", "w") as g:
    g["W"] = W
for name, batch, first in (("free", "batch", helper.make_node("Flatten", ["x"], ["f"], axis=1)),
                           ("fixed", 7, helper.make_node("Reshape", ["x", "s"], ["f"]))):
    graph = helper.make_graph([first, helper.make_node("MatMul", ["f", "W"], ["y"])], name,
                              [helper.make_tensor_value_info("x", T.FLOAT, [batch, 28, 28, 1])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [batch, 10])],
                              [numpy_helper.from_array(W, "W"), numpy_helper.from_array(np.array([7, 784], np.int64), "s")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), f"{work}/pos_{name}.onnx")
EOF
}
run overflow_inputs 0 60 make_overflow
check_overflow() {
  $PY - "$1" "$2" <<'EOF'
import sys, json, h5py, numpy as np
p, j = h5py.File(sys.argv[1]), json.load(open(sys.argv[2]))
rows = np.flatnonzero(~np.isfinite(p["probabilities"][...]).all(1))
assert rows.tolist() == [5, 63, 500, 1002], rows
assert j["non_finite_rows"] == 4 and j["total"] == 1003, (j["non_finite_rows"], j["total"])
EOF
}
for model in logreg onnx_free onnx_fixed; do
  case $model in
    logreg) args=(--model logreg --weights "$WORK/wpos.h5") ;;
    *) args=(--model onnx --weights "$WORK/pos_${model#onnx_}.onnx") ;;
  esac
  for l in "1 1 pad 64" "3 2 infinite-pad 7" "2 1 pad-metrics 64"; do
    set -- $l
    name="overflow_${model}_np$1_d$2_$3"
    run "$name" 0 120 mpi "$1" "$SPMD" eval --data "$WORK/huge.h5" "${args[@]}" --devices "$2" --strategy "$3" \
      --per-device-batch "$4" --predictions "$WORK/$name.h5" --json "$WORK/$name.json"
    expect_in "$name warns" "WARNING: 4 of 1003 examples had a NaN or an infinity among the model's outputs"
    run "${name}_rows" 0 30 check_overflow "$WORK/$name.h5" "$WORK/$name.json"
  done
done

# Refusals up front, and nothing lost.
run no_folder nonzero 30 mpi 2 "$SPMD" eval --data "$SUB" --predictions "$WORK/missing/p.h5"
expect_in "a missing folder names the option" "--predictions .*folder .* does not exist"
run with_dry_run nonzero 30 "$SPMD" eval --data "$SUB" --predictions "$WORK/p.h5" --dry-run
expect_in "--dry-run with --predictions is refused" "--predictions: a --dry-run evaluates nothing"
cp "$WORK/zero.h5" "$WORK/keep.h5"
run failed_run_keeps_file nonzero 60 mpi 2 "$SPMD" eval --data "$DATA/rows4097.h5" --features-key X --labels-key y \
  --model logreg --weights "$WORK/w.h5" --predictions "$WORK/keep.h5"
run existing_file_untouched 0 10 cmp "$WORK/zero.h5" "$WORK/keep.h5"
run no_temp_left 0 10 bash -c "! ls -a '$WORK' | grep -q '\.tmp\.'"
finish
