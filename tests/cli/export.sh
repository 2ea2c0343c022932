#!/usr/bin/env bash
# spmd export: what spmd trained, run by others. An ensemble checkpoint (2 members, trained
# on 2 ranks) and logistic regressions (spmd's own, with an intercept; numpy-made, with one)
# are exported as ONNX and judged by the ONNX library's checker (python3-onnx) and by ONNX
# Runtime (npm's onnxruntime-node, tools/onnx/ort_run.js) on 1003 Fashion-MNIST test images:
# the same argmax as `spmd eval --predictions` on every example (but where the top two
# probabilities lie within 1e-5) and probabilities within 1e-5; one member's export against the
# ensemble's (their mean); the same bytes from 1 and 2 ranks; refusals that name the culprit
# and leave no file.
source "$(dirname "$0")/../support/cli_lib.sh"
source "$(dirname "$0")/../support/rank_exits.sh"
PY=/usr/bin/python3
SUB=$WORK/sub.h5
OUT=$WORK/out
RC=$WORK/rc
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
ORT="$ROOT/tools/onnx/node_modules/onnxruntime-node"

make_inputs() {
  fashion_subset 1003 "$SUB"  # with its class_names, which the exports state
  $PY - "$WORK" <<'PYEOF'
import sys, h5py, numpy as np
work = sys.argv[1]
rng = np.random.default_rng(3)
with h5py.File(work + "/wb.h5", "w") as g:  # as any tool would write logreg weights
    g["W"] = (rng.standard_normal((784, 10)) * 0.05).astype(np.float32)
    g["b"] = np.linspace(-1, 1, 10).astype(np.float32)
PYEOF
}
run inputs 0 60 make_inputs
run ensemble 0 300 mpi 2 "$SPMD" ensemble --train "$SUB" --test "$SUB" --train-limit 300 --test-limit 64 \
  --conv-features 4,4 --dense-features 16 --checkpoint "$WORK/ck.h5" --quiet
run logreg 0 120 "$SPMD" logreg --data "$SUB" --maxiter 20 --fit-intercept --quiet --weights-out "$WORK/lr.h5"

# Each model: exported, then evaluated by spmd for the reference outputs.
models=("ck:--weights $WORK/ck.h5:--model cnn" "m0:--weights $WORK/ck.h5 --member 0:" "m1:--weights $WORK/ck.h5 --member 1:"
        "lr:--weights $WORK/lr.h5:--model logreg" "wb:--weights $WORK/wb.h5:--model logreg")
for m in "${models[@]}"; do
  IFS=: read -r name export_args eval_args <<<"$m"
  run "export_$name" 0 60 "$SPMD" export $export_args --out "$WORK/$name.onnx" --json "$WORK/$name.json"
  expect_in "export_$name names the file and its input" "to +.*$name.onnx \(ONNX opset 13, [0-9]+ bytes\)"
  [ "$name" != wb ] && expect_in "export_$name says where the training data came from" "training_data +.*sub.h5"
  [ -n "$eval_args" ] && run "eval_$name" 0 120 "$SPMD" eval --data "$SUB" $eval_args ${export_args%% --member*} \
    --predictions "$WORK/$name.pred.h5"
done
run export_np2 0 60 mpi 2 "$SPMD" export --weights "$WORK/ck.h5" --out "$WORK/ck2.onnx"
run export_np2_same_bytes 0 10 cmp "$WORK/ck.onnx" "$WORK/ck2.onnx"

check_onnx() {
  $PY - "$WORK" <<'PYEOF'
import sys, json, onnx
work = sys.argv[1]
for name, inp, dims, members in [("ck", "images", [28, 28, 1], 2), ("m0", "images", [28, 28, 1], 1),
                                 ("lr", "features", [784], 0), ("wb", "features", [784], 0)]:
    m = onnx.load(f"{work}/{name}.onnx")
    onnx.checker.check_model(m, full_check=True)
    g = m.graph
    shape = lambda v: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
    assert [i.name for i in g.input] == [inp], g.input
    assert shape(g.input[0]) == ["batch"] + dims, shape(g.input[0])
    assert [o.name for o in g.output] == ["probabilities"] and shape(g.output[0]) == ["batch", 10], shape(g.output[0])
    props = {p.key: p.value for p in m.metadata_props}
    for key in ("model", "input", "input_scale") + (("training_data",) if name != "wb" else ()):
        assert props.get(key), f"{name}: metadata lacks {key}: {props}"
    assert m.producer_name == "spmd-kit" and m.opset_import[0].version == 13
    ops = [n.op_type for n in g.node]
    if members:
        assert ops.count("Conv") == 2 * members and ops.count("Softmax") == members, ops
        assert ("Mean" in ops) == (members > 1), ops
        assert props["class_names"].startswith("T-shirt/top,Trouser"), props
    j = json.load(open(f"{work}/{name}.json"))
    assert j["kind"] == ("cnn-ensemble" if members else "logreg") and j["metadata"] == props, j
    print(name, "checker ok,", len(ops), "nodes:", ",".join(sorted(set(ops))))
PYEOF
}
run onnx_checker 0 60 check_onnx
cat "$LAST_OUT"

# ONNX Runtime on the same images, scaled as training scaled them (uint8 / 255).
check_ort() {
  $PY - "$WORK" "$SUB" "$ROOT/tools/onnx/ort_run.js" <<'PYEOF'
import sys, subprocess, h5py, numpy as np
work, sub, runner = sys.argv[1:4]
with h5py.File(sub) as f:
    x = f["images"][...].astype(np.float32) / np.float32(255)
def ort(name, shape):
    x.reshape(shape).astype("<f4").tofile(f"{work}/in.f32")
    subprocess.run(["node", runner, f"{work}/{name}.onnx", f"{work}/in.f32", ",".join(map(str, shape)),
                    f"{work}/{name}.ort"], check=True, stdout=subprocess.DEVNULL)
    return np.fromfile(f"{work}/{name}.ort", "<f4").reshape(len(x), -1)
bad = 0
out = {}
for name, shape in [("ck", x.shape), ("m0", x.shape), ("m1", x.shape), ("lr", (len(x), 784)), ("wb", (len(x), 784))]:
    out[name] = p = ort(name, shape)
    if name in ("m0", "m1"):
        continue
    with h5py.File(f"{work}/{name}.pred.h5") as f:
        probs, predicted = f["probabilities"][...], f["predicted"][...]
    top2 = np.sort(probs, axis=1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > 1e-5
    diff = np.abs(p - probs).max()
    wrong = int(((p.argmax(1) != predicted) & clear).sum())
    print(f"{name}: max |ORT - spmd eval| = {diff:.2e}, argmax differs on {int((p.argmax(1) != predicted).sum())} "
          f"of {len(x)} ({wrong} with a clear top class)")
    bad += diff > 1e-5 or wrong > 0
mean = (out["m0"] + out["m1"]) / 2
print(f"members: max |mean of the members' exports - the ensemble's| = {np.abs(mean - out['ck']).max():.2e}")
bad += np.abs(mean - out["ck"]).max() > 1e-6 or np.abs(out["m0"] - out["m1"]).max() < 1e-3
sys.exit(1 if bad else 0)
PYEOF
}
if [ -d "$ORT" ] && command -v node >/dev/null; then
  run onnx_runtime 0 120 check_ort
  cat "$LAST_OUT"
else
  echo "skip onnx_runtime: tools/onnx/node_modules/onnxruntime-node is not installed (tools/setup.sh installs it with npm)"
fi

# Refusals: every rank fails within seconds, naming the culprit, and nothing is written.
refuse member_range 2 "--member 2: the checkpoint .*has 2 members" "$SPMD" export --weights "$WORK/ck.h5" --member 2 --out "$OUT/m.onnx"
refuse member_logreg 2 "--member applies to ensemble checkpoints" "$SPMD" export --weights "$WORK/lr.h5" --member 0 --out "$OUT/m.onnx"
refuse not_a_model 2 "neither an spmd ensemble checkpoint nor logreg weights" "$SPMD" export --weights "$SUB" --out "$OUT/m.onnx"
refuse negative_member 1 "--member must be >= 0" "$SPMD" export --weights "$WORK/ck.h5" --member -1 --out "$OUT/m.onnx"
refuse no_out 1 "--out" "$SPMD" export --weights "$WORK/ck.h5"
cp "$WORK/ck.h5" "$OUT/ck.h5"
run out_is_weights nonzero 30 "$SPMD" export --weights "$OUT/ck.h5" --out "$OUT/ck.h5"
expect_in "out_is_weights names both options" "--out .*--weights|--weights .*--out"
run out_is_weights_kept 0 10 cmp "$WORK/ck.h5" "$OUT/ck.h5"
finish
