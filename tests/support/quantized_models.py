"""A small CNN trained briefly in PyTorch, exported with torch.onnx.export, then quantized the two
ways onnxruntime.quantization.quantize_static writes models (onnxruntime's Python package is not
on Debian; these graphs follow its layout): QDQ (QuantizeLinear / DequantizeLinear pairs on
every activation, weights int8 per output channel, biases int32 at the input's scale times the
weight's) and QOperator (QLinearConv with the ReLU folded into a zero point of 0, MaxPool on
uint8, QLinearMatMul, the bias added in float); and as quantize_dynamic writes its MatMuls
(DynamicQuantizeLinear + MatMulInteger: one scale over the whole batch). Activation ranges are
calibrated on the data file, as quantize_static's MinMax calibrator does.

  quantized_models.py DIR DATA    writes DIR/{float,qdq,qoperator,dynamic,torch_quantized,fx_residual}.onnx,
                                  DIR/{torch_quantized,fx_residual}.torch.VARIANT.npy (PyTorch's quantized
                                  models' probabilities under each of its quantized kernels this host can run)
                                  and DIR/data.in (the data as the models' float input, NCHW) with its shape
                                  in DIR/shape"""
import copy
import os
import subprocess
import sys
import numpy as np
import h5py
import onnx
import torch
import torch.ao.quantization as tq
from onnx import helper, numpy_helper, TensorProto as T
from torch import nn

work, data = sys.argv[1], sys.argv[2]
torch.manual_seed(5)
with h5py.File(data) as f:
    x = torch.from_numpy(f["images"][...]).float().div(255).permute(0, 3, 1, 2).contiguous()
    labels = torch.from_numpy(f["labels"][...].astype(np.int64))
x.numpy().astype("<f4").tofile(f"{work}/data.in")
with open(f"{work}/shape", "w") as f:
    f.write(",".join(map(str, x.shape)))

model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(),
                      nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16 * 7 * 7, 10))
def train(net):  # a few epochs' worth on the file: clear top classes, not a benchmark
    opt = torch.optim.Adam(net.parameters(), 3e-3)
    for step in range(60):
        batch = torch.randint(0, len(x), (128,))
        opt.zero_grad()
        nn.functional.cross_entropy(net(x[batch]), labels[batch]).backward()
        opt.step()


train(model)
model.eval()
torch.onnx.export(model, x[:2], f"{work}/float.onnx", opset_version=13, input_names=["input"], output_names=["logits"],
                  dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})

# PyTorch's own quantization of the same model (eager mode, static, fbgemm: Conv+ReLU fused,
# calibrated on the file), exported as torch.onnx.export writes it (QDQ with Casts, opset 13),
# and PyTorch's quantized kernels' probabilities beside it.
class Quantizable(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.quant, self.dequant, self.layers = tq.QuantStub(), tq.DeQuantStub(), copy.deepcopy(layers)

    def forward(self, v):
        return self.dequant(self.layers(self.quant(v)))


pq = Quantizable(model).eval()
pq.qconfig = tq.get_default_qconfig("fbgemm")
tq.fuse_modules(pq, [["layers.0", "layers.1"], ["layers.3", "layers.4"]], inplace=True)
tq.prepare(pq, inplace=True)
with torch.no_grad():
    pq(x)
tq.convert(pq, inplace=True)
torch.jit.save(torch.jit.trace(pq, x[:2]), f"{work}/torch_quantized.pt")
torch.onnx.export(pq, x[:2], f"{work}/torch_quantized.onnx", opset_version=13, input_names=["input"],
                  output_names=["logits"], dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})

# PyTorch's FX graph-mode quantization (the API its documentation leads with) of a residual net
# (Conv + BatchNorm fused, a skip connection's Add, global average pooling), trained briefly.
from torch.ao.quantization import get_default_qconfig_mapping
from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx


class Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem, self.bn0 = nn.Conv2d(1, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16)
        self.c1, self.b1 = nn.Conv2d(16, 16, 3, padding=1), nn.BatchNorm2d(16)
        self.c2, self.b2 = nn.Conv2d(16, 16, 3, padding=1), nn.BatchNorm2d(16)
        self.pool, self.fc = nn.AdaptiveAvgPool2d(1), nn.Linear(16, 10)

    def forward(self, v):
        v = torch.relu(self.bn0(self.stem(v)))
        v = torch.relu(self.b2(self.c2(torch.relu(self.b1(self.c1(v))))) + v)
        return self.fc(torch.flatten(self.pool(v), 1))


residual = Residual()
train(residual)
residual.eval()
fx = prepare_fx(copy.deepcopy(residual), get_default_qconfig_mapping("fbgemm"), (x[:2],))
with torch.no_grad():
    fx(x)
fx = convert_fx(fx)
torch.jit.save(torch.jit.trace(fx, x[:2]), f"{work}/fx_residual.pt")
torch.onnx.export(fx, x[:2], f"{work}/fx_residual.onnx", opset_version=13, input_names=["input"], output_names=["logits"],
                  dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})

# PyTorch's quantized answer is not one answer: each engine (fbgemm in PyPI's wheels, oneDNN and
# QNNPACK in Debian's) requantizes in its own way, and an engine may dispatch by instruction set.
# Each variant this host can run evaluates the saved models in its own process (oneDNN reads
# ONEDNN_MAX_CPU_ISA once; a packed weight is repacked on load for the engine then set), so that
# the test can tell where PyTorch's result is settled. Measured on Zen 4 (6 seeds x 3000 images):
# oneDNN's int8 kernels gave the same bits capped at SSE4.1, AVX2, AVX-512 and with VNNI, so one
# cap (AVX2) stands for the rest; QNNPACK moved a few classes.
EVALUATE = """
import sys, numpy as np, torch
engine, work, shape = sys.argv[1], sys.argv[2], [int(v) for v in open(sys.argv[2] + "/shape").read().split(",")]
torch.backends.quantized.engine = engine
x = torch.from_numpy(np.fromfile(work + "/data.in", "<f4").reshape(shape))
for name in sys.argv[4:]:
    with torch.no_grad():
        np.save(f"{work}/{name}.torch.{sys.argv[3]}.npy", torch.softmax(torch.jit.load(f"{work}/{name}.pt")(x), 1).numpy())
"""
variants = []
for engine in torch.backends.quantized.supported_engines:
    if engine == "onednn":
        variants += [("onednn", engine, {}), ("onednn_avx2", engine, {"ONEDNN_MAX_CPU_ISA": "AVX2"})]
    elif engine != "none":
        variants.append((engine, engine, {}))
for label, engine, env in variants:
    subprocess.run([sys.executable, "-c", EVALUATE, engine, work, label, "torch_quantized", "fx_residual"], check=True,
                   env={**os.environ, **env})
print("PyTorch's quantized kernels evaluated:", " ".join(label for label, _, _ in variants))

# MinMax calibration of each activation the graphs quantize.
with torch.no_grad():
    acts = [x]
    for layer in model:
        acts.append(layer(acts[-1]))
x_in, relu1, relu2, logits = acts[0], acts[2], acts[5], acts[8]


def asymmetric(t):  # uint8, the range widened to hold 0
    lo, hi = min(float(t.min()), 0.0), max(float(t.max()), 0.0)
    scale = np.float32((hi - lo) / 255 if hi > lo else 1.0)
    return scale, np.uint8(round(-lo / float(scale)))


def per_channel(w):  # int8 symmetric per output channel
    flat = w.detach().numpy().reshape(w.shape[0], -1)
    scale = (np.abs(flat).max(1) / 127).astype(np.float32)
    q = np.clip(np.round(w.detach().numpy() / scale.reshape(-1, *[1] * (w.dim() - 1))), -127, 127).astype(np.int8)
    return q, scale


s_x, z_x = asymmetric(x_in)
s_1, z_1 = asymmetric(relu1)
s_2, z_2 = asymmetric(relu2)
s_y, z_y = asymmetric(logits)
conv1, conv2, fc = model[0], model[3], model[7]
inits, nodes = [], []


def init(name, value):
    inits.append(numpy_helper.from_array(np.asarray(value), name))
    return name


def qdq(src, scale, zero, name):
    init(name + "_s", np.float32(scale)), init(name + "_z", zero)
    nodes.extend([helper.make_node("QuantizeLinear", [src, name + "_s", name + "_z"], [name + "_q"]),
                  helper.make_node("DequantizeLinear", [name + "_q", name + "_s", name + "_z"], [name])])
    return name


def weights(layer, in_scale, name):  # DequantizeLinear of int8 weights and int32 bias, per channel
    q, s = per_channel(layer.weight)
    init(name + "_wq", q), init(name + "_ws", s), init(name + "_wz", np.zeros(len(s), np.int8))
    bias_scale = (np.float32(in_scale) * s).astype(np.float32)
    init(name + "_bq", np.round(layer.bias.detach().numpy() / bias_scale).astype(np.int32))
    init(name + "_bs", bias_scale), init(name + "_bz", np.zeros(len(s), np.int32))
    nodes.extend([helper.make_node("DequantizeLinear", [name + "_wq", name + "_ws", name + "_wz"], [name + "_w"], axis=0),
                  helper.make_node("DequantizeLinear", [name + "_bq", name + "_bs", name + "_bz"], [name + "_b"], axis=0)])
    return name + "_w", name + "_b"


def save(name, outputs_from, opset=13):
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("input", T.FLOAT, ["batch", 1, 28, 28])],
                              [helper.make_tensor_value_info(outputs_from, T.FLOAT, ["batch", 10])], inits)
    model_proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model_proto.ir_version = 8
    onnx.checker.check_model(model_proto)
    onnx.save(model_proto, f"{work}/{name}.onnx")


# QDQ: every op computes in float between quantize / dequantize pairs.
xd = qdq("input", s_x, z_x, "x_qdq")
w, b = weights(conv1, s_x, "conv1")
nodes += [helper.make_node("Conv", [xd, w, b], ["c1"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c1"], ["r1"])]
r1 = qdq("r1", s_1, z_1, "r1_qdq")
nodes.append(helper.make_node("MaxPool", [r1], ["p1"], kernel_shape=[2, 2], strides=[2, 2]))
p1 = qdq("p1", s_1, z_1, "p1_qdq")
w, b = weights(conv2, s_1, "conv2")
nodes += [helper.make_node("Conv", [p1, w, b], ["c2"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c2"], ["r2"])]
r2 = qdq("r2", s_2, z_2, "r2_qdq")
nodes.append(helper.make_node("MaxPool", [r2], ["p2"], kernel_shape=[2, 2], strides=[2, 2]))
p2 = qdq("p2", s_2, z_2, "p2_qdq")
nodes.append(helper.make_node("Flatten", [p2], ["flat"], axis=1))
w, b = weights(fc, s_2, "fc")
nodes.append(helper.make_node("Gemm", ["flat", w, b], ["y"], transB=1))
save("qdq", qdq("y", s_y, z_y, "logits"))

# QOperator: integer ops throughout; a ReLU is the zero point 0 of its convolution's output.
inits, nodes = [], []
init("x_s", s_x), init("x_z", z_x), init("s1", s_1), init("z1", z_1), init("s2", s_2), init("z2", z_2)
nodes.append(helper.make_node("QuantizeLinear", ["input", "x_s", "x_z"], ["xq"]))
for name, layer, src, in_s, in_z, out_s, out_z, dst in (("conv1", conv1, "xq", "x_s", "x_z", "s1", "z1", "r1q"),
                                                          ("conv2", conv2, "p1q", "s1", "z1", "s2", "z2", "r2q")):
    q, s = per_channel(layer.weight)
    in_scale = s_x if name == "conv1" else s_1
    init(name + "_wq", q), init(name + "_ws", s), init(name + "_wz", np.zeros(len(s), np.int8))
    init(name + "_bq", np.round(layer.bias.detach().numpy() / (np.float32(in_scale) * s)).astype(np.int32))
    nodes.append(helper.make_node("QLinearConv", [src, in_s, in_z, name + "_wq", name + "_ws", name + "_wz", out_s, out_z,
                                                  name + "_bq"], [dst], pads=[1, 1, 1, 1]))
    nodes.append(helper.make_node("MaxPool", [dst], [dst.replace("r", "p")], kernel_shape=[2, 2], strides=[2, 2]))
nodes.append(helper.make_node("Flatten", ["p2q"], ["flatq"], axis=1))
wt = fc.weight.detach().numpy().T  # [784, 10]
s_w = np.float32(np.abs(wt).max() / 127)
init("fc_wq", np.clip(np.round(wt / s_w), -127, 127).astype(np.int8)), init("fc_ws", s_w), init("fc_wz", np.int8(0))
s_m, z_m = asymmetric(logits - fc.bias.detach())
init("ym_s", s_m), init("ym_z", z_m), init("fc_b", fc.bias.detach().numpy())
nodes += [helper.make_node("QLinearMatMul", ["flatq", "s2", "z2", "fc_wq", "fc_ws", "fc_wz", "ym_s", "ym_z"], ["ymq"]),
          helper.make_node("DequantizeLinear", ["ymq", "ym_s", "ym_z"], ["ym"]), helper.make_node("Add", ["ym", "fc_b"], ["logits"])]
save("qoperator", "logits")

# quantize_dynamic's Linear layers (an MLP on the pixels): each activation's scale from its
# tensor's range at run time, the weights int8 per tensor.
mlp = nn.Sequential(nn.Flatten(), nn.Linear(784, 64), nn.ReLU(), nn.Linear(64, 10))
train(mlp)
inits, nodes = [], []
init("shape", np.array([-1, 784], np.int64))
nodes.append(helper.make_node("Reshape", ["input", "shape"], ["h0"]))
for k, layer in ((1, mlp[1]), (2, mlp[3])):
    wt = layer.weight.detach().numpy().T
    s_w = np.float32(np.abs(wt).max() / 127)
    init(f"w{k}", np.clip(np.round(wt / s_w), -127, 127).astype(np.int8)), init(f"w{k}_z", np.int8(0))
    init(f"w{k}_s", s_w), init(f"b{k}", layer.bias.detach().numpy())
    nodes += [helper.make_node("DynamicQuantizeLinear", [f"h{k - 1}"], [f"q{k}", f"s{k}", f"z{k}"]),
              helper.make_node("MatMulInteger", [f"q{k}", f"w{k}", f"z{k}", f"w{k}_z"], [f"acc{k}"]),
              helper.make_node("Cast", [f"acc{k}"], [f"accf{k}"], to=T.FLOAT),
              helper.make_node("Mul", [f"s{k}", f"w{k}_s"], [f"scale{k}"]),
              helper.make_node("Mul", [f"accf{k}", f"scale{k}"], [f"mm{k}"]),
              helper.make_node("Add", [f"mm{k}", f"b{k}"], [f"lin{k}" if k == 1 else "logits"])]
    if k == 1:
        nodes.append(helper.make_node("Relu", ["lin1"], ["h1"]))
save("dynamic", "logits", opset=11)
