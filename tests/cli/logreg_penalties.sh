#!/usr/bin/env bash
# spmd logreg --penalty l1|elasticnet (OWL-QN) and --init-weights (warm start), checked
# against scikit-learn: its saga solver on the same float64 data and objective (multinomial,
# C = 1 / (reg * N), l1_ratio) reaches the same objective within 1e-8 (relative) and the same
# support (which weights are exactly zero); the intercept is not penalised; every layout gives
# the same bits; --l2 L is --penalty l2 --reg L; a warm start goes on from the file it is
# given and is refused when that file's shape differs from the data's.
source "$(dirname "$0")/../support/cli_lib.sh"
PY=/usr/bin/python3
py() { "$PY" -c "$1"; }
D=$WORK/sparse_truth.h5
N=5003  # three chunks of 2048 rows, the last partial: the layouts below split them differently

# Labels drawn from a model that uses 8 of the 40 features, so an L1 fit has a support to find.
run make_data 0 30 py "
import h5py, numpy as np
rng = np.random.default_rng(20261207)
n, F, C = $N, 40, 4
X = (rng.normal(size=(n, F)) * rng.uniform(0.5, 1.5, size=F)).astype(np.float32)
W = np.zeros((F, C)); W[:8] = rng.normal(scale=0.8, size=(8, C))
Z = X.astype(np.float64) @ W + np.array([0.9, 0.1, -0.4, -0.6])
P = np.exp(Z - Z.max(axis=1, keepdims=True)); P /= P.sum(axis=1, keepdims=True)
y = (P.cumsum(axis=1) > rng.uniform(size=(n, 1))).argmax(axis=1).astype(np.int32)
with h5py.File('$D', 'w') as f:
    f['X'] = X; f['y'] = y"

# sklearn's saga (float64), and the objective of any weights file. Its epochs visit the rows in a
# random order: random_state fixes it, and tol 1e-10 (values within 2e-16 of other orders here)
# is reachable from every order; at 1e-13 one order ran past the test's 600 s in CI.
cat >"$WORK/sklearn_fit.py" <<EOF
import json, sys, h5py, numpy as np
from sklearn.linear_model import LogisticRegression
data, reg, ratio, out = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
d = h5py.File(data, 'r'); X = d['X'][()].astype(np.float64); y = d['y'][()]
m = LogisticRegression(penalty='elasticnet', l1_ratio=ratio, C=1.0 / (reg * len(y)), solver='saga', tol=1e-10,
                       max_iter=20000, multi_class='multinomial', fit_intercept=True, random_state=0).fit(X, y)
json.dump({'W': m.coef_.T.tolist(), 'b': m.intercept_.tolist(), 'iterations': int(m.n_iter_[0])}, open(out, 'w'))
EOF
cat >"$WORK/objective.py" <<EOF
import h5py, numpy as np
def objective(data, W, b, l1, l2):
    d = h5py.File(data, 'r'); X = d['X'][()].astype(np.float64); y = d['y'][()]; n = len(y)
    Z = X @ W + b; m = Z.max(axis=1, keepdims=True); lse = m[:, 0] + np.log(np.exp(Z - m).sum(axis=1))
    return (lse - Z[np.arange(n), y]).mean() + l1 * np.abs(W).sum() + 0.5 * l2 * (W * W).sum()
def weights(path):
    f = h5py.File(path, 'r'); return f['W'][()].astype(np.float64), f['b'][()].astype(np.float64), dict(f.attrs)
EOF

# reg 0.01 keeps ~half the weights; 0.03 fewer; elasticnet mixes.
for case in "l1_001:l1:0.01:1" "l1_003:l1:0.03:1" "en_001:elasticnet:0.01:0.4"; do
  IFS=: read -r name penalty reg ratio <<<"$case"
  ratio_opt=(); [ "$penalty" = elasticnet ] && ratio_opt=(--l1-ratio "$ratio")
  run "sklearn_$name" 0 600 "$PY" "$WORK/sklearn_fit.py" "$D" "$reg" "$ratio" "$WORK/sk_$name.json"
  run "fit_$name" 0 180 "$SPMD" logreg --data "$D" --fit-intercept --penalty "$penalty" --reg "$reg" "${ratio_opt[@]}" \
    --precision float64 --maxiter 3000 --tol 1e-10 --weights-out "$WORK/w_$name.h5" --json "$WORK/fit_$name.json"
  expect_in "fit_$name: the start-up line names OWL-QN and the penalty" "solver OWL-QN .*penalty $penalty"
  run "against_sklearn_$name" 0 60 py "
import json, sys; sys.path.insert(0, '$WORK')
import numpy as np
from objective import objective, weights
reg, ratio = $reg, $ratio
l1, l2 = reg * ratio, reg * (1 - ratio)
sk = json.load(open('$WORK/sk_$name.json')); fit = json.load(open('$WORK/fit_$name.json'))
W, b, attrs = weights('$WORK/w_$name.h5')
Ws, bs = np.array(sk['W']), np.array(sk['b'])
ours, theirs = objective('$D', W, b, l1, l2), objective('$D', Ws, bs, l1, l2)
rel = (ours - theirs) / theirs
support, sk_support = W != 0, Ws != 0
print('$name: spmd %.15f (%s, %d iterations), sklearn saga %.15f (%d epochs): relative %.2e; non-zeros %d and %d, '
      'pattern equal %s' % (ours, fit['status'], fit['iterations'], theirs, sk['iterations'], rel, support.sum(),
                            sk_support.sum(), (support == sk_support).all()))
assert fit['status'] in ('converged', 'precision_limit'), fit['status']
assert fit['solver'] == 'owlqn' and fit['penalty'] == '$penalty' and abs(fit['l1'] - l1) < 1e-15, fit
assert abs(fit['value'] - ours) <= 1e-12 * ours, (fit['value'], ours)   # the value reported is this objective
assert abs(rel) <= 1e-8, rel
assert (support == sk_support).all(), np.argwhere(support != sk_support)
assert 0 < support.sum() < support.size, support.sum()   # a real support: neither all nor none
assert attrs['penalty'] in ('$penalty', b'$penalty') and abs(attrs['l1'] - l1) < 1e-15, attrs"
  cat "$LAST_OUT"
done

# float32 arithmetic (the default) reaches the same objective to float32's resolution.
run fit_l1_float32 0 180 "$SPMD" logreg --data "$D" --fit-intercept --penalty l1 --reg 0.01 --maxiter 3000 --tol 1e-8 \
  --weights-out "$WORK/w_f32.h5" --quiet
run float32_close 0 60 py "
import json, sys; sys.path.insert(0, '$WORK')
import numpy as np
from objective import objective, weights
W, b, _ = weights('$WORK/w_f32.h5'); W64, b64, _ = weights('$WORK/w_l1_001.h5')
ours, best = objective('$D', W, b, 0.01, 0), objective('$D', W64, b64, 0.01, 0)
print('float32 %.12f, float64 %.12f: relative %.2e; supports %d and %d' % (ours, best, (ours - best) / best,
      (W != 0).sum(), (W64 != 0).sum()))
assert abs(ours - best) <= 1e-6 * best"
cat "$LAST_OUT"

# A penalty this strong zeroes all of W; b is free, so softmax(b) is the class frequencies.
run all_zero 0 60 "$SPMD" logreg --data "$D" --fit-intercept --penalty l1 --reg 5 --precision float64 --maxiter 500 \
  --tol 1e-10 --weights-out "$WORK/w_zero.h5" --quiet
run intercept_not_penalised 0 30 py "
import h5py, numpy as np
f = h5py.File('$WORK/w_zero.h5', 'r'); W = f['W'][()]; b = f['b'][()]
y = h5py.File('$D', 'r')['y'][()]
assert (W == 0).all(), (W != 0).sum()
p = np.exp(b - b.max()); p /= p.sum()
freq = np.bincount(y, minlength=4) / len(y)
assert np.abs(p - freq).max() < 1e-8, (p, freq)"

# Bitwise the same on every layout: every iterate (CSV), the value, W and b.
for layout in "1 1" "2 3" "3 1"; do
  set -- $layout
  run "layout_np$1_d$2" 0 180 mpi $1 "$SPMD" logreg --data "$D" --fit-intercept --penalty elasticnet --l1-ratio 0.7 \
    --reg 0.01 --maxiter 80 --tol 1e-9 --devices $2 --verify-replicas --metrics-csv "$WORK/l$1$2.csv" \
    --json "$WORK/l$1$2.json" --weights-out "$WORK/l$1$2.h5" --quiet
done
run layouts_identical 0 20 "$PY" "$SPMD_SOURCE_DIR/tests/support/logreg_same_bits.py" 15 "$WORK/l" 11 23 31

# --l2 L and --penalty l2 --reg L are the same solve (bitwise).
run l2_option 0 60 "$SPMD" logreg --data "$D" --l2 0.02 --maxiter 30 --json "$WORK/l2a.json" --weights-out "$WORK/l2a.h5" --quiet
expect_in "l2_option: L-BFGS, penalty named" 'solver L-BFGS .*penalty l2 0.02'
run reg_option 0 60 "$SPMD" logreg --data "$D" --penalty l2 --reg 0.02 --maxiter 30 --json "$WORK/l2b.json" \
  --weights-out "$WORK/l2b.h5" --quiet
run l2_same 0 20 py "
import json, h5py
a, b = (json.load(open('$WORK/l2%s.json' % k)) for k in 'ab')
assert a['value'].hex() == b['value'].hex() and a['solver'] == b['solver'] == 'lbfgs', (a['value'], b['value'])
assert h5py.File('$WORK/l2a.h5')['W'][()].tobytes() == h5py.File('$WORK/l2b.h5')['W'][()].tobytes()"

# Warm start: 6 iterations, then on from that file, reach the straight solve's objective; from
# the float64 optimum it is converged at once.
run warm_first 0 60 "$SPMD" logreg --data "$D" --fit-intercept --penalty l1 --reg 0.01 --precision float64 --maxiter 6 \
  --weights-out "$WORK/w_6.h5" --json "$WORK/warm_first.json" --quiet
run warm_rest 0 180 "$SPMD" logreg --data "$D" --fit-intercept --penalty l1 --reg 0.01 --precision float64 --maxiter 3000 \
  --tol 1e-10 --init-weights "$WORK/w_6.h5" --json "$WORK/warm_rest.json" --weights-out "$WORK/w_warm.h5" --quiet
expect_in "warm_rest: the start-up line names the start" "from $WORK/w_6.h5"
run warm_at_optimum 0 60 "$SPMD" logreg --data "$D" --fit-intercept --penalty l1 --reg 0.01 --precision float64 \
  --tol 1e-6 --init-weights "$WORK/w_l1_001.h5" --json "$WORK/warm_opt.json" --quiet
run warm_checks 0 20 py "
import json, sys; sys.path.insert(0, '$WORK')
from objective import objective, weights
first, rest, opt = (json.load(open('$WORK/%s.json' % k)) for k in ('warm_first', 'warm_rest', 'warm_opt'))
straight = json.load(open('$WORK/fit_l1_001.json'))
assert first['status'] == 'max_iterations' and first['value'] > straight['value'] * (1 + 1e-6), first['value']
assert rest['history'][0]['value'] < first['value'], 'the second run starts where the first ended'
assert abs(rest['value'] - straight['value']) <= 1e-10 * straight['value'], (rest['value'], straight['value'])
assert opt['iterations'] == 0 and opt['status'] == 'converged', (opt['iterations'], opt['status'])
assert abs(opt['value'] - straight['value']) <= 1e-14 * straight['value']
print('warm start: after 6 iterations %.12f, then %d more to %.12f; straight %d to %.12f' %
      (first['value'], rest['iterations'], rest['value'], straight['iterations'], straight['value']))"
cat "$LAST_OUT"

# A start that does not fit the data or the run is refused on every rank, naming the file.
run make_other 0 30 py "
import h5py, numpy as np
with h5py.File('$WORK/w_f39.h5', 'w') as f: f['W'] = np.zeros((39, 4), np.float32); f['b'] = np.zeros(4, np.float32)
with h5py.File('$WORK/w_c5.h5', 'w') as f: f['W'] = np.zeros((40, 5), np.float32); f['b'] = np.zeros(5, np.float32)
with h5py.File('$WORK/w_nob.h5', 'w') as f: f['W'] = np.zeros((40, 4), np.float32)"
for bad in "w_f39:39 features, the data" "w_c5:5 classes, the data" "w_nob:has no intercept" ; do
  file=${bad%%:*}; words=${bad#*:}
  run "warm_refused_$file" nonzero 30 mpi 2 "$SPMD" logreg --data "$D" --fit-intercept --init-weights "$WORK/$file.h5" \
    --weights-out "$WORK/never.h5"
  expect_in "warm_refused_$file names the file and the mismatch" "init-weights '$WORK/$file.h5'.*$words"
done
run warm_refused_intercept nonzero 30 mpi 2 "$SPMD" logreg --data "$D" --init-weights "$WORK/w_6.h5"
expect_in "warm_refused_intercept: a file with b and no --fit-intercept" 'has an intercept .b., and this run fits none'
run warm_refused_missing nonzero 30 mpi 2 "$SPMD" logreg --data "$D" --init-weights "$WORK/nothing.h5"
expect_in "warm_refused_missing names it" 'nothing.h5'
[ ! -e "$WORK/never.h5" ] && echo "ok   nothing written by the refused runs" || fail "a refused run wrote never.h5"
checks=$((checks + 1))

# Options that contradict each other are refused before any work, naming them.
for bad in "--penalty l3:penalty" "--penalty elasticnet --l1-ratio 1.5:l1-ratio" "--l2 0.1 --penalty l1:--l2 is" \
           "--l2 0.1 --reg 0.1:both set" "--l1-ratio 0.2:elasticnet only" "--penalty l1 --reg 0.1 --stepsize 0.1:stepsize" \
           "--penalty l1 --reg -1:reg"; do
  opt=${bad%%:*}; word=${bad##*:}
  run "bad[$opt]" nonzero 20 mpi 2 "$SPMD" logreg --data "$D" $opt
  expect_in "bad[$opt] names $word" "$word"
done
finish
