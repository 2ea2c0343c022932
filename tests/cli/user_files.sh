#!/usr/bin/env bash
# HDF5 files as users make them with h5py: every storage h5py writes (chunked, gzip +
# shuffle + fletcher32, compact, a virtual dataset mapping another file), bool labels (an
# HDF5 enum), [N, 1] label columns, float16 features. Each must give exactly the objective of the same data in
# a plain file, on 1 and 3 ranks. Also: the warning for inferred classes that have no
# example, `spmd data info`'s storage columns, and a damaged chunk reported once per rank
# (no doubled "rank 0: rank 0:"). Refusals (LZF without its plugin, 2-D labels, a label of
# 1e9) are in bad_inputs.sh.
source "$(dirname "$0")/../support/cli_lib.sh"
py() { /usr/bin/python3 -c "$1"; }
U=$WORK/user
mkdir -p "$U"
run make_files 0 60 /usr/bin/python3 - "$U" <<'PY'
import sys, h5py, numpy as np
d = sys.argv[1]
rng = np.random.default_rng(7)
n, f, c = 257, 9, 4
X = rng.normal(size=(n, f)).astype(np.float32)
y = rng.integers(0, c, n).astype(np.int64)
def plain(name, **extra):
    with h5py.File(f"{d}/{name}.h5", "w") as h:
        h.create_dataset("X", data=X, **extra.get("x", {}))
        h.create_dataset("y", data=extra.get("y", y), **extra.get("yopts", {}))
plain("plain")
plain("filters", x=dict(chunks=(16, 9), compression="gzip", compression_opts=6, shuffle=True, fletcher32=True),
      yopts=dict(chunks=(64,), compression="gzip"))
with h5py.File(f"{d}/compact.h5", "w") as h:
    h.create_dataset("X", data=X)
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_layout(h5py.h5d.COMPACT)
    space = h5py.h5s.create_simple(y.shape)
    h5py.h5d.create(h.id, b"y", h5py.h5t.STD_I64LE, space, dcpl=dcpl).write(h5py.h5s.ALL, h5py.h5s.ALL, y)
# A virtual dataset: X assembled from two source files, as h5py's VirtualLayout does.
for part, rows in (("a", slice(0, 100)), ("b", slice(100, n))):
    with h5py.File(f"{d}/src_{part}.h5", "w") as h:
        h.create_dataset("X", data=X[rows])
layout = h5py.VirtualLayout(shape=X.shape, dtype="f4")
layout[0:100] = h5py.VirtualSource(f"{d}/src_a.h5", "X", shape=(100, f))
layout[100:n] = h5py.VirtualSource(f"{d}/src_b.h5", "X", shape=(n - 100, f))
with h5py.File(f"{d}/virtual.h5", "w") as h:
    h.create_virtual_dataset("X", layout)
    h.create_dataset("y", data=y)
# Two classes: bool labels (h5py's enum) against the same labels as int8.
yb = y % 2 == 1
plain("bool_labels", y=yb)
plain("int_labels", y=yb.astype(np.int8))
plain("column_labels", y=y.reshape(-1, 1))
# Raw ids instead of class indices: 1001..1004 (classes inferred as 1005, 1001 of them empty).
plain("id_labels", y=y + 1001)
# A gzip chunk with damaged bytes: the read fails inside HDF5.
with h5py.File(f"{d}/damaged.h5", "w") as h:
    h.create_dataset("X", data=X, chunks=(16, 9), compression="gzip")
    h.create_dataset("y", data=y)
    info = h["X"].id.get_chunk_info(3)
with open(f"{d}/damaged.h5", "r+b") as fh:
    fh.seek(info.byte_offset + 4)
    fh.write(b"\xff" * 32)
# float16 features (numpy's half, as h5py writes it; big-endian and gzip-chunked too)
# against the same values widened to float32; one with an inf.
X16 = X.astype(np.float16)
X16[0, :3] = [6.0e-8, -6.1e-5, 65504.0]  # a subnormal, the smallest normal, the largest
for name, data, opts in (("f16", X16, {}), ("f16_be_gzip", X16.astype(">f2"), dict(chunks=(16, 9), compression="gzip")),
                         ("f16_widened", X16.astype(np.float32), {})):
    with h5py.File(f"{d}/{name}.h5", "w") as h:
        h.create_dataset("X", data=data, **opts)
        h.create_dataset("y", data=y)
bad = X16.copy()
bad[5, 2] = np.inf
with h5py.File(f"{d}/f16_inf.h5", "w") as h:
    h.create_dataset("X", data=bad)
    h.create_dataset("y", data=y)
PY

value() { py "import json; print(repr(json.load(open('$1'))['value']))"; }
for np in 1 3; do
  run "plain_np$np" 0 120 mpi $np "$SPMD" logreg --data "$U/plain.h5" --maxiter 15 --json "$WORK/plain$np.json"
  ref=$(value "$WORK/plain$np.json")
  for name in filters compact virtual column_labels; do
    run "${name}_np$np" 0 120 mpi $np "$SPMD" logreg --data "$U/$name.h5" --maxiter 15 --json "$WORK/$name$np.json"
    checks=$((checks + 1))
    got=$(value "$WORK/$name$np.json")
    if [ "$got" = "$ref" ]; then echo "ok   $name on $np rank(s): the plain file's objective, bit for bit ($got)"
    else fail "$name on $np rank(s): objective $got, the plain file gives $ref"; fi
  done
  run "int_labels_np$np" 0 120 mpi $np "$SPMD" logreg --data "$U/int_labels.h5" --maxiter 15 --json "$WORK/int$np.json"
  run "bool_labels_np$np" 0 120 mpi $np "$SPMD" logreg --data "$U/bool_labels.h5" --maxiter 15 --json "$WORK/bool$np.json"
  checks=$((checks + 1))
  if [ "$(value "$WORK/bool$np.json")" = "$(value "$WORK/int$np.json")" ]; then echo "ok   bool labels on $np rank(s) read as 0/1"
  else fail "bool labels on $np rank(s): objective differs from the same labels as int8"; fi
done
# float16 features: read as their float32 values, bit for bit, through the loader (logreg)
# and eval's streamed blocks; a non-finite one is refused naming its row.
for np in 1 3; do
  run "f16_widened_np$np" 0 120 mpi $np "$SPMD" logreg --data "$U/f16_widened.h5" --maxiter 15 \
    --json "$WORK/f16w$np.json" --weights-out "$WORK/f16w$np-weights.h5"
  for name in f16 f16_be_gzip; do
    run "${name}_np$np" 0 120 mpi $np "$SPMD" logreg --data "$U/$name.h5" --maxiter 15 --json "$WORK/$name$np.json"
    checks=$((checks + 1))
    if [ "$(value "$WORK/$name$np.json")" = "$(value "$WORK/f16w$np.json")" ]; then
      echo "ok   $name on $np rank(s): the widened float32 file's objective, bit for bit"
    else fail "$name on $np rank(s): objective $(value "$WORK/$name$np.json"), float32 gives $(value "$WORK/f16w$np.json")"; fi
    run "${name}_eval_np$np" 0 120 mpi $np "$SPMD" eval --data "$U/$name.h5" --model logreg --weights "$WORK/f16w1-weights.h5" \
      --devices 2 --per-device-batch 7 --predictions "$WORK/${name}_pred$np.h5" --quiet
  done
  run "f16_widened_eval_np$np" 0 120 mpi $np "$SPMD" eval --data "$U/f16_widened.h5" --model logreg \
    --weights "$WORK/f16w1-weights.h5" --devices 2 --per-device-batch 7 --predictions "$WORK/f16_widened_pred$np.h5" --quiet
  run "f16_eval_same_np$np" 0 30 py "
import h5py
w = h5py.File('$WORK/f16_widened_pred$np.h5')['probabilities'][...]
for n in ('f16', 'f16_be_gzip'):
    assert h5py.File('$WORK/' + n + '_pred$np.h5')['probabilities'][...].tobytes() == w.tobytes(), n"
done
run f16_inf 1 60 mpi 2 "$SPMD" logreg --data "$U/f16_inf.h5" --maxiter 2
expect_in "a float16 inf is refused naming its row" "f16_inf.h5': features dataset 'X': row 5 has a non-finite value \(inf\)"
run info_f16 0 30 "$SPMD" data info "$U/f16_be_gzip.h5"
expect_in "data info: float16 features" "/X +float16 \(big-endian\) +\[257, 9\]"

run bool_classes 0 10 py "import json; j=json.load(open('$WORK/bool1.json')); assert j['classes']==2, j['classes']" || true

run id_labels 0 120 mpi 2 "$SPMD" logreg --data "$U/id_labels.h5" --maxiter 2
expect_in "ids as labels: a warning counts the empty classes and names the fixes" \
  "WARNING: '.*id_labels.h5': labels dataset 'y': 1001 of the 1005 inferred classes .* have no example.*--classes.*np.unique"

run damaged 1 60 mpi 2 "$SPMD" logreg --data "$U/damaged.h5" --maxiter 2
expect_in "a damaged chunk: the failing read is named" "HDF5 call failed: H5Dread"
expect_not_in "a damaged chunk: the rank is named once" "rank [0-9]+: rank [0-9]+:"

run info_filters 0 30 "$SPMD" data info "$U/filters.h5"
expect_in "data info: chunks and filters of X" "layout chunked \[16, 9\], filters shuffle, gzip, fletcher32; usable as features"
expect_in "data info: y usable as labels" "layout chunked \[64\], filters gzip; usable as labels"
run info_virtual 0 30 "$SPMD" data info "$U/virtual.h5" --json "$WORK/vinfo.json"
expect_in "data info: a virtual dataset" "layout virtual, filters none; usable as features"
run info_json 0 10 py "import json; j=json.load(open('$WORK/vinfo.json')); x=[d for d in j['datasets'] if d['name']=='/X'][0]; assert x['layout']=='virtual' and x['filters']=='none' and x['usable'].startswith('features'), x"
run info_bool 0 30 "$SPMD" data info "$U/bool_labels.h5"
expect_in "data info: bool labels" "usable as labels \(enum as its integers\)"
run info_compact 0 30 "$SPMD" data info "$U/compact.h5"
expect_in "data info: a compact dataset" "layout compact, filters none; usable as labels"
finish
