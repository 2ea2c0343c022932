"""ONNX graphs whose BatchNormalization and Relu nodes spmd folds or fuses at load, and graphs
where it must not, built with onnx.helper from PyTorch modules' parameters (PyTorch's own
export folds BatchNormalization away), with PyTorch computing the unfused reference.
  onnx_fusion_models.py DIR DATA.h5   writes DIR/NAME.onnx and DIR/NAME.torch.npy (softmax)
Models:
  fusable   Conv(bias)-BN-Relu, Conv(no bias)-BN, Flatten, Gemm(transB)-BN-Relu, Gemm: every
            BN folded, every Relu fused (11 nodes -> 6)
  shared    the Conv's output read by the Relu and by an Add: the Relu must stay (6 nodes stay 6)
  wide      32-channel Conv-Relu layers (7 nodes -> 5), activations large beside the rest of a
            run: what --dry-run's memory estimate is checked on
  gelu      GELU as PyTorch exports nn.GELU (Div, Erf, Add, Mul, Mul; operands of Add and the
            Muls in both orders) twice: each one Gelu node (14 nodes -> 6)
  gelu_read the same with the second GELU's Erf output also read by another node: that one stays
            (16 nodes -> 12)
  not_gelu  the first one's last factor 0.25, not GELU's 0.5: that one stays (14 nodes -> 10)
"""
import sys

import h5py
import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper

torch.manual_seed(7)


def rand(*shape, lo=-0.5, hi=0.5):
    return (torch.rand(*shape) * (hi - lo) + lo).float()


def bn_params(c):
    return [rand(c, lo=0.5, hi=1.5), rand(c), rand(c), rand(c, lo=0.2, hi=2.0)]  # scale, shift, mean, var


def bn(x, p):
    return F.batch_norm(x, p[2], p[3], p[0], p[1], training=False, eps=1e-5)


class Graph:
    def __init__(self):
        self.nodes, self.inits = [], []

    def const(self, name, t):
        self.inits.append(numpy_helper.from_array(t.numpy(), name))
        return name

    def node(self, op, inputs, out, **attrs):
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def bn(self, x, p, out):
        names = [self.const(f"{out}.{k}", t) for k, t in zip("sbmv", p)]
        return self.node("BatchNormalization", [x] + names, out, epsilon=1e-5)

    def save(self, path, out):
        g = helper.make_graph(self.nodes, "g", [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 1, 28, 28])],
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT, ["batch", 10])], self.inits)
        model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
        onnx.checker.check_model(model)
        onnx.save(model, path)


def fusable(x):
    w1, b1, p1 = rand(6, 1, 3, 3), rand(6), bn_params(6)
    w2, p2 = rand(8, 6, 3, 3), bn_params(8)
    w3, b3, p3 = rand(32, 8 * 7 * 7, lo=-0.05, hi=0.05), rand(32), bn_params(32)
    w4, b4 = rand(10, 32), rand(10)
    y = F.relu(bn(F.conv2d(x, w1, b1, padding=1), p1))
    y = bn(F.conv2d(y, w2, None, stride=2, padding=1), p2)
    y = F.relu(bn(F.linear(torch.flatten(F.max_pool2d(y, 2), 1), w3, b3), p3))
    y = F.linear(y, w4, b4)
    g = Graph()
    t = g.node("Conv", ["input", g.const("w1", w1), g.const("b1", b1)], "c1", pads=[1, 1, 1, 1])
    t = g.node("Relu", [g.bn(t, p1, "bn1")], "r1")
    t = g.bn(g.node("Conv", [t, g.const("w2", w2)], "c2", pads=[1, 1, 1, 1], strides=[2, 2]), p2, "bn2")
    t = g.node("Flatten", [g.node("MaxPool", [t], "mp", kernel_shape=[2, 2], strides=[2, 2])], "fl")
    t = g.node("Gemm", [t, g.const("w3", w3), g.const("b3", b3)], "g3", transB=1)
    t = g.node("Relu", [g.bn(t, p3, "bn3")], "r3")
    out = g.node("Gemm", [t, g.const("w4", w4), g.const("b4", b4)], "logits", transB=1)
    return g, out, y


def shared(x):
    w1, b1 = rand(4, 1, 3, 3), rand(4)
    w2, b2 = rand(10, 4), rand(10)
    c = F.conv2d(x, w1, b1, padding=1)
    s = F.relu(c) + c
    y = F.linear(torch.flatten(F.adaptive_avg_pool2d(s, 1), 1), w2, b2)
    g = Graph()
    t = g.node("Conv", ["input", g.const("w1", w1), g.const("b1", b1)], "c1", pads=[1, 1, 1, 1])
    s_name = g.node("Add", [g.node("Relu", [t], "r1"), t], "s")
    t = g.node("Flatten", [g.node("GlobalAveragePool", [s_name], "gap")], "fl")
    out = g.node("Gemm", [t, g.const("w2", w2), g.const("b2", b2)], "logits", transB=1)
    return g, out, y


def wide(x):
    w1, b1 = rand(32, 1, 3, 3), rand(32)
    w2, b2 = rand(32, 32, 3, 3, lo=-0.1, hi=0.1), rand(32)
    w3, b3 = rand(10, 32), rand(10)
    y = F.relu(F.conv2d(F.relu(F.conv2d(x, w1, b1, padding=1)), w2, b2, stride=2, padding=1))
    y = F.linear(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1), w3, b3)
    g = Graph()
    t = g.node("Relu", [g.node("Conv", ["input", g.const("w1", w1), g.const("b1", b1)], "c1", pads=[1, 1, 1, 1])], "r1")
    t = g.node("Conv", [t, g.const("w2", w2), g.const("b2", b2)], "c2", pads=[1, 1, 1, 1], strides=[2, 2])
    t = g.node("Flatten", [g.node("GlobalAveragePool", [g.node("Relu", [t], "r2")], "gap")], "fl")
    out = g.node("Gemm", [t, g.const("w3", w3), g.const("b3", b3)], "logits", transB=1)
    return g, out, y


def gelu_nodes(g, x, name, swap=False, factor=0.5):
    """x * (erf(x / sqrt 2) + 1) * factor as the exporter writes GELU (factor 0.5; operands swapped: swap)."""
    e = g.node("Erf", [g.node("Div", [x, g.const(f"{name}.d", torch.tensor(1.4142135381698608))], f"{name}.div")], f"{name}.erf")
    one = g.const(f"{name}.a", torch.tensor(1.0))
    a = g.node("Add", [one, e] if swap else [e, one], f"{name}.add")
    m = g.node("Mul", [a, x] if swap else [x, a], f"{name}.mul")
    half = g.const(f"{name}.h", torch.tensor(factor))
    return g.node("Mul", [half, m] if swap else [m, half], f"{name}.out"), e


def gelu(x, read_erf=False, factor=0.5):
    w1, b1, w2, b2, w3, b3 = rand(32, 784, lo=-0.1, hi=0.1), rand(32), rand(32, 32), rand(32), rand(10, 32), rand(10)
    h = F.gelu(F.linear(torch.flatten(x, 1), w1, b1)) * (factor / 0.5)
    h2 = F.linear(h, w2, b2)
    y = F.linear(F.gelu(h2), w3, b3) + (torch.erf(h2 / 1.4142135381698608).sum(1, keepdim=True) if read_erf else 0)
    g = Graph()
    t = g.node("Gemm", [g.node("Flatten", ["input"], "fl"), g.const("w1", w1), g.const("b1", b1)], "g1", transB=1)
    t, _ = gelu_nodes(g, t, "gelu1", factor=factor)
    t = g.node("Gemm", [t, g.const("w2", w2), g.const("b2", b2)], "g2", transB=1)
    t, e = gelu_nodes(g, t, "gelu2", swap=True)
    out = g.node("Gemm", [t, g.const("w3", w3), g.const("b3", b3)], "logits" if not read_erf else "g3", transB=1)
    if read_erf:
        s = g.node("ReduceSum", [e, g.const("axes", torch.tensor([1]))], "erf_sum", keepdims=1)
        out = g.node("Add", [out, s], "logits")
    return g, out, y


def main():
    work, data = sys.argv[1:3]
    with h5py.File(data) as f:
        x = torch.from_numpy(f["images"][...].astype(np.float32) / np.float32(255)).permute(0, 3, 1, 2)
    builds = {"fusable": fusable, "shared": shared, "wide": wide, "gelu": gelu, "gelu_read": lambda x: gelu(x, True),
              "not_gelu": lambda x: gelu(x, factor=0.25)}
    for name, build in builds.items():
        with torch.no_grad():
            g, out, y = build(x)
        g.save(f"{work}/{name}.onnx", out)
        np.save(f"{work}/{name}.torch.npy", torch.softmax(y, dim=1).numpy())


if __name__ == "__main__":
    main()
