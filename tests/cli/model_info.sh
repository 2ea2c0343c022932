#!/usr/bin/env bash
# spmd model info (issue 28, section 1): on PyTorch's exports (tests/support/torch_models.py),
# parameters and bytes as ONNX's own reader counts the initializers, FLOPs per example as
# PyTorch's modules count them (forward hooks on Conv2d, Linear and the recurrent layers: 2 per
# multiply-add), the shapes, layout, opset and producer; a model with ops spmd lacks is described
# (listed, not thrown) with exit 0; a model eval would refuse says why; a file that is no model is an error
# naming it; --json carries the same.
source "$(dirname "$0")/../support/cli_lib.sh"
PY=/usr/bin/python3
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

run torch_export 0 120 $PY "$ROOT/tests/support/torch_models.py" export "$WORK"
references() {
  $PY - "$WORK" "$ROOT/tests/support" <<'PYEOF'
import json, sys, onnx, numpy as np, torch
from onnx import numpy_helper
work, support = sys.argv[1:3]
sys.path.insert(0, support)
import torch_models as tm
refs = {}
for name, (_, shape) in tm.MODELS.items():
    m = onnx.load(f"{work}/{name}.onnx")
    arrays = [numpy_helper.to_array(t) for t in m.graph.initializer]
    macs = [0]
    def hook(mod, inp, out):
        if isinstance(mod, torch.nn.Conv2d):
            macs[0] += out.numel() * mod.in_channels // mod.groups * mod.kernel_size[0] * mod.kernel_size[1]
        elif isinstance(mod, torch.nn.RNNBase):  # every step's X W^T and H R^T, each layer and direction
            gates, dirs = {"LSTM": 4, "GRU": 3}.get(mod.mode, 1), 2 if mod.bidirectional else 1
            for layer in range(mod.num_layers):
                width = mod.input_size if layer == 0 else mod.hidden_size * dirs
                macs[0] += inp[0].shape[1] * dirs * gates * mod.hidden_size * (width + mod.hidden_size)
        else:
            macs[0] += out.numel() * mod.in_features
    model = tm.build(name)
    for mod in model.modules():
        if isinstance(mod, (torch.nn.Conv2d, torch.nn.Linear, torch.nn.RNNBase)):
            mod.register_forward_hook(hook)
    with torch.no_grad():
        model(torch.zeros([1] + shape))
    refs[name] = {"parameters": int(sum(a.size for a in arrays)), "parameter_bytes": int(sum(a.nbytes for a in arrays)),
                  "flops_per_example": 2 * macs[0], "opset": m.opset_import[0].version, "producer": m.producer_name}
json.dump(refs, open(f"{work}/refs.json", "w"))
print(refs)
PYEOF
}
run references 0 120 references

for m in lenet resnet mlp channels_last mobile lstm gru rnn; do
  run "info_$m" 0 60 "$SPMD" model info "$WORK/$m.onnx" --json "$WORK/$m.json"
  run "info_${m}_matches" 0 30 $PY - "$WORK" "$m" <<'PYEOF'
import json, sys
work, name = sys.argv[1:3]
got, ref = json.load(open(f"{work}/{name}.json")), json.load(open(f"{work}/refs.json"))[name]
for key, want in ref.items():
    assert got[key] == want, f"{name}: {key} {got[key]} != {want}"
assert got["evaluable"] and got["all_supported"] and got["classes"] == 10, got
print(f"{name}: {got['parameters']} parameters, {got['flops_per_example']} FLOPs per example, as ONNX and PyTorch count them")
PYEOF
  cat "$LAST_OUT"
done
run info_lenet_text 0 60 "$SPMD" model info "$WORK/lenet.onnx"
expect_in "the input's shape and layout" "input +input +float32 +\[batch, 1, 28, 28\] NCHW"
expect_in "what eval expects, NHWC images included" "images \[N, 28, 28, 1\] \(NHWC, transposed to NCHW\)"
expect_in "the op histogram" "Conv +2 +yes"
run info_mlp_text 0 60 "$SPMD" model info "$WORK/mlp.onnx"
expect_in "LogSoftmax read as log-probabilities" "output read as log-probabilities"

# Ops spmd lacks: listed, exit 0; a second input: eval's refusal said; not a model: an error.
run odd_models 0 60 $PY - "$WORK" <<'PYEOF'
import sys, onnx
from onnx import helper, TensorProto
work = sys.argv[1]
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])
z = helper.make_tensor_value_info("z", TensorProto.FLOAT, ["batch", 4])
g = helper.make_graph([helper.make_node("GlobalLpPool", ["x"], ["h"]), helper.make_node("Relu", ["h"], ["y"])], "g", [x], [y])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), f"{work}/lp_pool.onnx")
g = helper.make_graph([helper.make_node("Add", ["x", "z"], ["y"])], "g", [x, z], [y])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), f"{work}/two_inputs.onnx")
PYEOF
run info_unsupported 0 60 "$SPMD" model info "$WORK/lp_pool.onnx" --json "$WORK/lp_pool.json"
expect_in "an op spmd lacks is listed as unsupported" "GlobalLpPool +1 +no"
expect_in "eval's refusal is said" "spmd eval refuses it: it uses ops spmd does not run: GlobalLpPool \(1\)"
run info_unsupported_json 0 10 $PY -c "import json; j = json.load(open('$WORK/lp_pool.json')); assert j['unsupported_ops'] == {'GlobalLpPool': 1} and not j['all_supported'] and j['flops_per_example'] is None, j"
run info_two_inputs 0 60 "$SPMD" model info "$WORK/two_inputs.onnx"
expect_in "two inputs: eval's refusal" "spmd eval refuses it: .*has 2 inputs"
printf 'not a model' >"$WORK/junk.onnx"
run info_junk 1 30 mpi 2 "$SPMD" model info "$WORK/junk.onnx"
expect_in "a file that is no model: named, on every rank's exit" "junk.onnx' is not an ONNX model"
run info_missing 1 30 "$SPMD" model info "$WORK/none.onnx"
expect_in "a missing file: named" "none.onnx"
finish
