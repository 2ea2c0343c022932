#!/usr/bin/python3
"""Damaged and edited ONNX models through `spmd eval`: every failure must be a refusal.

  tools/fuzz/onnx_mutations.py sweep  SPMD DATA.h5 OUT_DIR MODEL.onnx...
      each int, ints and float attribute of each (op, attribute) pair the models hold,
      set in turn to 0, -1 and huge values (and floats to nan, inf, 1e30)
  tools/fuzz/onnx_mutations.py random SPMD DATA.h5 OUT_DIR FIRST_SEED COUNT MODEL.onnx...
      seeded random damage: truncated or flipped bytes, initializers cut short, mislabelled
      or dropped, shapes and attributes changed, nodes duplicated or renamed, ops swapped

A run passes when spmd exits 0, or exits non-zero within the time limit with an `error:` line
and no predictions file. A signal, a time-out, a bare C++ exception (std::bad_alloc) or a
silent failure is printed as BUG and its model kept in OUT_DIR. Session 25 found with it a
weight cut short run as zeros, strides of 0 (SIGFPE), a pad of -1 (heap corruption), a
Transpose perm with a negative entry (read outside), and bare std::bad_alloc for huge shapes.
Session 26: a pad of 2^24 in a Conv was OOM-killed (its output and scratch each fit the free
memory, not together): an op's new buffers now count together; a pool's pad as wide as its
kernel (2^20 pooled rows of padding) is refused, as ONNX Runtime does. Known and left: a Conv pad
near 2^20, or a ConvTranspose stride near 2^20, asks for outputs of several GiB that fit: slow
(seconds to a minute), then refused at a later node; ONNX and ONNX Runtime allow them. Data: 28x28 uint8 images (Fashion-MNIST).
Two-rank runs use mpirun (as root: OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1).
"""
import os
import random
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import onnx
from onnx import AttributeProto, TensorProto, numpy_helper

SIGNS = ("terminate called", "bad_alloc", "what()", "Segmentation", "AddressSanitizer")


def run_spmd(spmd, data, model, pred, ranks=1, batch=16, timeout=30):
    cmd = ([spmd] if ranks == 1 else ["mpirun", "-np", str(ranks), spmd]) + [
        "eval", "--data", data, "--model", "onnx", "--weights", model, "--predictions", pred,
        "--per-device-batch", str(batch)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, errors="replace")
        rc, err = p.returncode, p.stderr
    except subprocess.TimeoutExpired:
        rc, err = "timeout", ""
    bad = (rc == "timeout" or rc < 0 or rc >= 128 or any(s in err for s in SIGNS) or
           (rc != 0 and ("error:" not in err or os.path.exists(pred))))
    if os.path.exists(pred):
        os.remove(pred)
    last = [line for line in err.splitlines() if "error:" in line][:1]
    return bad, rc, (last[0] if last else err.strip()[-200:])[:220]


def judge(spmd, data, out, name, model, desc, **kw):
    path = os.path.join(out, name + ".onnx")
    onnx.save(model, path) if isinstance(model, onnx.ModelProto) else open(path, "wb").write(model)
    bad, rc, said = run_spmd(spmd, data, path, path + ".h5", **kw)
    if not bad:
        os.remove(path)
    return f"{'BUG' if bad else 'ok '} {desc} rc {rc} | {said}"


def sweep_jobs(models):
    seen, jobs = set(), []
    for path in models:
        m = onnx.load(path)
        for ni, node in enumerate(m.graph.node):
            for ai, a in enumerate(node.attribute):
                key = (node.op_type, a.name, len(a.ints))
                if key in seen:
                    continue
                seen.add(key)
                if a.type == AttributeProto.INT:
                    jobs += [(path, ni, ai, None, v) for v in (0, -1, 1 << 20, 1 << 31, 1 << 62)]
                elif a.type == AttributeProto.INTS:
                    jobs += [(path, ni, ai, k, v) for k in range(len(a.ints)) for v in (0, -1, 1 << 20, 1 << 62)]
                elif a.type == AttributeProto.FLOAT:
                    jobs += [(path, ni, ai, None, v) for v in (0.0, -1.0, float("nan"), float("inf"), 1e30)]
    return jobs


def sweep(spmd, data, out, models):
    def one(index_job):
        index, (path, ni, ai, k, v) = index_job
        m = onnx.load(path)
        node, a = m.graph.node[ni], m.graph.node[ni].attribute[ai]
        if a.type == AttributeProto.INT:
            a.i = v
        elif a.type == AttributeProto.INTS:
            a.ints[k] = v
        else:
            a.f = v
        desc = f"{os.path.basename(path)} {node.name} ({node.op_type}) {a.name}{'' if k is None else [k]}={v}"
        return judge(spmd, data, out, f"sweep_{index}", m, desc)
    with ThreadPoolExecutor(2) as pool:
        yield from pool.map(one, enumerate(sweep_jobs(models)))


def damage(rng, path):
    data = open(path, "rb").read()
    kind = rng.choice(["truncate", "flip", "cut_raw", "dims", "dtype", "drop_init", "rename_input", "op_type",
                       "duplicate_node", "input_dim", "attribute", "constant_ints"])
    if kind == "truncate":
        return kind, data[:rng.randrange(1, len(data))]
    if kind == "flip":
        b = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        return kind, bytes(b)
    m = onnx.load_from_string(data)
    g = m.graph
    inits = list(g.initializer)
    if kind == "cut_raw" and any(t.raw_data for t in inits):
        t = rng.choice([t for t in inits if t.raw_data])
        t.raw_data = t.raw_data[:len(t.raw_data) // 2]
    elif kind == "dims" and any(t.dims for t in inits):
        t = rng.choice([t for t in inits if t.dims])
        t.dims[rng.randrange(len(t.dims))] = rng.choice([0, 1, 5, 1 << 40, -3])
    elif kind == "dtype" and inits:
        rng.choice(inits).data_type = rng.choice([TensorProto.INT64, TensorProto.DOUBLE, TensorProto.FLOAT16,
                                                  TensorProto.INT8, TensorProto.STRING, 99])
    elif kind == "drop_init" and inits:
        del g.initializer[rng.randrange(len(inits))]
    elif kind == "rename_input":
        node = rng.choice(list(g.node))
        if node.input:
            node.input[rng.randrange(len(node.input))] = rng.choice(["nonexistent", "", g.node[-1].output[0]])
    elif kind == "op_type":
        rng.choice(list(g.node)).op_type = rng.choice(["Relu", "Add", "MatMul", "Conv", "Reshape", "Transpose",
                                                       "Softmax", "Gemm", "Concat", "MaxPool", "Gather", "NoSuchOp"])
    elif kind == "duplicate_node":
        node = rng.choice(list(g.node))
        g.node.insert(rng.randrange(len(g.node) + 1), onnx.NodeProto.FromString(node.SerializeToString()))
    elif kind == "input_dim" and g.input[0].type.tensor_type.shape.dim:
        dims = g.input[0].type.tensor_type.shape.dim
        dims[rng.randrange(len(dims))].dim_value = rng.choice([0, 1, 3, 27, 1 << 33])
    elif kind == "attribute":
        nodes = [n for n in g.node if n.attribute]
        a = rng.choice(rng.choice(nodes).attribute) if nodes else None
        if a is not None and a.type == AttributeProto.INT:
            a.i = rng.choice([-1, 0, 2, 7, 1 << 20, -(1 << 31)])
        elif a is not None and a.type == AttributeProto.INTS and a.ints:
            a.ints[rng.randrange(len(a.ints))] = rng.choice([-1, 0, 2, 7, 1 << 20])
    elif kind == "constant_ints":
        tensors = [a.t for n in g.node if n.op_type == "Constant" for a in n.attribute
                   if a.name == "value" and a.t.data_type == TensorProto.INT64]
        tensors += [t for t in inits if t.data_type == TensorProto.INT64]
        if tensors:
            t = rng.choice(tensors)
            v = numpy_helper.to_array(t).copy()
            if v.size:
                v.reshape(-1)[rng.randrange(v.size)] = rng.choice([-1, 0, 2, -5, 1 << 20, -(1 << 40)])
                t.CopyFrom(numpy_helper.from_array(v, t.name))
    return kind, m.SerializeToString()


def randomly(spmd, data, out, first, count, models):
    for seed in range(first, first + count):
        rng = random.Random(seed)
        path = rng.choice(models)
        kind, blob = damage(rng, path)
        ranks = rng.choice([1, 1, 2])
        yield judge(spmd, data, out, f"seed_{seed}", blob, f"seed {seed} {os.path.basename(path)} {kind} ranks {ranks}",
                    ranks=ranks, batch=rng.choice([1, 7, 16]))


def main():
    mode, spmd, data, out = sys.argv[1:5]
    os.makedirs(out, exist_ok=True)
    if mode == "sweep":
        lines = sweep(spmd, data, out, sys.argv[5:])
    else:
        lines = randomly(spmd, data, out, int(sys.argv[5]), int(sys.argv[6]), sys.argv[7:])
    bugs = 0
    for line in lines:
        bugs += line.startswith("BUG")
        print(line, flush=True)
    print(f"{bugs} BUG lines")
    sys.exit(1 if bugs else 0)


if __name__ == "__main__":
    main()
