"""Node tests in ONNX's backend-test layout (DIR/node/test_NAME/model.onnx, test_data_set_0/
input_0.pb, output_K.pb) for the rules that changed after opset 17, which Debian's ONNX 1.12
test data predates: Gelu (20), Mish, GroupNormalization (18; 21 changed Scale and B), Pad's axes
input (18) and wrap mode (19), the Reduce ops' axes input (18), Split's num_outputs (18),
AveragePool's dilations (19), and files of IR versions 9 and 10 as PyTorch 2 writes them; and
what ONNX's data covers thinly: model-local functions (PyTorch 2's exporter writes them), If (a condition known at load, one known only when the graph
runs, branches that read values of the graphs around them, nested, or pass one on) and pools
over three spatial dimensions. The expected outputs are ONNX Runtime's (the reference
implementation, npm's onnxruntime-node).

  onnx_new_opsets.py DIR ORT_RUN_JS"""
import os, subprocess, sys
import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto as T

out_dir, ort_run = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(7)


def case(name, opset, nodes, x_shape, outputs, inits=(), ir=8, functions=(), ort_level="all"):
    """One test: input 'x' float [x_shape] (random), the graph's outputs by name; functions: the
    model's local functions (domain "local"); ort_level: ONNX Runtime's graph optimisations
    ("disabled": each node as ONNX defines it, where "all" would fuse QDQ pairs into integer ops)."""
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", T.FLOAT, x_shape)],
                              [helper.make_tensor_value_info(o, T.FLOAT, None) for o in outputs],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)] +
                              ([helper.make_opsetid("local", 1)] if functions else []), functions=list(functions))
    model.ir_version = ir
    folder = os.path.join(out_dir, "node", f"test_{name}")
    os.makedirs(os.path.join(folder, "test_data_set_0"), exist_ok=True)
    onnx.save(model, os.path.join(folder, "model.onnx"))
    x = rng.normal(size=x_shape).astype(np.float32)
    with open(os.path.join(folder, "test_data_set_0", "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(x, "x").SerializeToString())
    raw = os.path.join(folder, "x.f32")
    x.tofile(raw)
    lines = subprocess.run(["node", ort_run, os.path.join(folder, "model.onnx"), raw, ",".join(map(str, x_shape)),
                            os.path.join(folder, "y.f32")], check=True, capture_output=True, text=True,
                           env={**os.environ, "ORT_GRAPH_OPTIMIZATION": ort_level}).stdout.split("\n")
    for k, line in enumerate(l for l in lines if l.strip()):
        dims = [int(d) for d in line.split()[1].split(",") if d] if len(line.split()) > 1 else []
        y = np.fromfile(os.path.join(folder, "y.f32" + (f".{k}" if k else "")), "<f4").reshape(dims)
        with open(os.path.join(folder, "test_data_set_0", f"output_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(y, outputs[k]).SerializeToString())
        # The output's shape in the file too: ONNX 1.12's checker wants one (files up to opset 17).
        model.graph.output[k].CopyFrom(helper.make_tensor_value_info(outputs[k], T.FLOAT, list(y.shape)))
    onnx.save(model, os.path.join(folder, "model.onnx"))


n = helper.make_node
i64 = lambda *v: np.array(v, np.int64)
case("gelu_20", 20, [n("Gelu", ["x"], ["y"])], [3, 4, 5], ["y"])
case("gelu_tanh_20", 20, [n("Gelu", ["x"], ["y"], approximate="tanh")], [3, 4, 5], ["y"])
case("mish_18", 18, [n("Mish", ["x"], ["y"])], [3, 4, 5], ["y"], ir=9)
case("group_norm_18", 18, [n("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2, epsilon=1e-4)], [2, 6, 3, 4], ["y"],
     [("s", rng.normal(size=2).astype(np.float32)), ("b", rng.normal(size=2).astype(np.float32))])
case("group_norm_21", 21, [n("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=3)], [2, 6, 3, 4], ["y"],
     [("s", rng.normal(size=6).astype(np.float32)), ("b", rng.normal(size=6).astype(np.float32))], ir=10)
case("pad_axes_18", 18, [n("Pad", ["x", "p", "v", "a"], ["y"])], [2, 3, 4, 5], ["y"],
     [("p", i64(1, 2, 0, 3)), ("v", np.array(0.5, np.float32)), ("a", i64(1, -1))])
case("pad_reflect_axes_18", 18, [n("Pad", ["x", "p", "", "a"], ["y"], mode="reflect")], [2, 3, 4, 5], ["y"],
     [("p", i64(2, 1)), ("a", i64(2))])
case("pad_wrap_19", 19, [n("Pad", ["x", "p"], ["y"], mode="wrap")], [2, 3, 4, 5], ["y"], [("p", i64(0, 1, 2, 3, 0, 2, 1, 4))])
for op in ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceSumSquare",
           "ReduceLogSumExp"):
    case(f"{op.lower()}_axes_input_18", 18, [n(op, ["x", "a"], ["y"], keepdims=0)], [3, 4, 5], ["y"], [("a", i64(0, -1))])
case("reduce_mean_noop_18", 18, [n("ReduceMean", ["x"], ["y"], noop_with_empty_axes=1)], [3, 4], ["y"])
case("split_num_outputs_18", 18, [n("Split", ["x"], ["y0", "y1", "y2"], axis=1, num_outputs=3)], [2, 7, 3], ["y0", "y1", "y2"])
case("split_sizes_18", 18, [n("Split", ["x", "s"], ["y0", "y1"], axis=-1)], [2, 3, 9], ["y0", "y1"], [("s", i64(4, 5))])
case("averagepool_dilations_19", 19, [n("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], dilations=[2, 2], pads=[1, 1, 1, 1])],
     [1, 2, 7, 7], ["y"])
case("maxpool_dilations_19", 19, [n("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], dilations=[2, 1], strides=[2, 2])],
     [1, 2, 9, 8], ["y"])
case("conv_relu_22", 22, [n("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), n("Relu", ["c"], ["y"])], [2, 3, 6, 6], ["y"],
     [("w", rng.normal(size=(4, 3, 3, 3)).astype(np.float32))], ir=10)
case("softmax_flatten_21", 21, [n("Flatten", ["x"], ["f"]), n("Softmax", ["f"], ["y"])], [2, 3, 4], ["y"], ir=10)


# If. Branches read 'w' (an initializer of the main graph), 't' (computed there), and the inner If
# of if_nested reads 't' two graphs out.
g = helper.make_graph
vi = lambda name: helper.make_tensor_value_info(name, T.FLOAT, [2, 3, 4])
shape_is = lambda axis, size, out: [n("Shape", ["x"], [out + "_s"]), n("Gather", [out + "_s", out + "_i"], [out + "_d"], axis=0),
                                    n("Equal", [out + "_d", out + "_n"], [out])]
shape_consts = lambda out, axis, size: [(out + "_i", np.array(axis, np.int64)), (out + "_n", np.array(size, np.int64))]
relu_w = g([n("Relu", ["x"], ["r"]), n("Mul", ["r", "w"], ["a"])], "then", [], [vi("a")])
neg_t = g([n("Neg", ["t"], ["b"])], "else", [], [vi("b")])
case("if_shape_13", 13, [n("Sigmoid", ["x"], ["t"])] + shape_is(1, 3, "c") + [n("If", ["c"], ["y"], then_branch=relu_w, else_branch=neg_t)],
     [2, 3, 4], ["y"], [("w", rng.normal(size=4).astype(np.float32))] + shape_consts("c", 1, 3))
case("if_shape_else_13", 13, [n("Sigmoid", ["x"], ["t"])] + shape_is(1, 5, "c") + [n("If", ["c"], ["y"], then_branch=relu_w, else_branch=neg_t)],
     [2, 3, 4], ["y"], [("w", rng.normal(size=4).astype(np.float32))] + shape_consts("c", 1, 5))
# A constant condition: decided at load; the other branch's op (Trilu) is one spmd does not run.
case("if_constant_14", 14, [n("Sigmoid", ["x"], ["t"]), n("If", ["k"], ["y"], then_branch=neg_t,
                                                       else_branch=g([n("Trilu", ["x"], ["u"])], "else", [], [vi("u")]))],
     [2, 3, 4], ["y"], [("k", np.array(True))])
inner = n("If", ["c2"], ["m"], then_branch=g([n("Mul", ["t", "t"], ["tt"])], "t2", [], [vi("tt")]),
          else_branch=g([n("Add", ["t", "w"], ["tw"])], "e2", [], [vi("tw")]))
outer_then = g(shape_is(2, 4, "c2") + [inner, n("Sub", ["m", "x"], ["o"])], "then", [], [vi("o")])
pass_on = g([n("Identity", ["t"], ["p"])], "else", [], [vi("p")])  # a value of the main graph passed on
case("if_nested_13", 13, [n("Sigmoid", ["x"], ["t"])] + shape_is(0, 2, "c") + [n("If", ["c"], ["y"], then_branch=outer_then, else_branch=pass_on)],
     [2, 3, 4], ["y"], [("w", rng.normal(size=4).astype(np.float32))] + shape_consts("c", 0, 2) + shape_consts("c2", 2, 4))
case("if_pass_on_13", 13, [n("Sigmoid", ["x"], ["t"])] + shape_is(0, 7, "c") + [n("If", ["c"], ["y"], then_branch=outer_then, else_branch=pass_on)],
     [2, 3, 4], ["y"], [("w", rng.normal(size=4).astype(np.float32))] + shape_consts("c", 0, 7) + shape_consts("c2", 2, 4))
# Pools over three spatial dimensions.
case("maxpool_3d_ceil_13", 13, [n("MaxPool", ["x"], ["y"], kernel_shape=[2, 3, 2], strides=[2, 2, 1], pads=[1, 0, 1, 0, 1, 0],
                                  ceil_mode=1)], [1, 2, 5, 6, 4], ["y"])
case("averagepool_3d_pads_13", 13, [n("AveragePool", ["x"], ["y"], kernel_shape=[3, 1, 2], pads=[1, 0, 1, 1, 0, 0],
                                      count_include_pad=0)], [2, 3, 4, 3, 5], ["y"])
case("averagepool_3d_include_pad_19", 19, [n("AveragePool", ["x"], ["y"], kernel_shape=[2, 2, 2], dilations=[1, 2, 1],
                                            pads=[1, 1, 1, 1, 1, 1], count_include_pad=1)], [1, 2, 4, 5, 4], ["y"])
# Einsum's batched-GEMM path with operands and product in other layouts than their own.
case("einsum_out_layout_12", 12, [n("Einsum", ["x", "w"], ["y"], equation="bij,jk->kbi")], [2, 3, 4], ["y"],
     [("w", rng.normal(size=(4, 5)).astype(np.float32))])
case("einsum_all_layouts_12", 12, [n("Einsum", ["w", "x"], ["y"], equation="jk,bij->bik")], [2, 3, 4], ["y"],
     [("w", rng.normal(size=(4, 5)).astype(np.float32))])

# Model-local functions: called twice with an attribute of the call's (ref_attr_name) and one
# without (the op's default), a function that calls another, an optional output left unnamed.
act = onnx.AttributeProto()
act.name, act.ref_attr_name, act.type = "alpha", "alpha", onnx.AttributeProto.FLOAT
linear_act = helper.make_function("local", "LinearAct", ["v", "w"], ["y"],
                                  [n("MatMul", ["v", "w"], ["m"]), helper.make_node("LeakyRelu", ["m"], ["y"])],
                                  [helper.make_opsetid("", 17)], ["alpha"])
linear_act.node[1].attribute.extend([act])
twice = helper.make_function("local", "Twice", ["v", "w"], ["y", "spare"],
                             [n("LinearAct", ["v", "w"], ["h"], domain="local", alpha=0.3),
                              n("LinearAct", ["h", "w"], ["y"], domain="local"), n("Neg", ["h"], ["spare"])],
                             [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)])
case("local_functions_17", 17, [n("Twice", ["x", "w"], ["y", ""], domain="local"),
                                n("LinearAct", ["x", "w"], ["z"], domain="local", alpha=0.05)],
     [2, 3, 4], ["y", "z"], [("w", rng.normal(size=(4, 4)).astype(np.float32))], functions=[linear_act, twice])
# Resize after opset 17: axes and keep_aspect_ratio_policy (18), half_pixel_symmetric (19).
f32 = lambda *v: np.array(v, np.float32)
case("resize_axes_scales_18", 18, [n("Resize", ["x", "", "s"], ["y"], mode="linear", axes=[2, 3])], [1, 2, 4, 5], ["y"],
     [("s", f32(1.5, 0.6))], ir=9)
case("resize_not_larger_18", 18, [n("Resize", ["x", "", "", "z"], ["y"], mode="cubic", axes=[2, 3],
                                    keep_aspect_ratio_policy="not_larger")], [1, 2, 4, 6], ["y"], [("z", i64(7, 7))], ir=9)
case("resize_not_smaller_18", 18, [n("Resize", ["x", "", "", "z"], ["y"], mode="nearest", axes=[3, 2],
                                     keep_aspect_ratio_policy="not_smaller", nearest_mode="round_prefer_ceil")],
     [1, 2, 4, 6], ["y"], [("z", i64(3, 3))], ir=9)
case("resize_symmetric_19", 19, [n("Resize", ["x", "", "s"], ["y"], mode="linear",
                                   coordinate_transformation_mode="half_pixel_symmetric")], [1, 2, 4, 5], ["y"],
     [("s", f32(1, 1, 1.7, 0.8))], ir=9)
case("resize_crop_19", 19, [n("Resize", ["x", "r", "", "z"], ["y"], mode="cubic", coordinate_transformation_mode="tf_crop_and_resize",
                              extrapolation_value=-1.0, exclude_outside=1)], [1, 2, 6, 5], ["y"],
     [("r", f32(0, 0, -0.2, 0.1, 1, 1, 0.9, 1.3)), ("z", i64(1, 2, 5, 4))], ir=9)
# ConvTranspose's padding rules: SAME_LOWER, and output_shape with the larger half first.
case("convtranspose_same_lower_13", 13, [n("ConvTranspose", ["x", "w"], ["y"], auto_pad="SAME_LOWER", strides=[2, 3])],
     [1, 2, 3, 4], ["y"], [("w", rng.normal(size=(2, 3, 4, 3)).astype(np.float32))])
case("convtranspose_output_shape_13", 13, [n("ConvTranspose", ["x", "w", "b"], ["y"], output_shape=[6, 9], strides=[2, 2],
                                            group=2, dilations=[1, 2])],
     [1, 4, 3, 4], ["y"], [("w", rng.normal(size=(4, 1, 3, 2)).astype(np.float32)), ("b", f32(0.5, -0.25))])
# Cast to float16 / bfloat16 rounds (to nearest even): the rounding error itself, scaled up.
for to, name in ((T.FLOAT16, "float16"), (T.BFLOAT16, "bfloat16")):
    case(f"cast_{name}_rounding_13", 13, [n("Cast", ["x"], ["h"], to=to), n("Cast", ["h"], ["back"], to=T.FLOAT),
                                          n("Sub", ["back", "x"], ["e"]), n("Mul", ["e", "k"], ["y"])], [3, 4, 5], ["y"],
         [("k", np.array(1e4, np.float32))])
# Indexing: ScatterND / ScatterElements reductions (16, 18) with repeated indices, TopK's ties
# (equal values: the lower index first) and smallest, Trilu below the diagonal, OneHot's axis.
case("scatternd_max_18", 18, [n("ScatterND", ["x", "i", "u"], ["y"], reduction="max")], [4, 5], ["y"],
     [("i", i64(1, 3, 1).reshape(3, 1)), ("u", rng.normal(size=(3, 5)).astype(np.float32))])
case("scatter_elements_mul_16", 16, [n("ScatterElements", ["x", "i", "u"], ["y"], axis=1, reduction="mul")], [3, 4], ["y"],
     [("i", i64(0, 0, 3, 1, 1, 1).reshape(3, 2)), ("u", rng.normal(size=(3, 2)).astype(np.float32))])
case("topk_ties_smallest_11", 11, [n("Mul", ["x", "two"], ["m"]), n("Round", ["m"], ["r"]),
                                   n("TopK", ["r", "k"], ["v", "ix"], axis=1, largest=0), n("Cast", ["ix"], ["y"], to=T.FLOAT)],
     [3, 9, 2], ["v", "y"], [("two", np.array(2.0, np.float32)), ("k", i64(4))])
case("trilu_lower_14", 14, [n("Trilu", ["x", "k"], ["y"], upper=0)], [2, 4, 6], ["y"], [("k", np.array(-1, np.int64))])
case("onehot_axis_11", 11, [n("Abs", ["x"], ["a"]), n("Floor", ["a"], ["f"]), n("OneHot", ["f", "d", "v"], ["y"], axis=1)],
     [2, 3], ["y"], [("d", np.array(3.0, np.float32)), ("v", f32(-1, 2))])
# GridSample (16) in every mode, padding and align_corners, the grid reaching past [-1, 1] (where the
# padding rules differ).
for mode in ("bilinear", "nearest", "bicubic"):
    for padding in ("zeros", "border", "reflection"):
        for align in (0, 1):
            case(f"gridsample_{mode}_{padding}_{align}_16", 16,
                 [n("GridSample", ["x", "g"], ["y"], mode=mode, padding_mode=padding, align_corners=align)], [2, 3, 5, 6], ["y"],
                 [("g", rng.uniform(-1.6, 1.6, size=(2, 4, 7, 2)).astype(np.float32))])
# int64 reductions and Neg / Abs (shape arithmetic: torch.std's element count), exact.
for op in ("ReduceSum", "ReduceProd", "ReduceMax", "ReduceMin"):
    case(f"{op.lower()}_int64_18", 18, [n("Mul", ["x", "three"], ["m"]), n("Cast", ["m"], ["i"], to=T.INT64), n("Neg", ["i"], ["ng"]),
                                        n("Abs", ["ng"], ["ab"]), n("Sub", ["ab", "ng"], ["d"]),
                                        n(op, ["d", "a"], ["r"], keepdims=1), n("Cast", ["r"], ["y"], to=T.FLOAT)],
         [3, 4, 5], ["y"], [("three", np.array(3.0, np.float32)), ("a", i64(1))])
# Loop: a trip count of 5 and a condition that ends it after 4 iterations, a loop-carried value,
# a scan output stacked over the iterations, the body reading a value computed outside it
# ('t') and an initializer ('half').
loop_body = helper.make_graph(
    [n("Gather", ["t", "iter"], ["row"], axis=0), n("Mul", ["acc", "half"], ["decayed"]), n("Add", ["decayed", "row"], ["acc_out"]),
     n("Cast", ["iter"], ["fi"], to=T.FLOAT), n("Mul", ["acc_out", "fi"], ["scan"]), n("Less", ["iter", "three"], ["cond_out"])],
    "body", [helper.make_tensor_value_info("iter", T.INT64, []), helper.make_tensor_value_info("cond", T.BOOL, []),
             helper.make_tensor_value_info("acc", T.FLOAT, None)],
    [helper.make_tensor_value_info(v, t, None) for v, t in (("cond_out", T.BOOL), ("acc_out", T.FLOAT), ("scan", T.FLOAT))],
    [numpy_helper.from_array(np.array(3, np.int64), "three")])
case("loop_carried_scan_13", 13, [n("Exp", ["x"], ["t"]), n("ReduceSum", ["x", "a0"], ["acc0"], keepdims=0),
                                  n("Loop", ["m", "go", "acc0"], ["acc", "scans"], body=loop_body)],
     [6, 4], ["acc", "scans"], [("m", np.array(5, np.int64)), ("go", np.array(True)), ("a0", i64(0)),
                                ("half", np.array(0.5, np.float32))])
# CastLike (15; PyTorch 2's exporter writes it) to a type no declaration states (a Shape's int64) and to an
# initializer's bool (non-zero is 1, not a truncation).
case("castlike_computed_like_15", 15, [n("Mul", ["x", "three"], ["m"]), n("Shape", ["x"], ["s"]), n("CastLike", ["m", "s"], ["i"]),
                                       n("Cast", ["i"], ["y"], to=T.FLOAT)], [3, 4], ["y"], [("three", np.array(3.0, np.float32))])
case("castlike_bool_like_15", 15, [n("CastLike", ["x", "flag"], ["b"]), n("Cast", ["b"], ["y"], to=T.FLOAT)], [3, 4], ["y"],
     [("flag", np.array(True))])
# MaxPool's Indices output (PyTorch 2's exporter writes max_pool2d as max_pool2d_with_indices):
# ties (rounded values: the first maximum), padding, dilations, column-major storage_order.
for order in (0, 1):
    case(f"maxpool_indices_order{order}_12", 12, [n("Mul", ["x", "two"], ["m"]), n("Round", ["m"], ["r"]),
                                                  n("MaxPool", ["r"], ["v", "ix"], kernel_shape=[3, 2], strides=[2, 1], pads=[1, 0, 1, 1],
                                                    dilations=[1, 2], storage_order=order),
                                                  n("Cast", ["ix"], ["y"], to=T.FLOAT)],
         [2, 3, 7, 6], ["v", "y"], [("two", np.array(2.0, np.float32))])
# GatherND (tf.gather_nd as tf2onnx exports it): whole slices (depth 1), and batch_dims 1 with
# index pairs, some negative.
case("gathernd_slices_13", 13, [n("GatherND", ["x", "i"], ["y"])], [4, 3, 5], ["y"], [("i", i64(3, 0, -1).reshape(3, 1))])
case("gathernd_batch_dims_13", 13, [n("GatherND", ["x", "i"], ["y"], batch_dims=1)], [2, 3, 4, 5], ["y"],
     [("i", i64(0, 1, 2, -1, -3, 3, 1, 0).reshape(2, 2, 2))])
# NonZero on values known only at run time (its output's length too).
case("nonzero_runtime_13", 13, [n("Relu", ["x"], ["r"]), n("NonZero", ["r"], ["i"]), n("Cast", ["i"], ["y"], to=T.FLOAT)], [3, 4, 2],
     ["y"])
# Storage that a node may take over where a value dies (OnnxRunner): the graph's input flattened
# with its Shape read after it (the shape must survive), a Pad of zeros (PyTorch's AvgPool2d
# export) likewise, a Pad cropping and padding the last axis at once, and a Loop body whose
# captured value is reshaped in every iteration (a body's inputs are set once for all its runs:
# never taken).
case("taken_input_shape_read_after_13", 13, [n("Flatten", ["x"], ["f"]), n("Shape", ["x"], ["s"]),
                                             n("Gather", ["s", "one"], ["d"], axis=0), n("Cast", ["d"], ["df"], to=T.FLOAT),
                                             n("Mul", ["f", "df"], ["y"])], [2, 3, 4], ["y"], [("one", np.array(1, np.int64))])
case("pad_zeros_shape_read_after_13", 13, [n("Sigmoid", ["x"], ["g"]), n("Pad", ["g", "p"], ["q"]), n("AveragePool", ["q"], ["a"], kernel_shape=[2, 2]),
                                           n("Shape", ["g"], ["s"]), n("Gather", ["s", "zero"], ["b"], axis=0),
                                           n("Unsqueeze", ["b", "zero1"], ["b1"]), n("Concat", ["b1", "minus1"], ["shp"], axis=0),
                                           n("Reshape", ["a", "shp"], ["y"])], [2, 3, 6, 4], ["y"],
     [("p", i64(0, 0, 0, 0, 0, 0, 0, 0)), ("zero", np.array(0, np.int64)), ("zero1", i64(0)), ("minus1", i64(-1))])
for mode in ("constant", "edge", "reflect"):
    case(f"pad_crop_and_pad_{mode}_13", 13, [n("Pad", ["x", "p"], ["y"], mode=mode)], [2, 3, 5, 7], ["y"],
         [("p", i64(0, 0, 2, -2, 0, 1, -1, 3))])
captured_body = helper.make_graph(
    [n("Reshape", ["t", "flat"], ["tf"]), n("ReduceSum", ["tf", "a1"], ["s"], keepdims=0), n("Add", ["acc", "s"], ["acc_out"]),
     n("Identity", ["cond"], ["cond_out"])],
    "captured_body", [helper.make_tensor_value_info("iter", T.INT64, []), helper.make_tensor_value_info("cond", T.BOOL, []),
                      helper.make_tensor_value_info("acc", T.FLOAT, None)],
    [helper.make_tensor_value_info(v, t, None) for v, t in (("cond_out", T.BOOL), ("acc_out", T.FLOAT))],
    [numpy_helper.from_array(i64(4, -1), "flat"), numpy_helper.from_array(i64(1), "a1")])
case("loop_captured_reshaped_13", 13, [n("Exp", ["x"], ["t"]), n("ReduceSum", ["x", "a0"], ["acc0"], keepdims=0),
                                       n("Loop", ["m", "go", "acc0"], ["acc"], body=captured_body)],
     [2, 4, 3], ["acc"], [("m", np.array(4, np.int64)), ("go", np.array(True)), ("a0", i64(0, 2))])
# Quantization as onnxruntime's quantizers write it: QDQ pairs (quantize_static's default format)
# saturating at both ends, per tensor (uint8) and per channel (int8, axis 1); a Conv between QDQ
# pairs with int8 weights per output channel (ONNX Runtime's optimisations would fuse these into
# integer kernels: compared with each node as ONNX defines it); the QOperator format's
# QLinearConv (grouped, strided, padded, int32 bias, per-channel weight scales) and QLinearMatMul
# (a 3-D a); quantize_dynamic's DynamicQuantizeLinear + MatMulInteger and + ConvInteger
# (weights' zero point not 0), scaled back to float as it writes them.
# ONNX Runtime's uint8 x int8 kernels multiply-add byte pairs with VPMADDUBSW on CPUs without
# VNNI (AVX2; AVX-512 before Cascade Lake), which saturates a pair's sum at 32767: there the int8
# weights stay within +-64 (as quantize_static's reduce_range does), so that no pair can
# saturate (255 x 64 x 2 < 32767) and ONNX Runtime's result stays the ops' definition.
# SPMD_TEST_NO_VNNI=1 takes this branch on any host (tests/README.md: an AVX2 host's run).
with open("/proc/cpuinfo") as f:
    vnni = any(flag in ("avx512_vnni", "avx_vnni") for line in f if line.startswith("flags") for flag in line.split())
vnni = vnni and os.environ.get("SPMD_TEST_NO_VNNI") != "1"
w8 = 128 if vnni else 65  # int8 weights drawn from [-(w8 - 1), w8)
u8 = lambda *v: np.array(v, np.uint8)
s8 = lambda *v: np.array(v, np.int8)
q = lambda name, to: [n("QuantizeLinear", [name, to + "_s", to + "_z"], [to]), n("DequantizeLinear", [to, to + "_s", to + "_z"], [to + "_f"])]
case("qdq_uint8_13", 13, q("x", "q"), [2, 3, 4], ["q_f"], [("q_s", np.array(0.01, np.float32)), ("q_z", np.array(128, np.uint8))],
     ort_level="disabled")
case("qdq_axis_int8_13", 13, [n("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1), n("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1)],
     [2, 3, 4], ["y"], [("s", f32(0.004, 0.02, 0.05)), ("z", s8(-3, 0, 5))], ort_level="disabled")
case("qdq_conv_13", 13, q("x", "xq") + [n("DequantizeLinear", ["w_q", "w_s", "w_z"], ["w"], axis=0),
                                       n("Conv", ["xq_f", "w", "b"], ["c"], pads=[1, 1, 1, 1]), n("Relu", ["c"], ["r"])] + q("r", "yq"),
     [2, 3, 5, 5], ["yq_f"], [("xq_s", np.array(0.03, np.float32)), ("xq_z", np.array(120, np.uint8)),
                              ("w_q", rng.integers(-127, 128, size=(4, 3, 3, 3)).astype(np.int8)), ("w_s", f32(0.002, 0.004, 0.003, 0.001)),
                              ("w_z", s8(0, 0, 0, 0)), ("b", f32(0.1, -0.2, 0.05, 0)), ("yq_s", np.array(0.02, np.float32)),
                              ("yq_z", np.array(0, np.uint8))], ort_level="disabled")
case("qlinear_conv_10", 10, [n("QuantizeLinear", ["x", "x_s", "x_z"], ["xq"]),
                             n("QLinearConv", ["xq", "x_s", "x_z", "w", "w_s", "w_z", "y_s", "y_z", "b"], ["yq"], group=2, strides=[2, 2],
                               pads=[1, 1, 1, 1]),
                             n("DequantizeLinear", ["yq", "y_s", "y_z"], ["y"])],
     [2, 4, 6, 6], ["y"], [("x_s", np.array(0.025, np.float32)), ("x_z", np.array(128, np.uint8)),
                           ("w", rng.integers(1 - w8, w8, size=(6, 2, 3, 3)).astype(np.int8)),
                           ("w_s", rng.uniform(0.001, 0.004, size=6).astype(np.float32)), ("w_z", np.zeros(6, np.int8)),
                           ("y_s", np.array(0.05, np.float32)), ("y_z", np.array(100, np.uint8)),
                           ("b", rng.integers(-2000, 2000, size=6).astype(np.int32))])
case("qlinear_matmul_10", 10, [n("QuantizeLinear", ["x", "x_s", "x_z"], ["xq"]),
                               n("QLinearMatMul", ["xq", "x_s", "x_z", "w", "w_s", "w_z", "y_s", "y_z"], ["yq"]),
                               n("DequantizeLinear", ["yq", "y_s", "y_z"], ["y"])],
     [2, 3, 8], ["y"], [("x_s", np.array(0.02, np.float32)), ("x_z", np.array(125, np.uint8)),
                        ("w", rng.integers(1 - w8, w8, size=(8, 5)).astype(np.int8)), ("w_s", np.array(0.003, np.float32)),
                        ("w_z", np.array(0, np.int8)), ("y_s", np.array(0.04, np.float32)), ("y_z", np.array(90, np.uint8))])
case("dynamic_matmul_integer_11", 11, [n("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
                                       n("MatMulInteger", ["xq", "w", "xz", "w_z"], ["acc"]), n("Cast", ["acc"], ["accf"], to=T.FLOAT),
                                       n("Mul", ["xs", "w_s"], ["scale"]), n("Mul", ["accf", "scale"], ["y"])],
     [3, 8], ["y"], [("w", rng.integers(1 - w8, w8, size=(8, 6)).astype(np.int8)), ("w_z", np.array(0, np.int8)),
                     ("w_s", np.array(0.004, np.float32))])
case("dynamic_conv_integer_11", 11, [n("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
                                     n("ConvInteger", ["xq", "w", "xz", "w_z"], ["acc"], pads=[1, 0, 1, 1], strides=[1, 2]),
                                     n("Cast", ["acc"], ["accf"], to=T.FLOAT), n("Mul", ["xs", "w_s"], ["scale"]),
                                     n("Mul", ["accf", "scale"], ["y"])],
     [2, 2, 5, 6], ["y"], [("w", rng.integers(0, 256, size=(3, 2, 2, 3)).astype(np.uint8)), ("w_z", np.array(7, np.uint8)),
                           ("w_s", np.array(0.004, np.float32))])
