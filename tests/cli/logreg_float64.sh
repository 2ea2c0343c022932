#!/usr/bin/env bash
# spmd logreg --precision float64 reaches scikit-learn's float64 optimum on ill-conditioned
# problems where float32 cannot: features with a large shared offset, scales 1e-2..1e2 and
# near-collinear columns, each fitted with an intercept and sklearn's C = 1 / (l2 * N).
# sklearn (Debian's python3-sklearn) fits with newton-cg at tol 1e-13 (its lbfgs stops
# early on these); both sides' weights are scored by the same float64 objective. float64
# is within 1e-8 (relative) of sklearn (asserted: 1e-10; float sums in the float64 kernel give
# 7e-9 here, float64's own 1e-11 at most); float32 on the offset problem is not, and stops at
# precision_limit with a message naming --precision float64. float64 iterates, W and b are
# the same bits on every ranks x devices layout; the weights file holds float64 W and b and
# says so, and spmd eval reads it.
source "$(dirname "$0")/../support/cli_lib.sh"
PY=/usr/bin/python3
py() { "$PY" -c "$1"; }
if ! "$PY" -c "import sklearn" 2>/dev/null; then
  echo "FAIL: python3-sklearn is not installed (tools/setup.sh installs it)"
  exit 1
fi
N=3001  # two chunks of 2048 rows, the second partial
L2=$("$PY" -c "print(repr(1.0 / (1.0 * $N)))")  # sklearn's C = 1

for kind in offset scales collinear; do
  run "make_$kind" 0 30 py "
import h5py, numpy as np
rng = np.random.default_rng(7)
n, F, C = $N, 6, 3
X = rng.normal(size=(n, F))
if '$kind' == 'offset': X *= rng.uniform(0.5, 2.0, size=F)
if '$kind' == 'scales': X *= np.logspace(-2, 2, F)
if '$kind' == 'collinear':
    X[:, 1] = X[:, 0] + 1e-2 * rng.normal(size=n); X[:, 3] = X[:, 2] - X[:, 0] + 1e-2 * rng.normal(size=n)
W = rng.normal(size=(F, C)) / np.abs(X).mean(axis=0)[:, None]
Z = X @ W
P = np.exp(Z - Z.max(axis=1, keepdims=True)); P /= P.sum(axis=1, keepdims=True)
y = (P.cumsum(axis=1) > rng.uniform(size=(n, 1))).argmax(axis=1).astype(np.int32)
if '$kind' == 'offset': X += 50.0
with h5py.File('$WORK/$kind.h5', 'w') as f:
    f['X'] = X.astype(np.float32); f['y'] = y"
  run "sklearn_$kind" 0 120 py "
import h5py, json, warnings, numpy as np
from sklearn.linear_model import LogisticRegression
warnings.simplefilter('ignore')  # at the optimum newton-cg's steps stall on rounding: it warns, runs to max_iter
f = h5py.File('$WORK/$kind.h5', 'r'); X = f['X'][()].astype(np.float64); y = f['y'][()]
m = LogisticRegression(C=1.0, fit_intercept=True, tol=1e-13, max_iter=300, solver='newton-cg').fit(X, y)
json.dump({'W': m.coef_.T.tolist(), 'b': m.intercept_.tolist()}, open('$WORK/sk_$kind.json', 'w'))"
  for precision in float32 float64; do
    run "fit_${kind}_$precision" 0 180 "$SPMD" logreg --data "$WORK/$kind.h5" --fit-intercept --l2 "$L2" --tol 1e-9 \
      --maxiter 5000 --precision $precision --weights-out "$WORK/w_${kind}_$precision.h5" \
      --json "$WORK/fit_${kind}_$precision.json" --quiet
    cp "$LAST_OUT" "$WORK/out_${kind}_$precision.txt"
  done
  run "compare_$kind" 0 30 py "
import h5py, json, numpy as np
f = h5py.File('$WORK/$kind.h5', 'r'); X = f['X'][()].astype(np.float64); y = f['y'][()]; n = len(y)
def objective(W, b):
    Z = X @ np.asarray(W, dtype=np.float64) + np.asarray(b, dtype=np.float64)
    m = Z.max(axis=1, keepdims=True); lse = m[:, 0] + np.log(np.exp(Z - m).sum(axis=1))
    return (lse - Z[np.arange(n), y]).mean() + 0.5 * $L2 * np.sum(np.square(W))
sk = json.load(open('$WORK/sk_$kind.json')); ref = objective(sk['W'], sk['b'])
rel = {}
for p in ('float32', 'float64'):
    w = h5py.File('$WORK/w_${kind}_%s.h5' % p, 'r')
    assert w['W'].dtype == np.dtype(p) and w['b'].dtype == np.dtype(p) and str(np.char.decode(w.attrs['precision']) if isinstance(w.attrs['precision'], bytes) else w.attrs['precision']) == p, (p, w['W'].dtype, w.attrs['precision'])
    rel[p] = (objective(w['W'][()], w['b'][()]) - ref) / ref
    assert json.load(open('$WORK/fit_${kind}_%s.json' % p))['precision'] == p
print('$kind: sklearn %.15f; relative difference float64 %.2e, float32 %.2e' % (ref, rel['float64'], rel['float32']))
assert abs(rel['float64']) <= 1e-10, rel   # 1e-8 asked; 1e-10 fails a kernel that sums in float (7e-9)
if '$kind' == 'offset': assert rel['float32'] > 1e-6, rel   # what float64 is for"
  cat "$LAST_OUT"
done

# float32 stops at its precision limit on the offset problem and says what would go further.
LAST_OUT=$WORK/out_offset_float32.txt
expect_in "float32 stops at its precision limit" 'precision_limit'
expect_in "and names --precision float64" 'use --precision float64'
LAST_OUT=$WORK/out_offset_float64.txt
expect_in "the start-up line states the precision" 'precision float64'

# float64 is the same bits on every layout: every iterate (CSV, %.17g), the value, W and b.
for layout in "1 1" "2 3" "3 1"; do
  set -- $layout
  run "layout_np$1_d$2" 0 180 mpi $1 "$SPMD" logreg --data "$WORK/offset.h5" --fit-intercept --l2 "$L2" \
    --precision float64 --maxiter 60 --devices $2 --verify-replicas --metrics-csv "$WORK/l$1$2.csv" \
    --json "$WORK/l$1$2.json" --weights-out "$WORK/l$1$2.h5" --quiet
done
run layouts_identical 0 20 "$PY" "$SPMD_SOURCE_DIR/tests/support/logreg_same_bits.py" 20 "$WORK/l" 11 23 31

# spmd eval reads the float64 weights (and predicts in float32, like numpy's argmax).
run eval_float64_weights 0 60 "$SPMD" eval --data "$WORK/scales.h5" --model logreg \
  --weights "$WORK/w_scales_float64.h5" --json "$WORK/eval.json"
run eval_counts 0 20 py "
import json, h5py, numpy as np
w = h5py.File('$WORK/w_scales_float64.h5', 'r'); d = h5py.File('$WORK/scales.h5', 'r')
Z = d['X'][()].astype(np.float64) @ w['W'][()] + w['b'][()]; top2 = np.sort(Z, axis=1)[:, -2:]
correct = int((Z.argmax(axis=1) == d['y'][()]).sum()); near = int((top2[:, 1] - top2[:, 0] < 1e-3).sum())
e = json.load(open('$WORK/eval.json'))
assert e['total'] == $N and abs(e['correct'] - correct) <= near, (e['correct'], correct, near)"

run bad_precision 1 20 "$SPMD" logreg --data "$WORK/offset.h5" --precision float16
expect_in "a bad --precision is refused naming the option" "precision must be float32 or float64 \(got 'float16'\)"
finish
