#!/usr/bin/env bash
# spmd logreg --standardize (Spark's standardization: features divided by their weighted sample
# std, never centred; weights reported in the original scale; a constant feature's weight 0):
# against scikit-learn fitted on the data divided by that std, dense and sparse (CSR), with and
# without class weights; the same bits on every layout.
source "$(dirname "$0")/../support/cli_lib.sh"
PY=/usr/bin/python3
py() { "$PY" -c "$1"; }
D=$WORK/units.h5

# Features in very different units (scales 1e-3 .. 1e3) and one constant column, dense and CSR.
run make_data 0 60 py "
import h5py, numpy as np, scipy.sparse as sp
rng = np.random.default_rng(81207)
n, F, K = 6007, 40, 3
X = sp.random(n, F, density=0.2, format='csr', random_state=rng, dtype=np.float64)
X.data = np.round(X.data * 8) / 8 + 0.125
scale = 10.0 ** rng.uniform(-3, 3, size=F)
X = (X @ sp.diags(scale)).tocsr(); X.data = X.data.astype(np.float32).astype(np.float64)
W = rng.normal(scale=1.0, size=(F, K)) / scale[:, None]
Z = X @ W; P = np.exp(Z - Z.max(axis=1, keepdims=True)); P /= P.sum(axis=1, keepdims=True)
y = (P.cumsum(axis=1) > rng.uniform(size=(n, 1))).argmax(axis=1)
Xd = np.hstack([X.toarray(), np.full((n, 1), 2.5)]).astype(np.float32)
sp.save_npz('$WORK/X.npz', X); np.save('$WORK/y.npy', y)
with h5py.File('$D', 'w') as f:
    g = f.create_group('S'); g['data'] = X.data.astype(np.float32); g['indices'] = X.indices; g['indptr'] = X.indptr
    g.attrs['shape'] = X.shape
    f['Xd'] = Xd; f['y'] = y
print('class counts', np.bincount(y))"

cat >"$WORK/peer.py" <<EOF
import json, sys, h5py, numpy as np, scipy.sparse as sp
from sklearn.linear_model import LogisticRegression
form, reg, class_weight, weights_file, summary = sys.argv[1:6]
reg = float(reg)
y = np.load('$WORK/y.npy'); n = len(y)
X = sp.load_npz('$WORK/X.npz')
if form == 'dense':
    X = sp.hstack([X, sp.csr_matrix(np.full((n, 1), 2.5))]).tocsr()
w = np.ones(n)
if class_weight == 'balanced':
    counts = np.bincount(y); w = (n / (len(counts) * counts))[y]
# Spark's weighted sample variance, per column.
sw, sww = w.sum(), (w * w).sum()
sx = X.T @ w; sxx = (X.multiply(X)).T @ w
var = (sxx - sx * sx / sw) / (sw - sww / sw)
constant = (X.max(axis=0).toarray().ravel() == X.min(axis=0).toarray().ravel()) | ~(var > 0)
inv = np.where(constant, 0.0, 1.0 / np.sqrt(np.where(constant, 1.0, var)))
Xs = (X @ sp.diags(inv)).tocsr()
m = LogisticRegression(C=1.0 / (reg * n), solver='lbfgs', tol=1e-12, max_iter=100000, multi_class='multinomial',
                       class_weight=None if class_weight == 'none' else 'balanced').fit(Xs, y)
def objective(Ws, b):  # in the scaled space: what both minimise
    Z = Xs @ Ws + b; mx = Z.max(axis=1, keepdims=True); lse = mx[:, 0] + np.log(np.exp(Z - mx).sum(axis=1))
    return (w * (lse - Z[np.arange(n), y])).sum() / n + 0.5 * reg * (Ws * Ws).sum()
f = h5py.File(weights_file, 'r'); W, b = f['W'][()], f['b'][()]
fit = json.load(open(summary))
Ws_ours = np.where(inv[:, None] > 0, W / np.where(inv > 0, inv, 1.0)[:, None], 0.0)
ours, theirs = objective(Ws_ours, b), objective(m.coef_.T, m.intercept_)
W_theirs = m.coef_.T * inv[:, None]
print('%s %s: spmd %.15f (%s), sklearn on X / std %.15f: relative %.2e; max |W - W_sklearn| / max |W| %.2e' %
      (form, class_weight, ours, fit['status'], theirs, (ours - theirs) / theirs,
       np.abs(W - W_theirs).max() / np.abs(W).max()))
assert fit['standardize'] and fit['constant_features'] == int(constant.sum()), fit
assert abs(fit['value'] - ours) <= 1e-10 * ours, (fit['value'], ours)
assert ours <= theirs * (1 + 1e-10) and ours >= theirs * (1 - 1e-8), (ours, theirs)
assert np.abs(W - W_theirs).max() <= 1e-4 * np.abs(W).max()
assert (W[constant] == 0).all()
# Unstandardized, the same penalty gives another fit: the scaling must matter here.
EOF

for case in "dense:none" "dense:balanced" "sparse:none" "sparse:balanced"; do
  IFS=: read -r form cw <<<"$case"
  key=Xd; [ $form = sparse ] && key=S
  cw_opt=(); [ "$cw" != none ] && cw_opt=(--class-weight "$cw")
  run "fit_${form}_$cw" 0 180 "$SPMD" logreg --data "$D" --features-key $key --labels-key y --fit-intercept \
    --standardize --l2 0.01 "${cw_opt[@]}" --precision float64 --maxiter 5000 --tol 1e-9 \
    --weights-out "$WORK/w_${form}_$cw.h5" --json "$WORK/f_${form}_$cw.json"
  expect_in "fit_${form}_$cw: the start-up line says so" "standardized features"
  run "against_sklearn_${form}_$cw" 0 120 "$PY" "$WORK/peer.py" $form 0.01 $cw "$WORK/w_${form}_$cw.h5" \
    "$WORK/f_${form}_$cw.json"
  cat "$LAST_OUT"
done
run plain_differs 0 120 "$SPMD" logreg --data "$D" --features-key Xd --labels-key y --fit-intercept --l2 0.01 \
  --precision float64 --maxiter 5000 --tol 1e-9 --weights-out "$WORK/w_plain.h5" --quiet
run scaling_matters 0 20 py "
import h5py, numpy as np
a, b = h5py.File('$WORK/w_plain.h5', 'r')['W'][()], h5py.File('$WORK/w_dense_none.h5', 'r')['W'][()]
assert np.abs(a - b).max() > 1e-2 * np.abs(b).max(), np.abs(a - b).max()"

# Bitwise the same on every layout (the std's sums are in the objective's chunk order).
for layout in "1 1" "3 2"; do
  set -- $layout
  run "layout_np$1_d$2" 0 120 mpi $1 "$SPMD" logreg --data "$D" --features-key S --labels-key y --fit-intercept \
    --standardize --penalty l1 --reg 0.001 --maxiter 40 --devices $2 --verify-replicas \
    --metrics-csv "$WORK/l$1$2.csv" --json "$WORK/l$1$2.json" --weights-out "$WORK/l$1$2.h5" --quiet
done
run layouts_identical 0 20 "$PY" "$SPMD_SOURCE_DIR/tests/support/logreg_same_bits.py" 10 "$WORK/l" 11 32
finish
