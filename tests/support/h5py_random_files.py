#!/usr/bin/python3
"""Random HDF5 files as h5py users write them, for tests/cli/h5py_random_files.sh.

  make DIR FIRST COUNT   writes DIR/fS.h5 for seeds FIRST..FIRST+COUNT-1, each with its logreg
                         weights DIR/fS_w.h5 and a native contiguous copy DIR/fS_ref.h5 of its
                         values (float32; float64 stays float64); DIR/files.txt has one line per file:
                         seed ranks devices batch strategy scale features_key labels_key
  check SEED DIR PRED    spmd's predictions file against numpy's logits of the same file
  same A.h5 B.h5         the two predictions files hold the same bits (rows, probabilities, labels)

Each file draws its own: rows (1 to 2500, fewer than a layout's devices too), feature shape
([N, D], [N, H, W], [N, H, W, C]), feature dtype (every integer width, float16/32/64) in
either byte order, label dtype (integers of each width and order, bool, an enum) as [N] or
[N, 1], storage of each dataset (contiguous, compact, chunked over rows or over rows and
columns, gzip / shuffle / fletcher32 / scale-offset, chunks left unwritten with a fill value, a
virtual dataset over several source files), and where the pair lives (a conventional pair at
the root, a group, or names spmd must be told; stored there, or reached through soft links
or external links to another file), rows appended to a resizable dataset, and the file
format's oldest or latest structures (h5py's libver).
"""
import json
import os
import sys

import h5py
import numpy as np

INT_RANGES = {"u1": (0, 256), "i1": (-128, 128), "u2": (0, 4000), "i2": (-3000, 3000),
              "u4": (0, 70000), "i4": (-70000, 70000), "u8": (0, 2**24), "i8": (-2**24, 2**24)}
CONVENTIONAL = [("images", "labels"), ("X", "y"), ("x", "y"), ("features", "labels"),
                ("data", "target"), ("inputs", "targets")]


def draw(seed):
    rng = np.random.default_rng(seed)
    s = {"seed": seed}
    s["n"] = int(rng.choice([1, 2, 3, 5, 17, int(rng.integers(20, 400)), int(rng.integers(400, 2500))]))
    shape_kind = rng.choice(["flat", "hw", "hwc"])
    if shape_kind == "flat":
        s["shape"] = [int(rng.integers(1, 300))]
    elif shape_kind == "hw":
        s["shape"] = [int(rng.integers(1, 20)), int(rng.integers(1, 20))]
    else:
        s["shape"] = [int(rng.integers(1, 12)), int(rng.integers(1, 12)), int(rng.integers(1, 4))]
    kind = str(rng.choice(list(INT_RANGES) + ["f2", "f4", "f8"]))
    s["x_dtype"] = str(rng.choice(["<", ">"])) + kind
    s["classes"] = int(rng.integers(2, 13))
    label_kinds = [k for k, (lo, hi) in INT_RANGES.items() if hi > s["classes"]] + ["enum"]
    if s["classes"] == 2:
        label_kinds.append("bool")
    s["y_kind"] = str(rng.choice(label_kinds))
    s["y_order"] = str(rng.choice(["<", ">"]))
    s["y_column"] = bool(rng.random() < 0.3)
    s["x_storage"] = storage(rng, s["n"], s["shape"], kind)
    s["y_storage"] = storage(rng, s["n"], [1] if s["y_column"] else [], "label")
    place = rng.choice(["root", "group", "named"])
    if place == "root":
        fx, fy = CONVENTIONAL[int(rng.integers(len(CONVENTIONAL)))]
        s["keys"] = [fx, fy, "-", "-"]
    elif place == "group":
        g = str(rng.choice(["test", "split/eval", "data"]))
        s["keys"] = [g + "/x", g + "/y", "-", "-"]
    else:
        s["keys"] = []
    if place == "named" or (place == "group" and s["shape"] == [1] and kind in INT_RANGES):
        # ([N, 1] integers are not features-like: spmd must be told.)
        s["keys"] = ["pixels", "digit", "pixels", "digit"] if place == "named" else s["keys"][:2] * 2
    # The layout: keep-remainder takes one device in all.
    s["ranks"] = int(rng.integers(1, 4))
    s["devices"] = int(rng.integers(1, 3))
    s["strategy"] = str(rng.choice(["pad", "pad-metrics", "infinite-pad"] + ["keep-remainder"] * (
        s["ranks"] * s["devices"] == 1)))
    s["batch"] = int(rng.choice([1, 7, int(rng.integers(1, 600))]))
    s["scale"] = "auto" if kind == "u1" else str(rng.choice(["auto", "none", "1/255", "0.5"]))
    # The datasets where the keys name them, or reached through links (h5py.SoftLink to a
    # dataset stored elsewhere in the file; h5py.ExternalLink to one in another file).
    s["link"] = str(rng.choice(["none", "none", "none", "soft", "external"]))
    s["libver"] = str(rng.choice(["earliest", "latest"]))
    # The ensemble (and eval --model cnn from its checkpoint) where the rows are images a
    # 3x3 convolution and one 2x2 pooling fit: its own batch, a member count of its layout.
    s["cnn"] = shape_kind != "flat" and min(s["shape"][:2]) >= 2
    s["cnn_batch"] = min(s["n"], int(rng.choice([1, 4, 16, 32])))
    # logreg's options that change how rows are read or summed: an intercept (a column of ones
    # appended to each row as it is read), float64 arithmetic, an L2 penalty.
    s["logreg_options"] = (["--fit-intercept"] * bool(rng.random() < 0.4)
                           + ["--precision", "float64"] * bool(rng.random() < 0.4)
                           + ["--l2", "0.01"] * bool(rng.random() < 0.3))
    return s


def storage(rng, n, shape, kind):
    """How one dataset is stored; what it can hold limits the choice."""
    row_bytes = int(np.prod(shape, dtype=np.int64)) * (1 if kind == "label" else 8)
    choices = ["contiguous", "chunked", "chunked", "partial", "virtual", "external"]
    if n * row_bytes < 30000:
        choices.append("compact")
    how = str(rng.choice(choices))
    st = {"how": how}
    if how in ("chunked", "partial"):
        rows = int(rng.integers(1, n + 1))
        cols = [int(rng.integers(1, d + 1)) if rng.random() < 0.3 else d for d in shape]
        st["chunks"] = [rows] + cols
        filters = {}
        if rng.random() < 0.5:
            filters["compression"] = "gzip"
            filters["compression_opts"] = int(rng.integers(1, 10))
        if rng.random() < 0.3:
            filters["shuffle"] = True
        if rng.random() < 0.3:
            filters["fletcher32"] = True
        if kind not in ("f2", "f4", "f8", "label") and "fletcher32" not in filters and rng.random() < 0.3:
            filters["scaleoffset"] = 0  # lossless for integers (h5py refuses it beside fletcher32)
        st["filters"] = filters
        st["fill"] = int(rng.integers(0, 2 if kind == "label" else 3))  # a label fill is a class
        if how == "chunked" and rng.random() < 0.3:
            st["appended"] = int(rng.integers(1, n + 1))
    if how in ("virtual", "external"):
        st["parts"] = int(rng.integers(1, 4))
    return st


def values(s, rng):
    n, shape, kind = s["n"], s["shape"], s["x_dtype"][1:]
    if kind in INT_RANGES:
        lo, hi = INT_RANGES[kind]
        x = rng.integers(lo, hi, (n, *shape)).astype(kind)
    else:
        x = (rng.normal(size=(n, *shape)) * rng.choice([0.5, 3.0])).astype(kind)
    y = rng.integers(0, s["classes"], n)
    return x, y


def label_type(s):
    if s["y_kind"] == "bool":
        return np.dtype("?")
    if s["y_kind"] == "enum":
        base = np.dtype(s["y_order"] + "i4")
        return h5py.enum_dtype({f"class{c}": c for c in range(s["classes"])}, basetype=base)
    return np.dtype(s["y_order"] + s["y_kind"])


def write(h, name, data, dtype, st, d, seed):
    """One dataset as st says; 'partial' leaves the chunks of unwritten rows to the fill value."""
    data = np.asarray(data)
    if st["how"] == "contiguous":
        h.create_dataset(name, data=data.astype(dtype), dtype=dtype)
        return data
    if st["how"] == "compact":
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_layout(h5py.h5d.COMPACT)
        tid = h5py.h5t.py_create(dtype, logical=True)
        parent, _, leaf = name.rpartition("/")
        loc = h.require_group(parent) if parent else h
        h5py.h5d.create(loc.id, leaf.encode(), tid, h5py.h5s.create_simple(data.shape), dcpl=dcpl)
        h[name][...] = data
        return data
    if st["how"] == "external":
        # Raw values in files of their own beside the HDF5 file (make works there), named as
        # h5py users name them (relative): HDF5 looks for them from the working directory.
        raw = f"f{seed}_{name.replace('/', '_')}"
        size = data.size * dtype.itemsize
        cut = size // 2 if st["parts"] > 1 else size
        h.create_dataset(name, data=data.astype(dtype), dtype=dtype,
                         external=[(raw + "_0.bin", 0, cut), (raw + "_1.bin", 16, h5py.h5f.UNLIMITED)])
        return data
    if st["how"] == "virtual":
        layout = h5py.VirtualLayout(shape=data.shape, dtype=dtype)
        bounds = np.linspace(0, len(data), st["parts"] + 1).astype(int)
        for p in range(st["parts"]):
            src = f"f{seed}_{name.replace('/', '_')}_part{p}.h5"
            with h5py.File(os.path.join(d, src), "w") as g:
                g.create_dataset("v", data=data[bounds[p]:bounds[p + 1]], dtype=dtype)
            layout[bounds[p]:bounds[p + 1]] = h5py.VirtualSource(src, "v", shape=(bounds[p + 1] - bounds[p], *data.shape[1:]))
        h.create_virtual_dataset(name, layout)
        return data
    chunks = tuple(min(c, max(dim, 1)) for c, dim in zip(st["chunks"], data.shape))
    fill = st["fill"] if dtype.kind != "b" else bool(st["fill"] % 2)
    if st.get("appended"):
        # Rows appended as they came (a resizable dataset grown batch by batch, h5py's
        # maxshape=(None, ...)): another chunk index than a fixed shape's.
        ds = h.create_dataset(name, shape=(0, *data.shape[1:]), maxshape=(None, *data.shape[1:]), dtype=dtype,
                              chunks=chunks, fillvalue=fill, **st["filters"])
        for start in range(0, len(data), st["appended"]):
            part = data[start:start + st["appended"]]
            ds.resize(start + len(part), axis=0)
            ds[start:] = part
        return data
    ds = h.create_dataset(name, shape=data.shape, dtype=dtype, chunks=chunks, fillvalue=fill, **st["filters"])
    if st["how"] == "chunked":
        ds[...] = data
        return data
    # Every other run of whole chunks along the rows written; the rest read as the fill value.
    out = np.full_like(data, fill)
    step = chunks[0]
    for start in range(0, len(data), 2 * step):
        ds[start:start + step] = data[start:start + step]
        out[start:start + step] = data[start:start + step]
    return out


def make(d, first, count):
    d = os.path.abspath(d)
    os.chdir(d)
    lines = []
    for seed in range(first, first + count):
        s = draw(seed)
        rng = np.random.default_rng(10_000 + seed)
        x, y = values(s, rng)
        xtype = np.dtype(s["x_dtype"])
        ytype = label_type(s)
        fx, fy = s["keys"][:2]
        # The file format's versions: HDF5 1.8's structures (h5py's default), or the latest
        # (new-style groups, other chunk indexes: fixed and extensible arrays, v2 B-trees).
        libver = s["libver"]
        with h5py.File(f"{d}/f{seed}.h5", "w", libver=libver) as h:
            target = h
            if s["link"] == "external":
                target = h5py.File(f"f{seed}_target.h5", "w", libver=libver)
            stored = {"none": "", "soft": "/store", "external": "/elsewhere"}[s["link"]]
            xs = write(target, stored + "/" + fx, x, xtype, s["x_storage"], d, seed)
            ys = write(target, stored + "/" + fy, y.reshape(-1, 1) if s["y_column"] else y, ytype, s["y_storage"], d, seed)
            if s["link"] == "soft":
                h[fx], h[fy] = h5py.SoftLink(stored + "/" + fx), h5py.SoftLink(stored + "/" + fy)
            elif s["link"] == "external":
                target.close()
                h[fx] = h5py.ExternalLink(f"f{seed}_target.h5", stored + "/" + fx)
                h[fy] = h5py.ExternalLink(f"f{seed}_target.h5", stored + "/" + fy)
        ys = ys.reshape(-1).astype(np.int64)
        if s["y_kind"] == "bool":
            ys = ys.astype(bool).astype(np.int64)
        # The reference file holds the values as float32, native and contiguous, to be read with
        # the factor spmd took: the same floats (integers and float16/32 are exact in float32 and
        # spmd scales in double), so the same bits. float64 stays float64: spmd scales it before
        # rounding to float32.
        with h5py.File(f"{d}/f{seed}_ref.h5", "w") as h:
            h["x"] = xs.astype(np.float64 if xtype.kind == "f" and xtype.itemsize == 8 else np.float32)
            h["y"] = ys.astype(np.int32)
        features = int(np.prod(s["shape"]))
        wr = np.random.default_rng(20_000 + seed)
        # Logits of a few units whatever the values' range: ties and float32's rounding of
        # huge logits would otherwise decide the classes.
        rms = float(np.sqrt(np.mean(np.square(xs.astype(np.float64) * scale_factor(s))))) + 1e-3
        with h5py.File(f"{d}/f{seed}_w.h5", "w") as h:
            h["W"] = (wr.normal(size=(features, s["classes"])) * 2 / (rms * np.sqrt(features))).astype(np.float32)
            h["b"] = wr.normal(size=s["classes"]).astype(np.float32)
        with open(f"{d}/f{seed}.json", "w") as f:
            json.dump(s, f)
        lines.append(f"{seed} {s['ranks']} {s['devices']} {s['batch']} {s['strategy']} {s['scale']} "
                     + " ".join(s["keys"][2:]))
    with open(f"{d}/files.txt", "w") as f:
        f.write("\n".join(lines) + "\n")


def scale_factor(s):
    if s["scale"] == "auto":
        return 1 / 255 if s["x_dtype"][1:] == "u1" else 1.0
    return {"none": 1.0, "1/255": 1 / 255, "0.5": 0.5}[s["scale"]]


def check(seed, d, pred):
    with open(f"{d}/f{seed}.json") as f:
        s = json.load(f)
    with h5py.File(f"{d}/f{seed}_ref.h5") as h:
        x = h["x"][...].reshape(s["n"], -1).astype(np.float64) * scale_factor(s)
        y = h["y"][...]
    with h5py.File(f"{d}/f{seed}_w.h5") as h:
        logits = x @ h["W"][...].astype(np.float64) + h["b"][...]
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    with h5py.File(pred) as h:
        got_p, got_c, got_y = h["probabilities"][...], h["predicted"][...], h["label"][...]
    assert got_p.shape == p.shape, f"probabilities {got_p.shape}, expected {p.shape}"
    assert (got_y == y).all(), f"labels differ at rows {np.nonzero(got_y != y)[0][:10]}"
    err = np.abs(got_p - p).max()
    assert err < 1e-4, f"probabilities differ by {err:.3g}, row {np.abs(got_p - p).max(axis=1).argmax()}"
    top2 = np.sort(p, axis=1)[:, -2:] if p.shape[1] > 1 else None
    clear = (top2[:, 1] - top2[:, 0]) > 1e-4
    wrong = (got_c != p.argmax(axis=1)) & clear
    assert not wrong.any(), f"predicted classes differ at rows {np.nonzero(wrong)[0][:10]}"
    print(f"f{seed}: {s['n']} rows {s['x_dtype']}{s['shape']} ({s['x_storage']['how']}), labels "
          f"{s['y_order']}{s['y_kind']}{' [N,1]' if s['y_column'] else ''} ({s['y_storage']['how']}): "
          f"probabilities within {err:.2g} of numpy")


def same(a, b):
    with h5py.File(a) as f, h5py.File(b) as g:
        for name in ("predicted", "probabilities", "label"):
            x, y = f[name][...], g[name][...]
            assert x.shape == y.shape and x.dtype == y.dtype, f"{name}: {x.dtype}{x.shape} vs {y.dtype}{y.shape}"
            # Bits, not values: NaN (a model that overflowed) equals itself here.
            bits = lambda v: np.ascontiguousarray(v).view(np.uint8).reshape(len(v), -1)
            differ = np.nonzero((bits(x) != bits(y)).any(axis=1))[0]
            assert len(differ) == 0, f"{name} differs at rows {differ[:10]}"
    print(f"{a} and {b}: the same predictions, probabilities and labels")


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif sys.argv[1] == "check":
        check(int(sys.argv[2]), sys.argv[3], sys.argv[4])
    elif sys.argv[1] == "same":
        same(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
