#!/usr/bin/env bash
# ONNX files newer than Debian's ONNX library (1.12: IR 8, opset 17), as PyTorch 2 writes them:
# the rules that changed in opsets 18-22 checked as node tests against ONNX Runtime's outputs
# (tests/support/onnx_new_opsets.py, which adds If and pools over three spatial dimensions;
# every test must pass, none unsupported); IR 9 and 10 files
# read without the library's checker; opsets outside 1-22 refused on every rank naming the
# opset, nothing written; weights in an external data file read as if inline, only from the
# model's folder, checked from sizes; a model past protobuf's 2 GiB refused from its size; Range
# bounded by --max-range-length, a tensor past the node's memory counted once per rank and device.
# Needs npm's onnxruntime-node (tools/setup.sh installs it); skipped visibly without.
source "$(dirname "$0")/../support/cli_lib.sh"
source "$(dirname "$0")/../support/rank_exits.sh"
PY=/usr/bin/python3
SUB=$WORK/sub.h5
OUT=$WORK/out
RC=$WORK/rc
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CONFORMANCE="$(dirname "$SPMD")/tests/spmd_onnx_conformance"

if [ -d "$ROOT/tools/onnx/node_modules/onnxruntime-node" ]; then
  run node_tests 0 120 $PY "$ROOT/tests/support/onnx_new_opsets.py" "$WORK/new" "$ROOT/tools/onnx/ort_run.js"
  count=$(ls "$WORK/new/node" | wc -l)
  run conformance 0 60 "$CONFORMANCE" "$WORK/new"
  expect_in "every rule of opsets 18-22 as ONNX Runtime computes it" "^$count tests: $count pass, 0 fail, 0 unsupported"
else
  echo "SKIP new_opsets: no ONNX Runtime here (tools/onnx/node_modules; tools/setup.sh installs it)"
fi

run inputs 0 60 fashion_subset 50 "$SUB"
run models 0 60 $PY - "$WORK" <<'PYEOF'
import sys, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto as T
work = sys.argv[1]
w = numpy_helper.from_array(np.random.default_rng(1).normal(size=(784, 10)).astype(np.float32), "w")
for opset, ir in ((20, 10), (23, 10), (0, 8)):
    g = helper.make_graph([helper.make_node("Flatten", ["x"], ["f"]), helper.make_node("MatMul", ["f", "w"], ["l"]),
                           helper.make_node("Gelu", ["l"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", T.FLOAT, ["batch", 28, 28, 1])],
                          [helper.make_tensor_value_info("y", T.FLOAT, ["batch", 10])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)] if opset else [])
    m.ir_version = ir
    onnx.save(m, f"{work}/opset{opset}.onnx")
PYEOF
run eval_opset20 0 60 "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/opset20.onnx" --predictions "$WORK/p20.h5"
expect_in "an IR 10, opset 20 file with Gelu runs" " pad +[0-9]+ +50 "
refuse opset23 2 "opset23.onnx' imports opset 23 of the default domain; spmd knows the rules of opsets 1 to 22" \
  "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/opset23.onnx" --predictions "$OUT/p.h5"
refuse no_opset 2 "opset0.onnx' is refused by the ONNX checker: .*must specify opset_import" \
  "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/opset0.onnx" --predictions "$OUT/p.h5"
# Weights as external data (a file beside the model, as PyTorch writes models over 2 GB): the
# same predictions as the model holding them; a missing or short data file refused naming it.
run external_data 0 60 $PY - "$WORK" <<'PYEOF'
import sys, os, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto as T
work = sys.argv[1]
rng = np.random.default_rng(2)
inits = [numpy_helper.from_array(rng.normal(size=(8, 1, 3, 3)).astype(np.float32), "w"),
         numpy_helper.from_array(rng.normal(size=8).astype(np.float32), "b"),
         numpy_helper.from_array(rng.normal(size=(8 * 26 * 26, 10)).astype(np.float32) * 0.01, "fc")]
g = helper.make_graph([helper.make_node("Transpose", ["x"], ["t"], perm=[0, 3, 1, 2]), helper.make_node("Conv", ["t", "w", "b"], ["c"]),
                       helper.make_node("Relu", ["c"], ["r"]), helper.make_node("Flatten", ["r"], ["f"]),
                       helper.make_node("MatMul", ["f", "fc"], ["y"])], "ext",
                      [helper.make_tensor_value_info("x", T.FLOAT, ["batch", 28, 28, 1])],
                      [helper.make_tensor_value_info("y", T.FLOAT, ["batch", 10])], inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
onnx.save(m, f"{work}/inline.onnx")
os.makedirs(f"{work}/ext", exist_ok=True)
onnx.save_model(m, f"{work}/ext/model.onnx", save_as_external_data=True, all_tensors_to_one_file=True,
                location="weights.bin", size_threshold=0)
assert os.path.getsize(f"{work}/ext/model.onnx") < 2000, "the weights should live in weights.bin"
PYEOF
run eval_inline 0 60 "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/inline.onnx" --predictions "$WORK/inline.h5"
run eval_external 0 60 "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/ext/model.onnx" --predictions "$WORK/external.h5"
same_predictions() {
  $PY - "$1" "$2" <<'PYEOF'
import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1]), h5py.File(sys.argv[2])
same = all(np.array_equal(a[k][...], b[k][...]) for k in ("probabilities", "predicted"))
print("the same probabilities and classes, bit for bit" if same else "predictions differ")
sys.exit(0 if same else 1)
PYEOF
}
run external_same_bits 0 30 same_predictions "$WORK/inline.h5" "$WORK/external.h5"
# Only what the model's folder holds is read, checked from sizes before a byte is: a symlink
# inside the folder is followed, one out of it refused (also to /dev/zero); a directory or a
# FIFO (which would block the open) refused; offset + length past the file (int64 overflow
# included), bytes that are not what the tensor's dims need, and a 16 GiB sparse file without
# a length refused naming the tensor, without allocating it.
run external_cases 0 60 $PY - "$WORK" <<'PYEOF'
import sys, os, shutil, onnx
work = sys.argv[1]
m = onnx.load(f"{work}/ext/model.onnx", load_external_data=False)
def case(name, location="weights.bin", offset=None, length=None, copy=True):
    d = f"{work}/case_{name}"; os.makedirs(d, exist_ok=True)
    if copy: shutil.copy(f"{work}/ext/weights.bin", f"{d}/weights.bin")
    c = onnx.ModelProto(); c.CopyFrom(m)
    for u in c.graph.initializer:
        for e in u.external_data:
            if e.key == "location": e.value = location
    t = next(t for t in c.graph.initializer if t.name == "fc")
    for e in t.external_data:
        if e.key == "offset" and offset is not None: e.value = str(offset)
        if e.key == "length" and length is not None: e.value = str(length)
    if length == "drop":
        keep = [(e.key, e.value) for e in t.external_data if e.key != "length"]
        del t.external_data[:]
        for k, v in keep: t.external_data.add(key=k, value=v)
    with open(f"{d}/model.onnx", "wb") as f: f.write(c.SerializeToString())
    return d
os.makedirs(f"{work}/outside", exist_ok=True); shutil.copy(f"{work}/ext/weights.bin", f"{work}/outside/weights.bin")
d = case("link_inside", "link.bin"); os.makedirs(f"{d}/real", exist_ok=True)
os.rename(f"{d}/weights.bin", f"{d}/real/w.bin"); os.symlink("real/w.bin", f"{d}/link.bin")
d = case("link_outside", copy=False); os.symlink("../outside/weights.bin", f"{d}/weights.bin")
d = case("link_dir_outside", "data/weights.bin", copy=False); os.symlink("../outside", f"{d}/data")
d = case("link_zero", copy=False); os.symlink("/dev/zero", f"{d}/weights.bin")
d = case("directory", "data", copy=False); os.makedirs(f"{d}/data")
d = case("fifo", "pipe", copy=False); os.mkfifo(f"{d}/pipe")
fc = next(t for t in m.graph.initializer if t.name == "fc")
offset = int(next(e.value for e in fc.external_data if e.key == "offset"))
case("overflow", offset=offset, length=2**63 - 1 - offset + 8)
case("short_length", length=100)
d = case("sparse_16g", "big.bin", offset=0, length="drop", copy=False)
with open(f"{d}/big.bin", "wb") as f: f.truncate(16 << 30)
PYEOF
run eval_link_inside 0 60 "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/case_link_inside/model.onnx" \
  --predictions "$WORK/link_inside.h5"
run link_inside_same_bits 0 30 same_predictions "$WORK/inline.h5" "$WORK/link_inside.h5"
for c in "link_outside:outside the model's folder" "link_dir_outside:resolves to '.*outside/weights.bin', outside the model's folder" \
         "link_zero:resolves to '/dev/zero', outside" "directory:is a directory, not a regular file" \
         "fifo:is a FIFO, not a regular file" "overflow:needs bytes [0-9]+ to past 2\^63" \
         "short_length:tensor 'fc' takes 100 bytes of .*its type and dims need 216320" \
         "sparse_16g:tensor 'fc' takes 17179869184 bytes of .*big.bin', but its type and dims need 216320"; do
  name=${c%%:*}; pattern=${c#*:}
  refuse "external_$name" 2 "$pattern" \
    "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/case_$name/model.onnx" --predictions "$OUT/p.h5"
  run "info_external_$name" nonzero 30 "$SPMD" model info "$WORK/case_$name/model.onnx"
  expect_in "model info refuses external_$name too" "$pattern"
done
# Loops from a stranger's model: a trip count past --max-loop-iterations refused before the first
# iteration, a condition that never ends stopped at the limit, both naming the node and the
# option; within the limit the Loop runs. model info does not run it.
run loop_models 0 60 $PY - "$WORK" <<'PYEOF'
import sys, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto as T
work = sys.argv[1]
w = numpy_helper.from_array(np.random.default_rng(4).normal(size=(784, 10)).astype(np.float32), "w")
body = helper.make_graph([helper.make_node("Identity", ["cond_in"], ["cond_out"]),
                          helper.make_node("Add", ["acc_in", "one"], ["acc_out"])], "body",
                         [helper.make_tensor_value_info("i", T.INT64, []), helper.make_tensor_value_info("cond_in", T.BOOL, []),
                          helper.make_tensor_value_info("acc_in", T.FLOAT, [])],
                         [helper.make_tensor_value_info("cond_out", T.BOOL, []), helper.make_tensor_value_info("acc_out", T.FLOAT, [])],
                         [numpy_helper.from_array(np.array(1.0, np.float32), "one")])
for name, trips in (("loop_10", 10), ("loop_2p62", 2**62), ("loop_endless", None)):
    inits = [w, numpy_helper.from_array(np.array(True), "go"), numpy_helper.from_array(np.array(0.0, np.float32), "acc0")]
    if trips is not None: inits.append(numpy_helper.from_array(np.array(trips, np.int64), "trips"))
    g = helper.make_graph([helper.make_node("Flatten", ["x"], ["f"]), helper.make_node("MatMul", ["f", "w"], ["z"]),
                           helper.make_node("Loop", ["trips" if trips is not None else "", "go", "acc0"], ["acc"], body=body),
                           helper.make_node("Add", ["z", "acc"], ["y"])], name,
                          [helper.make_tensor_value_info("x", T.FLOAT, ["batch", 28, 28, 1])],
                          [helper.make_tensor_value_info("y", T.FLOAT, ["batch", 10])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(m)
    onnx.save(m, f"{work}/{name}.onnx")
PYEOF
run eval_loop_10 0 60 "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/loop_10.onnx" --predictions "$WORK/loop_10.h5"
refuse loop_over_limit 2 "Loop.*its trip count is 4611686018427387904, over --max-loop-iterations 1000000" \
  "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/loop_2p62.onnx" --predictions "$OUT/p.h5"
refuse loop_10_over_option 2 "its trip count is 10, over --max-loop-iterations 5" \
  "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/loop_10.onnx" --max-loop-iterations 5 --predictions "$OUT/p.h5"
refuse loop_endless 2 "ran 1000 iterations \(--max-loop-iterations\) and its condition still holds" \
  "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/loop_endless.onnx" --max-loop-iterations 1000 --predictions "$OUT/p.h5"
run info_loop_2p62 0 30 "$SPMD" model info "$WORK/loop_2p62.onnx"

# Range from a stranger's model: bounds at the ends of int64, both directions, give the values
# ONNX defines (the same bits as a model holding them as a constant); a length past
# --max-range-length, a zero delta and bounds that give no finite count refused naming the node.
# An Expand that fits the node's free memory once but not once per rank refused before any of
# it is allocated (each rank alone would have been granted it, and the node OOM-killed).
run range_models 0 60 $PY - "$WORK" <<'PYEOF'
import sys, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto as T
work = sys.argv[1]
w = numpy_helper.from_array(np.random.default_rng(5).normal(size=(784, 10)).astype(np.float32), "w")
c = lambda v, name, dt: numpy_helper.from_array(np.array(v, dt), name)
lo, hi = np.iinfo(np.int64).min, np.iinfo(np.int64).max
def model(name, nodes, inits):
    g = helper.make_graph([helper.make_node("Flatten", ["x"], ["f"]), helper.make_node("MatMul", ["f", "w"], ["z"])] + nodes +
                          [helper.make_node("Add", ["z", "offsets"], ["y"])], name,
                          [helper.make_tensor_value_info("x", T.FLOAT, ["batch", 28, 28, 1])],
                          [helper.make_tensor_value_info("y", T.FLOAT, ["batch", 10])], [w] + inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(m)
    onnx.save(m, f"{work}/{name}.onnx")
R = lambda out, s, l, d: helper.make_node("Range", [s, l, d], [out])
model("range_ends", [R("rf", "fs", "fl", "fd"), R("up", "lo", "lo10", "one"), R("down", "hi", "hi10", "minus1"),
                     helper.make_node("Sub", ["up", "lo"], ["up0"]), helper.make_node("Sub", ["down", "hi"], ["down0"]),
                     helper.make_node("Cast", ["up0"], ["upf"], to=T.FLOAT), helper.make_node("Cast", ["down0"], ["downf"], to=T.FLOAT),
                     helper.make_node("Add", ["rf", "upf"], ["a"]), helper.make_node("Sub", ["a", "downf"], ["offsets"])],
      [c(0.5, "fs", np.float32), c(10, "fl", np.float32), c(1, "fd", np.float32), c(lo, "lo", np.int64), c(lo + 10, "lo10", np.int64),
       c(1, "one", np.int64), c(hi, "hi", np.int64), c(hi - 10, "hi10", np.int64), c(-1, "minus1", np.int64)])
offsets = (np.arange(0.5, 10, 1, dtype=np.float32) + np.arange(10).astype(np.float32)) + np.arange(10).astype(np.float32)
model("range_constant", [helper.make_node("Identity", ["k"], ["offsets"])], [c(offsets, "k", np.float32)])
def bad(name, s, l, d, dt):
    model(name, [R("r", "s", "l", "d"), helper.make_node("ReduceSum", ["r"], ["rs"], keepdims=0),
                 helper.make_node("Cast", ["rs"], ["offsets"], to=T.FLOAT)], [c(s, "s", dt), c(l, "l", dt), c(d, "d", dt)])
bad("range_int64_span", lo, hi, 1, np.int64)
bad("range_100", 0, 100, 1, np.int64)
bad("range_zero_delta", 0.0, 10.0, 0.0, np.float32)
bad("range_nan", 0.0, np.nan, 1.0, np.float32)
# Sizes from a stranger's constants: a pad of 2^62 and a scale of 1e30 overflowed int64.
reduced = lambda node, inits: model(node.name, [node, helper.make_node("ReduceSum", ["big"], ["offsets"], keepdims=0)], inits)
reduced(helper.make_node("Pad", ["k", "pads"], ["big"], name="pad_2p62"),
        [c(np.ones((1, 2)), "k", np.float32), c([0, 0, 0, 2**62], "pads", np.int64)])
reduced(helper.make_node("Resize", ["k", "", "scales"], ["big"], name="resize_1e30"),
        [c(np.ones((1, 1, 2, 2)), "k", np.float32), c([1, 1, 1e30, 1], "scales", np.float32)])
free = min(int(l.split()[1]) * 1024 for l in open("/proc/meminfo") if l.startswith("MemAvailable"))
values = int(0.7 * free / 4)  # 70 % of the node's free memory as float32
model("expand_most_of_node", [helper.make_node("Expand", ["one_f", "shape"], ["e"]), helper.make_node("ReduceSum", ["e"], ["offsets"], keepdims=0)],
      [c([1.0], "one_f", np.float32), c([values], "shape", np.int64)])
PYEOF
run eval_range_ends 0 60 "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/range_ends.onnx" --predictions "$WORK/range_ends.h5"
run eval_range_constant 0 60 "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/range_constant.onnx" --predictions "$WORK/range_constant.h5"
run range_ends_same_bits 0 30 same_predictions "$WORK/range_ends.h5" "$WORK/range_constant.h5"
refuse range_int64_span 2 "node 'r' \(Range\): it would make 18446744073709551615 values, over --max-range-length 16777216" \
  "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/range_int64_span.onnx" --predictions "$OUT/p.h5"
refuse range_over_option 2 "it would make 100 values, over --max-range-length 99" \
  "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/range_100.onnx" --max-range-length 99 --predictions "$OUT/p.h5"
run range_100_within 0 60 "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/range_100.onnx" --max-range-length 100 --predictions "$WORK/r100.h5"
refuse range_zero_delta 2 "node 'r' \(Range\): a delta of 0" \
  "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/range_zero_delta.onnx" --predictions "$OUT/p.h5"
refuse range_nan 2 "node 'r' \(Range\): start 0, limit nan and delta 1 give no finite count" \
  "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/range_nan.onnx" --predictions "$OUT/p.h5"
refuse pad_2p62 2 "node 'pad_2p62' \(Pad\): a pad of 4611686018427387904 \(past 2\^40\)" \
  "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/pad_2p62.onnx" --predictions "$OUT/p.h5"
refuse resize_1e30 2 "node 'resize_1e30' \(Resize\): scale .* on axis 2 gives a size past 2\^40" \
  "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/resize_1e30.onnx" --predictions "$OUT/p.h5"
refuse expand_once_per_rank 2 "node 'e' \(Expand\): too large for this rank: .* for this node's 2 rank\(s\) x 1 device\(s\) running it at once" \
  "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/expand_most_of_node.onnx" --predictions "$OUT/p.h5"
refuse expand_once_per_device 1 "node 'e' \(Expand\): too large for this rank: .* for this node's 1 rank\(s\) x 2 device\(s\) running it at once" \
  "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/expand_most_of_node.onnx" --devices 2 --predictions "$OUT/p.h5"

# A model file of 2 GiB or more (a sparse file here): protobuf's limit, refused from its size
# before it is read, with what to do instead.
run make_huge 0 10 truncate -s 2200M "$WORK/huge.onnx"
refuse huge_model 2 "holds 2306867200 bytes, past protobuf's 2 GiB limit.*save_as_external_data=True" \
  "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/huge.onnx" --predictions "$OUT/p.h5"
run info_huge_model nonzero 30 "$SPMD" model info "$WORK/huge.onnx"
expect_in "model info refuses the huge model too" "past protobuf's 2 GiB limit"
run truncate_data 0 10 truncate -s 1000 "$WORK/ext/weights.bin"
refuse external_short 2 "weights.bin' holds 1000 bytes; tensor '[a-z]+' needs bytes" \
  "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/ext/model.onnx" --predictions "$OUT/p.h5"
run remove_data 0 10 rm "$WORK/ext/weights.bin"
refuse external_missing 2 "cannot read '.*ext/weights.bin', the external data of tensor" \
  "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/ext/model.onnx" --predictions "$OUT/p.h5"

# A graph input that also has an initializer (IR >= 4: the input's default, overridable): fed as
# the input, as ONNX Runtime does; the same bits as the model without the default.
run input_default 0 60 $PY - "$WORK" <<'PYEOF'
import sys, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto as T
work = sys.argv[1]
w = numpy_helper.from_array(np.random.default_rng(3).normal(size=(784, 10)).astype(np.float32), "w")
for name, inits in (("no_default", [w]), ("with_default", [w, numpy_helper.from_array(np.zeros((1, 28, 28, 1), np.float32), "x")])):
    g = helper.make_graph([helper.make_node("Flatten", ["x"], ["f"]), helper.make_node("MatMul", ["f", "w"], ["y"])], name,
                          [helper.make_tensor_value_info("x", T.FLOAT, ["batch", 28, 28, 1])],
                          [helper.make_tensor_value_info("y", T.FLOAT, ["batch", 10])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, f"{work}/{name}.onnx")
PYEOF
for m in no_default with_default; do
  run "eval_$m" 0 60 "$SPMD" eval --data "$SUB" --model onnx --weights "$WORK/$m.onnx" --predictions "$WORK/$m.h5"
done
run input_default_same_bits 0 30 same_predictions "$WORK/no_default.h5" "$WORK/with_default.h5"
run info_input_default 0 60 "$SPMD" model info "$WORK/with_default.onnx"
expect_not_in "model info: the input with a default is an input" "0 inputs|spmd eval refuses"

run info_opset23 0 60 "$SPMD" model info "$WORK/opset23.onnx"
expect_in "spmd model info says why eval would refuse it" "spmd eval refuses it: .*imports opset 23"
finish
