#!/usr/bin/env bash
# spmd logreg --sample-weight-key / --class-weight: scikit-learn's sample_weight and
# class_weight (balanced, or one weight per class), checked against sklearn's saga on the same
# float64 data (weights with zeros among them; with L2 and with L1, where the support must
# match too); the same bits on every layout; bad weights refused on every rank naming the
# dataset and row, with nothing written.
source "$(dirname "$0")/../support/cli_lib.sh"
PY=/usr/bin/python3
py() { "$PY" -c "$1"; }
D=$WORK/weighted.h5
N=5003

# Imbalanced classes (balanced weights matter) and weights in [0, 3) with every 7th row 0.
run make_data 0 30 py "
import h5py, numpy as np
rng = np.random.default_rng(61207)
n, F, C = $N, 24, 4
X = (rng.normal(size=(n, F)) * rng.uniform(0.5, 1.5, size=F)).astype(np.float32)
W = np.zeros((F, C)); W[:10] = rng.normal(scale=0.7, size=(10, C))
Z = X.astype(np.float64) @ W + np.array([1.6, 0.4, -0.6, -1.2])
P = np.exp(Z - Z.max(axis=1, keepdims=True)); P /= P.sum(axis=1, keepdims=True)
y = (P.cumsum(axis=1) > rng.uniform(size=(n, 1))).argmax(axis=1).astype(np.int32)
sw = rng.uniform(0, 3, size=n); sw[::7] = 0
with h5py.File('$D', 'w') as f:
    f['X'] = X; f['y'] = y; f['sw'] = sw; f['sw32'] = sw.astype(np.float32); f['sw_col'] = sw[:, None]
    f['sw_short'] = sw[:-1]; bad = sw.copy(); bad[3001] = -0.5; f['sw_negative'] = bad
    nan = sw.copy(); nan[4444] = np.nan; f['sw_nan'] = nan; f['sw_zero'] = np.zeros(n)
print('class counts', np.bincount(y))"
cat "$LAST_OUT"

cat >"$WORK/sklearn_fit.py" <<EOF
import json, sys, h5py, numpy as np
from sklearn.linear_model import LogisticRegression
data, penalty, reg, class_weight, out = sys.argv[1:6]
reg = float(reg)
d = h5py.File(data, 'r'); X = d['X'][()].astype(np.float64); y = d['y'][()]; sw = d['sw'][()]
if class_weight not in ('none', 'balanced'):
    class_weight = {c: float(w) for c, w in enumerate(class_weight.split(','))}
m = LogisticRegression(penalty=penalty, C=1.0 / (reg * len(y)), solver='saga', tol=1e-10, max_iter=20000, random_state=0,
                       multi_class='multinomial', class_weight=None if class_weight == 'none' else class_weight
                       ).fit(X, y, sample_weight=sw)
json.dump({'W': m.coef_.T.tolist(), 'b': m.intercept_.tolist()}, open(out, 'w'))
EOF
cat >"$WORK/objective.py" <<EOF
import h5py, numpy as np
def row_weights(data, class_weight):
    d = h5py.File(data, 'r'); y = d['y'][()]; w = d['sw'][()].copy()
    if class_weight == 'balanced':
        counts = np.bincount(y); w *= (len(y) / (np.count_nonzero(counts) * counts))[y]
    elif class_weight != 'none':
        w *= np.array([float(v) for v in class_weight.split(',')])[y]
    return w
def objective(data, W, b, l1, l2, w):
    d = h5py.File(data, 'r'); X = d['X'][()].astype(np.float64); y = d['y'][()]; n = len(y)
    Z = X @ W + b; m = Z.max(axis=1, keepdims=True); lse = m[:, 0] + np.log(np.exp(Z - m).sum(axis=1))
    return (w * (lse - Z[np.arange(n), y])).sum() / n + l1 * np.abs(W).sum() + 0.5 * l2 * (W * W).sum()
EOF

for case in "l2_plain:l2:0.001:none" "l2_balanced:l2:0.001:balanced" "l2_list:l2:0.001:2,1,0.5,3" \
            "l1_balanced:l1:0.01:balanced"; do
  IFS=: read -r name penalty reg cw <<<"$case"
  cw_opt=(); [ "$cw" != none ] && cw_opt=(--class-weight "$cw")
  run "sklearn_$name" 0 300 "$PY" "$WORK/sklearn_fit.py" "$D" "$penalty" "$reg" "$cw" "$WORK/sk_$name.json"
  run "fit_$name" 0 180 "$SPMD" logreg --data "$D" --fit-intercept --penalty "$penalty" --reg "$reg" \
    --sample-weight-key sw "${cw_opt[@]}" --precision float64 --maxiter 3000 --tol 1e-10 \
    --weights-out "$WORK/w_$name.h5" --json "$WORK/fit_$name.json"
  expect_in "fit_$name: the start-up lines name the weights" "# weights  rows x sample weight 'sw'"
  expect_in "fit_$name: the summary gives their sum" 'rows weighted by .* \(weights sum to'
  run "against_sklearn_$name" 0 60 py "
import json, sys, h5py; sys.path.insert(0, '$WORK')
import numpy as np
from objective import objective, row_weights
reg, penalty = $reg, '$penalty'
l1, l2 = (reg, 0) if penalty == 'l1' else (0, reg)
w = row_weights('$D', '$cw')
sk = json.load(open('$WORK/sk_$name.json')); fit = json.load(open('$WORK/fit_$name.json'))
f = h5py.File('$WORK/w_$name.h5', 'r'); W, b = f['W'][()], f['b'][()]
Ws, bs = np.array(sk['W']), np.array(sk['b'])
ours, theirs = objective('$D', W, b, l1, l2, w), objective('$D', Ws, bs, l1, l2, w)
unweighted = objective('$D', Ws, bs, l1, l2, np.ones_like(w))
rel = (ours - theirs) / theirs
print('$name: spmd %.15f (%s), sklearn saga %.15f: relative %.2e; weights sum %.6f (spmd %.6f)' %
      (ours, fit['status'], theirs, rel, w.sum(), fit['weight_total']))
assert fit['status'] in ('converged', 'precision_limit'), fit['status']
assert abs(fit['value'] - ours) <= 1e-12 * ours, (fit['value'], ours)
assert abs(rel) <= 1e-8, rel
assert abs(fit['weight_total'] - w.sum()) <= 1e-9 * w.sum()
assert abs(unweighted - theirs) > 1e-3 * theirs, 'the weights must matter here'
if penalty == 'l1':
    assert ((W != 0) == (Ws != 0)).all(), np.argwhere((W != 0) != (Ws != 0))
    assert 0 < (W != 0).sum() < W.size
if '$cw' not in ('none', 'balanced'):
    assert fit['class_weights'] == [float(v) for v in '$cw'.split(',')], fit['class_weights']"
  cat "$LAST_OUT"
done

# float32 weights in the file, a [N, 1] column, and a class-weight file: the same solve.
printf '# one weight per class\n2\n1, 0.5\n3\n' >"$WORK/cw.txt"
run fit_file_weights 0 120 "$SPMD" logreg --data "$D" --fit-intercept --l2 0.001 --sample-weight-key sw_col \
  --class-weight "$WORK/cw.txt" --precision float64 --maxiter 3000 --tol 1e-10 --json "$WORK/file_weights.json" --quiet
run file_weights_same 0 20 py "
import json
a = json.load(open('$WORK/file_weights.json')); b = json.load(open('$WORK/fit_l2_list.json'))
assert a['value'].hex() == b['value'].hex(), (a['value'], b['value'])"
run fit_weights32 0 120 "$SPMD" logreg --data "$D" --fit-intercept --l2 0.001 --sample-weight-key sw32 \
  --precision float64 --maxiter 3000 --tol 1e-10 --json "$WORK/w32.json" --quiet
run weights32_close 0 20 py "
import json
a = json.load(open('$WORK/w32.json')); b = json.load(open('$WORK/fit_l2_plain.json'))
assert abs(a['value'] - b['value']) <= 1e-6 * b['value'], (a['value'], b['value'])"

# float32 arithmetic: within float32's reach of the float64 optimum.
run fit_float32 0 120 "$SPMD" logreg --data "$D" --fit-intercept --l2 0.001 --sample-weight-key sw \
  --class-weight balanced --maxiter 3000 --tol 1e-8 --weights-out "$WORK/w_f32.h5" --quiet
run float32_close 0 30 py "
import sys, h5py; sys.path.insert(0, '$WORK')
from objective import objective, row_weights
w = row_weights('$D', 'balanced')
f, g = h5py.File('$WORK/w_f32.h5', 'r'), h5py.File('$WORK/w_l2_balanced.h5', 'r')
ours = objective('$D', f['W'][()].astype(float), f['b'][()].astype(float), 0, 0.001, w)
best = objective('$D', g['W'][()], g['b'][()], 0, 0.001, w)
print('float32 %.12f float64 %.12f relative %.2e' % (ours, best, (ours - best) / best))
assert abs(ours - best) <= 1e-6 * best"
cat "$LAST_OUT"

# Bitwise the same on every layout, weighted (the rank boundaries cut the weights too).
for layout in "1 1" "2 3" "3 1"; do
  set -- $layout
  run "layout_np$1_d$2" 0 180 mpi $1 "$SPMD" logreg --data "$D" --fit-intercept --l2 0.001 --sample-weight-key sw \
    --class-weight balanced --maxiter 60 --tol 1e-9 --devices $2 --verify-replicas --metrics-csv "$WORK/l$1$2.csv" \
    --json "$WORK/l$1$2.json" --weights-out "$WORK/l$1$2.h5" --quiet
done
run layouts_identical 0 20 "$PY" "$SPMD_SOURCE_DIR/tests/support/logreg_same_bits.py" 15 "$WORK/l" 11 23 31

# CPU and CUDA reach the same weighted objective (needs a GPU; skipped visibly without).
if "$SPMD" info --backend cuda >/dev/null 2>&1; then
  for backend in cpu cuda; do
    run "backend_$backend" 0 120 mpi 2 "$SPMD" logreg --data "$D" --fit-intercept --l2 0.001 --sample-weight-key sw \
      --class-weight balanced --backend $backend --maxiter 60 --metrics-csv "$WORK/b_$backend.csv" --quiet
  done
  run cpu_equals_cuda 0 10 cmp "$WORK/b_cpu.csv" "$WORK/b_cuda.csv"
else
  echo "SKIP cpu_equals_cuda: no GPU here (spmd info --backend cuda fails)"
fi

# Bad weights: every rank stops naming the dataset (and the row), nothing is written.
for bad in "sw_negative:row 3001 has weight -0.5" "sw_nan:row 4444 has weight nan" "sw_short:must be \[5003\]" \
           "missing:no such dataset" "sw_zero:every row .* has weight 0"; do
  key=${bad%%:*}; words=${bad#*:}
  run "bad_weights_$key" nonzero 30 mpi 3 "$SPMD" logreg --data "$D" --sample-weight-key "$key" \
    --weights-out "$WORK/never.h5" --json "$WORK/never.json"
  expect_in "bad_weights_$key names it" "$words"
done
for bad in "1,2:gives 2 weights; the data has 4 classes" "1,2,-1,1:weight of class 2 is -1" \
           "$WORK/nothing.txt:cannot read it" "$WORK:is a directory"; do
  cw=${bad%%:*}; words=${bad#*:}; label=${cw##*/}
  run "bad_class_weight[$label]" nonzero 30 mpi 2 "$SPMD" logreg --data "$D" --class-weight "$cw" \
    --weights-out "$WORK/never.h5"
  expect_in "bad_class_weight[$label] names it" "$words"
done
printf '1\n2\nthree\n4\n' >"$WORK/cw_bad.txt"
run bad_class_weight_file nonzero 30 mpi 2 "$SPMD" logreg --data "$D" --class-weight "$WORK/cw_bad.txt"
expect_in "bad_class_weight_file names it" "cw_bad.txt' holds something that is not a number"
checks=$((checks + 1))
if [ ! -e "$WORK/never.h5" ] && [ ! -e "$WORK/never.json" ]; then echo "ok   nothing written by the refused runs"
else fail "a refused run wrote an output"; fi
finish
