#!/usr/bin/env bash
# spmd logreg on sparse CSR matrices as scipy.sparse (written with h5py), h5sparse and AnnData
# (.h5ad, its own writer, labels from a categorical obs column) store them: the optimum of
# scikit-learn (Newton-CG for L2, saga for L1, on the scipy matrix) and of the same rows stored dense; the
# same bits from every layout, every CPU kernel variant and every way of storing the matrix;
# CSC, bad indices, a missing category and a missing label key refused on every rank naming
# the file, group and row, with nothing written.
source "$(dirname "$0")/../support/cli_lib.sh"
PY=/usr/bin/python3
py() { "$PY" -c "$1"; }
D=$WORK/sparse.h5
A=$WORK/cells.h5ad

# 20011 rows x 300 columns, ~3 % dense, 3 classes (an odd count: the L1 optimum of a softmax is
# unique then, so the support can be compared), counts-like values with repeats.
run make_data 0 60 py "
import h5py, numpy as np, scipy.sparse as sp
rng = np.random.default_rng(71207)
n, F, K = 20011, 300, 3
X = sp.random(n, F, density=0.03, format='csr', random_state=rng, dtype=np.float64)
X.data = np.ceil(X.data * 6).astype(np.float32).astype(np.float64)
W = np.zeros((F, K)); W[:60] = rng.normal(scale=0.8, size=(60, K))
Z = X @ W + np.array([0.5, 0.0, -0.4])
P = np.exp(Z - Z.max(axis=1, keepdims=True)); P /= P.sum(axis=1, keepdims=True)
y = (P.cumsum(axis=1) > rng.uniform(size=(n, 1))).argmax(axis=1)
sp.save_npz('$WORK/X.npz', X); np.save('$WORK/y.npy', y)
with h5py.File('$D', 'w') as f:
    g = f.create_group('X')
    g['data'] = X.data.astype(np.float32); g['indices'] = X.indices.astype(np.int64); g['indptr'] = X.indptr.astype(np.int64)
    g.attrs['shape'] = np.array(X.shape, dtype=np.int64)
    h = f.create_group('X_h5sparse')
    h['data'] = X.data; h['indices'] = X.indices.astype(np.int32); h['indptr'] = X.indptr.astype(np.int32)
    h.attrs['h5sparse_format'] = 'csr'; h.attrs['h5sparse_shape'] = X.shape
    s = f.create_group('X_shape_dataset')
    s['data'] = X.data.astype(np.float32); s['indices'] = X.indices; s['indptr'] = X.indptr; s['shape'] = np.array(X.shape)
    f['Xd'] = X.toarray().astype(np.float32)
    f['y'] = y.astype(np.int64)
    c = f.create_group('X_csc'); Xc = X.tocsc()
    c['data'] = Xc.data; c['indices'] = Xc.indices; c['indptr'] = Xc.indptr
    c.attrs['encoding-type'] = 'csc_matrix'; c.attrs['shape'] = X.shape
    b = f.create_group('X_bad_column')
    bad = X.indices.copy(); bad[X.indptr[15000] + 0] = F
    b['data'] = X.data; b['indices'] = bad; b['indptr'] = X.indptr; b.attrs['shape'] = X.shape
    p = f.create_group('X_no_indptr'); p['data'] = X.data; p['indices'] = X.indices; p.attrs['shape'] = X.shape
print('rows', n, 'non-zeros', X.nnz, 'class counts', np.bincount(y))"
cat "$LAST_OUT"

have_anndata=0
if "$PY" -c "import anndata" 2>/dev/null; then
  have_anndata=1
  run make_h5ad 0 60 py "
import anndata, numpy as np, pandas as pd, scipy.sparse as sp
X = sp.load_npz('$WORK/X.npz').astype(np.float32); y = np.load('$WORK/y.npy')
names = ['B cell', 'T cell', 'NK cell']
obs = pd.DataFrame({'cell_type': pd.Categorical.from_codes(y, names)}, index=['c%d' % i for i in range(len(y))])
codes = y.copy(); codes[12345] = -1
obs['with_missing'] = pd.Categorical.from_codes(codes, names)
anndata.AnnData(X=X, obs=obs).write_h5ad('$A')"
else
  echo "SKIP AnnData's writer: python3-anndata is not installed (tools/setup.sh installs it)"
fi

# spmd data info describes the matrices and the categorical columns.
run data_info 0 30 "$SPMD" data info "$D"
expect_in "data_info describes the CSR group" "group X: CSR \[20011 x 300\], 180099 non-zeros.*usable as features"
expect_in "data_info describes the h5sparse group" "group X_h5sparse: CSR .*h5sparse csr"
expect_in "data_info says why CSC is not usable" "group X_csc: not usable: .*column-compressed"
if [ $have_anndata = 1 ]; then
  run data_info_h5ad 0 30 "$SPMD" data info "$A"
  expect_in "data_info_h5ad describes X" "group X: CSR .*AnnData csr_matrix"
  expect_in "data_info_h5ad describes the column" "group obs/cell_type: categorical, 3 categories: B cell, T cell, NK cell"
fi

cat >"$WORK/objective.py" <<EOF
import numpy as np, scipy.sparse as sp
X = sp.load_npz('$WORK/X.npz'); y = np.load('$WORK/y.npy'); n = len(y)
def objective(W, b, l1, l2):
    Z = X @ W + b; m = Z.max(axis=1, keepdims=True); lse = m[:, 0] + np.log(np.exp(Z - m).sum(axis=1))
    return (lse - Z[np.arange(n), y]).sum() / n + l1 * np.abs(W).sum() + 0.5 * l2 * (W * W).sum()
EOF

# Against scikit-learn on the scipy matrix, and against the same rows stored dense. L2: its
# Newton-CG (second order: at the optimum to rounding in ~20 iterations; saga at tol 1e-13 reaches
# the same value to 1e-16 in 3300 epochs, 25 s). L1: saga, the only multinomial L1 solver it has;
# at tol 1e-10 its value is within 4e-16 of tol 1e-13's with the same support, in 2/3 the epochs.
for case in "l2:0.0005:1e-8:newton-cg:1e-12" "l1:0.004:1e-10:saga:1e-10"; do
  IFS=: read -r penalty reg tol solver sk_tol <<<"$case"
  run "sklearn_$penalty" 0 400 py "
import json, warnings, numpy as np, scipy.sparse as sp
from sklearn.linear_model import LogisticRegression
warnings.simplefilter('ignore')  # Newton-CG's line search warns once at the rounding floor
X = sp.load_npz('$WORK/X.npz'); y = np.load('$WORK/y.npy')
m = LogisticRegression(penalty='$penalty', C=1.0 / ($reg * len(y)), solver='$solver', tol=$sk_tol, max_iter=20000, random_state=0,
                       multi_class='multinomial').fit(X, y)
json.dump({'W': m.coef_.T.tolist(), 'b': m.intercept_.tolist(), 'n_iter': int(m.n_iter_[0])}, open('$WORK/sk_$penalty.json', 'w'))"
  for form in sparse dense; do
    key=X; [ $form = dense ] && key=Xd
    run "fit_${penalty}_$form" 0 240 "$SPMD" logreg --data "$D" --features-key $key --labels-key y --fit-intercept \
      --penalty "$penalty" --reg "$reg" --precision float64 --maxiter 3000 --tol "$tol" \
      --weights-out "$WORK/w_${penalty}_$form.h5" --json "$WORK/fit_${penalty}_$form.json"
  done
  expect_in "fit_${penalty}_dense is the dense path" "rows x 300 features"
  run "against_peers_$penalty" 0 60 py "
import json, sys, h5py, numpy as np; sys.path.insert(0, '$WORK')
from objective import objective
l1, l2 = (($reg, 0) if '$penalty' == 'l1' else (0, $reg))
sk = json.load(open('$WORK/sk_$penalty.json')); fit = json.load(open('$WORK/fit_${penalty}_sparse.json'))
f = h5py.File('$WORK/w_${penalty}_sparse.h5', 'r'); W, b = f['W'][()], f['b'][()]
g = h5py.File('$WORK/w_${penalty}_dense.h5', 'r'); Wd, bd = g['W'][()], g['b'][()]
Ws, bs = np.array(sk['W']), np.array(sk['b'])
ours, dense, theirs = objective(W, b, l1, l2), objective(Wd, bd, l1, l2), objective(Ws, bs, l1, l2)
print('$penalty: spmd sparse %.15f (%s), dense %.15f, sklearn $solver %.15f (%d iterations): relative %.2e, %.2e' %
      (ours, fit['status'], dense, theirs, sk['n_iter'], (ours - theirs) / theirs, (ours - dense) / dense))
assert fit['status'] in ('converged', 'precision_limit'), fit['status']
assert fit['sparse'].startswith('CSR [20011 x 300]'), fit['sparse']
assert abs(fit['value'] - ours) <= 1e-12 * ours, (fit['value'], ours)
assert abs(ours - theirs) <= 1e-8 * theirs
assert abs(ours - dense) <= 1e-11 * dense
if l1:
    assert ((W != 0) == (Ws != 0)).all(), np.argwhere((W != 0) != (Ws != 0))
    assert ((W != 0) == (Wd != 0)).all()
    assert 0 < (W != 0).sum() < W.size"
  cat "$LAST_OUT"
done

# A regularisation path: each point warm-started from the last reaches the optimum a cold solve
# at that strength reaches (the last one is the sklearn-checked fit above), in fewer iterations.
for reg in 0.01 0.002; do
  run "cold_$reg" 0 120 "$SPMD" logreg --data "$D" --features-key X --labels-key y --fit-intercept --l2 $reg \
    --precision float64 --maxiter 3000 --tol 1e-8 --weights-out "$WORK/cold_$reg.h5" --json "$WORK/cold_$reg.json" --quiet
done
run path 0 240 mpi 2 "$SPMD" logreg --data "$D" --features-key X --labels-key y --fit-intercept \
  --reg-path 0.01,0.002,0.0005 --precision float64 --maxiter 3000 --tol 1e-8 --weights-out "$WORK/path.h5" \
  --json "$WORK/path.json" --metrics-csv "$WORK/path.csv"
expect_in "path: the summary lists the points" "regularisation path"
run path_csv_marks_points 0 20 py "
import csv, json
rows = list(csv.DictReader(open('$WORK/path.csv'))); j = json.load(open('$WORK/path.json'))
assert list(rows[0])[:3] == ['point', 'reg', 'iteration'], list(rows[0])
for k, p in enumerate(j['path']):
    mine = [r for r in rows if int(r['point']) == k + 1]
    assert len(mine) == p['iterations'] and all(float(r['reg']) == p['reg'] for r in mine), (k, len(mine), p)
    assert [int(r['iteration']) for r in mine] == list(range(1, p['iterations'] + 1))
    assert [h['point'] for h in j['history']].count(k + 1) == p['iterations']
print('path CSV:', len(rows), 'rows over', len(j['path']), 'points')"
run path_matches_cold_solves 0 60 py "
import json, sys, h5py, numpy as np; sys.path.insert(0, '$WORK')
from objective import objective
j = json.load(open('$WORK/path.json'))
assert [p['reg'] for p in j['path']] == [0.01, 0.002, 0.0005], j['path']
cold = ['$WORK/cold_0.01', '$WORK/cold_0.002', '$WORK/w_l2_sparse']
for k, p in enumerate(j['path']):
    assert p['weights_out'] == '$WORK/path-%d.h5' % (k + 1), p['weights_out']
    f = h5py.File(p['weights_out'], 'r'); g = h5py.File(cold[k] + '.h5', 'r')
    assert f.attrs['l2'] == p['reg']
    ours = objective(f['W'][()], f['b'][()], 0, p['reg']); theirs = objective(g['W'][()], g['b'][()], 0, p['reg'])
    print('point %d reg %g: path %.15f (%s, %d iterations), cold %.15f: relative %.2e' %
          (k + 1, p['reg'], ours, p['status'], p['iterations'], theirs, (ours - theirs) / theirs))
    assert p['status'] == 'converged', p
    assert abs(ours - theirs) <= 1e-11 * theirs
cold_iterations = [json.load(open(c + '.json'))['iterations'] for c in ('$WORK/cold_0.002', '$WORK/fit_l2_sparse')]
warm_iterations = [p['iterations'] for p in j['path'][1:]]
print('points 2 and 3: iterations warm-started', warm_iterations, 'from zeros', cold_iterations)
assert all(w < c for w, c in zip(warm_iterations, cold_iterations))"
cat "$LAST_OUT"
run path_and_reg_refused nonzero 20 "$SPMD" logreg --data "$D" --features-key X --labels-key y --reg 0.1 \
  --reg-path 0.1,0.01 --weights-out "$WORK/never.h5"
expect_in "path_and_reg_refused says why" "leave --reg and --l2 out"

# The same bits on every layout (the chunks cut by ranks and devices; 16 ranks for 10 chunks:
# ranks without rows), with class weights.
for layout in "1 1" "2 2" "3 1" "4 1" "16 1"; do
  set -- $layout
  run "layout_np$1_d$2" 0 180 mpi $1 "$SPMD" logreg --data "$D" --features-key X --labels-key y --fit-intercept \
    --l2 0.0005 --class-weight balanced --maxiter 60 --tol 1e-9 --devices $2 --verify-replicas \
    --metrics-csv "$WORK/l$1$2.csv" --json "$WORK/l$1$2.json" --weights-out "$WORK/l$1$2.h5" --quiet
done
run layouts_identical 0 20 "$PY" "$SPMD_SOURCE_DIR/tests/support/logreg_same_bits.py" 15 "$WORK/l" 11 22 31 41 161
# ... and from every CPU kernel variant this host has (they share the softmax's arithmetic).
for isa in portable avx2; do
  run "kernel_$isa" 0 180 env SPMD_MAX_CPU_ISA=$isa "$SPMD" logreg --data "$D" --features-key X --labels-key y \
    --fit-intercept --l2 0.0005 --class-weight balanced --maxiter 60 --tol 1e-9 --metrics-csv "$WORK/l_$isa.csv" \
    --json "$WORK/l_$isa.json" --weights-out "$WORK/l_$isa.h5" --quiet
done
run kernels_identical 0 20 "$PY" "$SPMD_SOURCE_DIR/tests/support/logreg_same_bits.py" 15 "$WORK/l" 11 _portable _avx2

# Every storage of the matrix (h5sparse, a shape dataset, int32 or int64 indices, float64
# data holding float32 values) and AnnData's own file: the same bits.
for m in X_h5sparse X_shape_dataset; do
  run "storage_$m" 0 120 mpi 2 "$SPMD" logreg --data "$D" --features-key $m --labels-key y --fit-intercept \
    --l2 0.0005 --class-weight balanced --maxiter 60 --tol 1e-9 --metrics-csv "$WORK/l_$m.csv" \
    --json "$WORK/l_$m.json" --weights-out "$WORK/l_$m.h5" --quiet
done
run storages_identical 0 20 "$PY" "$SPMD_SOURCE_DIR/tests/support/logreg_same_bits.py" 15 "$WORK/l" 11 _X_h5sparse _X_shape_dataset
if [ $have_anndata = 1 ]; then
  run h5ad 0 120 mpi 3 "$SPMD" logreg --data "$A" --features-key X --labels-key obs/cell_type --fit-intercept \
    --l2 0.0005 --class-weight balanced --maxiter 60 --tol 1e-9 --metrics-csv "$WORK/l_h5ad.csv" \
    --json "$WORK/l_h5ad.json" --weights-out "$WORK/l_h5ad.h5"
  expect_in "h5ad: the summary names the matrix and the column" "AnnData csr_matrix.*labels AnnData categorical 'obs/cell_type' \(3 categories\)"
  run h5ad_identical 0 20 "$PY" "$SPMD_SOURCE_DIR/tests/support/logreg_same_bits.py" 15 "$WORK/l" 11 _h5ad
  run h5ad_class_names 0 10 py "
import json; j = json.load(open('$WORK/l_h5ad.json'))
assert j['class_names'] == ['B cell', 'T cell', 'NK cell'], j['class_names']"
  run h5ad_missing_category nonzero 30 mpi 3 "$SPMD" logreg --data "$A" --features-key X --labels-key obs/with_missing \
    --weights-out "$WORK/never.h5" --json "$WORK/never.json"
  expect_in "h5ad_missing_category names the row" "row 12345 has no category \(code -1"
  run h5ad_no_labels nonzero 30 mpi 2 "$SPMD" logreg --data "$A" --weights-out "$WORK/never.h5"
  expect_in "h5ad_no_labels lists the columns to choose from" "AnnData file.*obs/cell_type"
fi

# Refusals on every rank, naming the group and what is wrong; nothing written.
for bad in "X_csc:column-compressed matrix .AnnData csc_matrix.*tocsr" "X_bad_column:row 15000 has column index 300" \
           "X_no_indptr:lacks dataset.s. indptr"; do
  key=${bad%%:*}; words=${bad#*:}
  run "refused_$key" nonzero 30 mpi 3 "$SPMD" logreg --data "$D" --features-key "$key" --labels-key y \
    --weights-out "$WORK/never.h5" --json "$WORK/never.json"
  expect_in "refused_$key names it" "$words"
done
run refused_no_label_key nonzero 30 mpi 2 "$SPMD" logreg --data "$D" --features-key X --weights-out "$WORK/never.h5"
expect_in "refused_no_label_key asks for it" "set --labels-key"
checks=$((checks + 1))
if [ ! -e "$WORK/never.h5" ] && [ ! -e "$WORK/never.json" ]; then echo "ok   nothing written by the refused runs"
else fail "a refused run wrote an output"; fi
finish
