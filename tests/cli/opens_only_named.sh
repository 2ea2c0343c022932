#!/usr/bin/env bash
# Only what the user named is read (issue 56, rule 1), seen with strace: spmd eval on 2 ranks
# with a data file whose features are a virtual dataset over a file beside it, and an ONNX
# model whose weights are external data beside it, writing predictions and a JSON summary.
# Every path under the test's folder that any rank (or start-up's child walk) names in a
# file-system call must be one of: the named inputs and outputs, the files they lead to (the
# virtual source, the external data), the outputs' temporaries and locks, and the folders on
# the way. Decoys beside them (another HDF5 file, another .bin, a .onnx) must never be touched.
source "$(dirname "$0")/../support/cli_lib.sh"
command -v strace >/dev/null || { echo "SKIP cli.opens_only_named: strace is not installed (apt-get install strace; tools/setup.sh does)"; exit 0; }
strace -f -qq -e trace=%file -o /dev/null true 2>/dev/null || { echo "SKIP cli.opens_only_named: strace cannot trace here (ptrace not permitted)"; exit 0; }
PY=/usr/bin/python3
mkdir -p "$WORK/in" "$WORK/model" "$WORK/out" "$WORK/run" "$WORK/traces"
run make_files 0 60 $PY - "$WORK" <<'PYEOF'
import sys, h5py, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto as T
work = sys.argv[1]
rng = np.random.default_rng(6)
X = rng.normal(size=(30, 8)).astype(np.float32)
with h5py.File(f"{work}/in/source.h5", "w") as f:
    f["X"] = X
with h5py.File(f"{work}/in/decoy.h5", "w") as f:
    f["X"] = X
with h5py.File(f"{work}/in/data.h5", "w") as f:
    layout = h5py.VirtualLayout(shape=X.shape, dtype="f4")
    layout[:] = h5py.VirtualSource("source.h5", "X", shape=X.shape)
    f.create_virtual_dataset("X", layout)
    f["y"] = rng.integers(0, 3, 30)
w = numpy_helper.from_array(rng.normal(size=(8, 3)).astype(np.float32), "w")
g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                      [helper.make_tensor_value_info("x", T.FLOAT, ["batch", 8])],
                      [helper.make_tensor_value_info("y", T.FLOAT, ["batch", 3])], [w])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
onnx.save(m, f"{work}/model/decoy.onnx")
onnx.save(m, f"{work}/model/model.onnx", save_as_external_data=True, location="weights.bin", size_threshold=0)
open(f"{work}/model/decoy.bin", "wb").write(open(f"{work}/model/weights.bin", "rb").read())
PYEOF
cd "$WORK/run" || exit 1
run traced_eval 0 120 mpirun -np 2 bash -c 'exec strace -f -qq -s 4096 -e trace=%file -o "$0/traces/rank.$OMPI_COMM_WORLD_RANK" "$@"' "$WORK" \
  "$SPMD" eval --data ../in/data.h5 --model onnx --weights "$WORK/model/model.onnx" \
  --predictions ../out/p.h5 --json "$WORK/out/run.json"
run only_named_paths 0 30 $PY - "$WORK" <<'PYEOF'
import glob, os, re, sys
work = os.path.realpath(sys.argv[1])
cwd = os.path.join(work, "run")
allowed = {work, cwd, *(os.path.join(work, d) for d in ("in", "model", "out"))}
allowed |= {os.path.join(work, p) for p in ("in/data.h5", "in/source.h5", "model/model.onnx", "model/weights.bin",
                                             "out/p.h5", "out/run.json")}
# Ours: the outputs' temporaries and locks, the output folder's writability probe. Open MPI's
# MPI-IO: NAME.locktest.RANK beside what it opens (sharedfp/lockedfile's check).
temporary = re.compile(r"^" + re.escape(work) + r"/(out/\.(p\.h5|run\.json)\.(tmp\.[0-9]+|lock)|out/\.spmd-write-probe\.[^/]+|"
                       r"(in/data\.h5|out/\.p\.h5\.tmp\.[0-9]+)\.locktest\.[0-9]+)$")
# The dynamic loader tries each LD_LIBRARY_PATH entry, an empty one being the working folder.
loader = re.compile(r"\.so(\.[0-9]+)*$")
seen, unexpected = set(), set()
for trace in glob.glob(f"{work}/traces/rank.*"):
    for line in open(trace, errors="replace"):
        if "execve(" in line:
            continue  # the program and its arguments, not files it opens
        for path in re.findall(r'"((?:[^"\\]|\\.)*)"', line)[:1]:
            if not path or path.startswith(("/proc", "/sys", "/dev", "/usr", "/lib", "/etc")):
                continue
            full = os.path.normpath(path if path.startswith("/") else os.path.join(cwd, path))
            if not (full == work or full.startswith(work + "/")) or full.startswith(work + "/traces"):
                continue
            if full.startswith(cwd + "/") and loader.search(full):
                continue
            seen.add(full)
            if full not in allowed and not temporary.match(full):
                unexpected.add(full)
decoys = {os.path.join(work, p) for p in ("in/decoy.h5", "model/decoy.onnx", "model/decoy.bin")}
print(f"{len(seen)} paths under the test folder named by the ranks: " + ", ".join(sorted(os.path.relpath(p, work) for p in seen)))
for must in ("in/data.h5", "in/source.h5", "model/model.onnx", "model/weights.bin", "out/p.h5"):
    if os.path.join(work, must) not in seen:
        print(f"the trace never names {must}: strace saw too little for this check to mean anything"); sys.exit(1)
if unexpected:
    print("named but not given: " + ", ".join(sorted(unexpected)) + (" (decoys among them)" if unexpected & decoys else ""))
    sys.exit(1)
PYEOF
expect_in "the virtual source and the external data are among what is read" "in/source.h5.*model/weights.bin|model/weights.bin.*in/source.h5"
finish
