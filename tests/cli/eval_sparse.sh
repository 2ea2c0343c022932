#!/usr/bin/env bash
# spmd eval on sparse CSR features (scipy.sparse written with h5py, AnnData's own .h5ad): the
# rows streamed dense, so any model evaluates them. Checked against numpy's float64 scores of
# the weights and against ONNX Runtime on the dense matrix; the same predictions, bit for bit,
# from the rows stored dense, from every layout and strategy (--drop-label, infinite-pad, ranks
# without rows), from repeated and unsorted column indices, and from spmd export's ONNX graph;
# damaged groups refused on every rank naming the row, nothing written.
source "$(dirname "$0")/../support/cli_lib.sh"
PY=/usr/bin/python3
py() { "$PY" -c "$1"; }
D=$WORK/sparse.h5
A=$WORK/cells.h5ad
ORT_RUN="$SPMD_SOURCE_DIR/tools/onnx/ort_run.js"

# 3001 rows x 400 columns, ~2 % dense, 4 classes, counts-like values.
run make_data 0 60 py "
import h5py, numpy as np, scipy.sparse as sp
rng = np.random.default_rng(1207)
n, F, K = 3001, 400, 4
X = sp.random(n, F, density=0.02, format='csr', random_state=rng, dtype=np.float64)
X.data = np.ceil(X.data * 5)
W = rng.normal(size=(F, K)); y = np.argmax(X @ W + rng.gumbel(size=(n, K)), axis=1)
sp.save_npz('$WORK/X.npz', X); np.save('$WORK/y.npy', y)
def group(f, name, data, indices, indptr):
    g = f.create_group(name); g['data'] = data; g['indices'] = indices; g['indptr'] = indptr
    g.attrs['shape'] = np.array(X.shape, dtype=np.int64)
with h5py.File('$D', 'w') as f:
    group(f, 'X', X.data.astype(np.float32), X.indices, X.indptr)
    f['Xd'] = X.toarray().astype(np.float32)
    f['y'] = y.astype(np.int64)
    # Every entry of value 2 split into two entries of 1 (scipy sums repeated columns), and each
    # row's entries reversed (unsorted indices): the same matrix.
    rows, data, cols = [], [], []
    for r in range(n):
        s, e = X.indptr[r], X.indptr[r + 1]
        d, c = list(X.data[s:e]), list(X.indices[s:e])
        for k in range(len(d)):
            if d[k] == 2: d[k] = 1; d.append(1); c.append(c[k])
        rows.append(len(d)); data += d[::-1]; cols += c[::-1]
    indptr = np.concatenate([[0], np.cumsum(rows)])
    Xs = sp.csr_matrix((np.array(data), np.array(cols), indptr), shape=X.shape)
    assert not Xs.has_canonical_format and (Xs.toarray() == X.toarray()).all()
    group(f, 'X_repeated', np.array(data, dtype=np.float64), np.array(cols, dtype=np.int32), indptr)
    bad = X.indices.copy(); bad[X.indptr[2500]] = F
    group(f, 'X_bad_column', X.data, bad, X.indptr)
    nan = X.data.copy(); nan[X.indptr[1900] + 1] = np.nan
    group(f, 'X_nan', nan, X.indices, X.indptr)
    dec = X.indptr.copy(); dec[2100] = dec[2102] + 1
    group(f, 'X_indptr_decreasing', X.data, X.indices, dec)
print('rows', n, 'non-zeros', X.nnz, 'class counts', np.bincount(y))"
cat "$LAST_OUT"

have_anndata=0
if "$PY" -c "import anndata" 2>/dev/null; then
  have_anndata=1
  run make_h5ad 0 60 py "
import anndata, numpy as np, pandas as pd, scipy.sparse as sp
X = sp.load_npz('$WORK/X.npz').astype(np.float32); y = np.load('$WORK/y.npy')
obs = pd.DataFrame({'kind': pd.Categorical.from_codes(y, ['a', 'b', 'c', 'd'])}, index=['r%d' % i for i in range(len(y))])
anndata.AnnData(X=X, obs=obs).write_h5ad('$A')"
else
  echo "SKIP AnnData's writer: python3-anndata is not installed (tools/setup.sh installs it)"
fi

run fit 0 120 "$SPMD" logreg --data "$D" --features-key X --labels-key y --fit-intercept --l2 0.001 --maxiter 80 \
  --weights-out "$WORK/w.h5" --quiet
run export 0 30 "$SPMD" export --weights "$WORK/w.h5" --out "$WORK/w.onnx"

# The reference: the rows stored dense, one rank.
run dense 0 60 "$SPMD" eval --model logreg --weights "$WORK/w.h5" --data "$D" --features-key Xd --labels-key y \
  --predictions "$WORK/p_dense.h5" --json "$WORK/p_dense.json"
run sparse 0 60 "$SPMD" eval --model logreg --weights "$WORK/w.h5" --data "$D" --features-key X --labels-key y \
  --predictions "$WORK/p_sparse.h5" --json "$WORK/p_sparse.json"
expect_in "sparse: the header names the matrix" "# features CSR \[3001 x 400\], [0-9]+ non-zeros .*streamed as dense float32 rows"
expect_in "sparse: every example counted once" "every example counted exactly once: total 3001 = 3001 in the file"

# Layouts and strategies (16 ranks x 64-row batches: some ranks run padding only).
same_predictions() {  # NAME REFERENCE.h5 FILE.h5...: the predictions files hold the same bits
  local name=$1 ref=$2; shift 2
  run "$name" 0 30 py "
import sys, h5py, numpy as np
ref = h5py.File('$ref', 'r')
for path in sys.argv[1:]:
    f = h5py.File(path, 'r')
    for k in ('label', 'predicted', 'probabilities'):
        assert np.array_equal(ref[k][()], f[k][()]), (path, k)
print('same predictions and probabilities:', len(sys.argv) - 1, 'files')" "$@"
}
for layout in "3:2:pad:" "4:1:infinite-pad:" "16:1:pad-metrics:" "2:2:infinite-pad:--drop-label 2"; do
  IFS=: read -r np d strategy extra <<<"$layout"
  run "layout_np${np}_d$d" 0 120 mpi "$np" "$SPMD" eval --model logreg --weights "$WORK/w.h5" --data "$D" \
    --features-key X --labels-key y --devices "$d" --per-device-batch 64 --strategy "$strategy" $extra \
    --predictions "$WORK/p_np${np}_d$d.h5" --json "$WORK/p_np${np}_d$d.json"
done
same_predictions layouts_and_dense_identical "$WORK/p_dense.h5" "$WORK/p_sparse.h5" "$WORK/p_np3_d2.h5" \
  "$WORK/p_np4_d1.h5" "$WORK/p_np16_d1.h5"
run drop_label_counts 0 20 py "
import json, numpy as np
y = np.load('$WORK/y.npy'); j = json.load(open('$WORK/p_np2_d2.json')); full = json.load(open('$WORK/p_dense.json'))
assert j['total'] == int((y != 2).sum()) and j['filtered'] == int((y == 2).sum()), (j['total'], j['filtered'])
# Label 2 rows dropped: the rest are counted as the full pass counted them.
assert j['correct'] == full['correct'] - full['confusion_matrix'][2][2], (j['correct'], full['correct'])
print('--drop-label 2:', j['total'], 'examples,', j['correct'], 'correct')"

# Repeated and unsorted column indices (float64 data): the same matrix, the same bits.
run repeated 0 60 mpi 2 "$SPMD" eval --model logreg --weights "$WORK/w.h5" --data "$D" --features-key X_repeated \
  --labels-key y --predictions "$WORK/p_repeated.h5"
same_predictions repeated_identical "$WORK/p_dense.h5" "$WORK/p_repeated.h5"

# Against numpy: float64 scores of the weights on the scipy matrix. Classes agree but where two
# scores are within float32's rounding; probabilities within 1e-5.
run against_numpy 0 30 py "
import h5py, numpy as np, scipy.sparse as sp
X = sp.load_npz('$WORK/X.npz'); w = h5py.File('$WORK/w.h5', 'r'); p = h5py.File('$WORK/p_sparse.h5', 'r')
Z = X @ w['W'][()].astype(np.float64) + w['b'][()]
P = np.exp(Z - Z.max(axis=1, keepdims=True)); P /= P.sum(axis=1, keepdims=True)
top = np.sort(Z, axis=1); close = top[:, -1] - top[:, -2] < 1e-4
differ = p['predicted'][()] != Z.argmax(axis=1)
assert not (differ & ~close).any(), np.argwhere(differ & ~close)
err = np.abs(p['probabilities'][()] - P).max()
print('classes: %d differ, all at near-ties (%d rows within 1e-4); probabilities max error %.2e' % (differ.sum(), close.sum(), err))
assert err <= 1e-5"
cat "$LAST_OUT"

# spmd export's ONNX graph: spmd's ONNX runner on the sparse file, and ONNX Runtime on the
# dense matrix, give the logreg's classes and probabilities.
run onnx_sparse 0 60 mpi 3 "$SPMD" eval --model onnx --weights "$WORK/w.onnx" --data "$D" --features-key X \
  --labels-key y --predictions "$WORK/p_onnx.h5"
if [ -d "$SPMD_SOURCE_DIR/tools/onnx/node_modules/onnxruntime-node" ]; then
  run ort_input 0 30 py "
import numpy as np, scipy.sparse as sp
sp.load_npz('$WORK/X.npz').toarray().astype('<f4').tofile('$WORK/x.f32')"
  run ort 0 60 node "$ORT_RUN" "$WORK/w.onnx" "$WORK/x.f32" 3001,400 "$WORK/ort.f32"
  run onnx_against_ort 0 30 py "
import h5py, numpy as np, glob
p = h5py.File('$WORK/p_onnx.h5', 'r'); q = h5py.File('$WORK/p_sparse.h5', 'r')
outs = sorted(glob.glob('$WORK/ort.f32*'))
ort = [np.fromfile(o, '<f4') for o in outs]
probs = next(o.reshape(3001, 4) for o in ort if o.size == 3001 * 4 and np.allclose(o.reshape(3001, 4).sum(axis=1), 1, atol=1e-4))
assert np.array_equal(p['predicted'][()], q['predicted'][()])
e1 = np.abs(p['probabilities'][()] - q['probabilities'][()]).max(); e2 = np.abs(probs - q['probabilities'][()]).max()
print('onnx on the sparse file vs logreg: max %.2e; ONNX Runtime on the dense matrix vs logreg: max %.2e' % (e1, e2))
assert e1 <= 1e-6 and e2 <= 1e-5"
  cat "$LAST_OUT"
else
  echo "SKIP ONNX Runtime: tools/onnx/node_modules/onnxruntime-node is not installed (tools/setup.sh installs it)"
fi

if [ $have_anndata = 1 ]; then
  run h5ad 0 60 mpi 2 "$SPMD" eval --model logreg --weights "$WORK/w.h5" --data "$A" --features-key X \
    --labels-key obs/kind --predictions "$WORK/p_h5ad.h5" --json "$WORK/p_h5ad.json"
  same_predictions h5ad_identical "$WORK/p_dense.h5" "$WORK/p_h5ad.h5"
fi

# --dry-run sizes the dense blocks; --benchmark holds the rows (dense) in memory.
run dry_run 0 30 mpi 2 "$SPMD" eval --model logreg --weights "$WORK/w.h5" --data "$D" --features-key X \
  --labels-key y --dry-run
expect_in "dry_run describes the data" "3001"
run benchmark 0 120 "$SPMD" eval --model logreg --weights "$WORK/w.h5" --data "$D" --features-key X --labels-key y \
  --benchmark --repeat 3 --json "$WORK/bench.json"
run benchmark_counts 0 10 py "
import json; j = json.load(open('$WORK/bench.json')); assert j['total'] == 3001 and 'benchmark' in j"

# Damaged groups: every rank stops naming the row; no predictions, no JSON.
for bad in "X_bad_column:row 2500 has column index 400, outside \[0, 400\)" \
           "X_nan:row 1900 has value nan" "X_indptr_decreasing:indptr decreases at row 2100"; do
  key=${bad%%:*}; words=${bad#*:}
  run "refused_$key" nonzero 60 mpi 3 "$SPMD" eval --model logreg --weights "$WORK/w.h5" --data "$D" \
    --features-key "$key" --labels-key y --per-device-batch 64 --predictions "$WORK/never.h5" --json "$WORK/never.json"
  expect_in "refused_$key names the group and the row" "sparse matrix '$key': $words"
done
checks=$((checks + 1))
if [ ! -e "$WORK/never.h5" ] && [ ! -e "$WORK/never.json" ]; then echo "ok   nothing written by the refused runs"
else fail "a refused run wrote an output"; fi
finish
