#!/usr/bin/env bash
# spmd logreg --fit-intercept: sklearn's LogisticRegression(fit_intercept=True) semantics
# (logits x W + b, b not penalised, sklearn's C = 1 / (l2 * N)). The objective reached is
# within 1e-6 (relative) of scipy's float64 minimum of sklearn's objective
# (tools/logreg_sklearn_reference.py), with l2 > 0 and l2 = 0; the intercept matters on
# this data (without it the objective is clearly worse); the iterates, W and b are the same
# bits on every layout; the weights file holds b and spmd eval predicts with it.
source "$(dirname "$0")/../support/cli_lib.sh"
REFERENCE="${SPMD_SOURCE_DIR:?}/tools/logreg_sklearn_reference.py"
PY=/usr/bin/python3
py() { "$PY" -c "$1"; }
D=$WORK/intercept.h5
N=6007  # three chunks of 2048 rows, the last one partial: every layout below splits them differently

# Classes of very different priors (b far from 0) and features whose means are not 0, with
# labels drawn from the model itself, so that the classes overlap (a finite minimum at l2 = 0).
run make_data 0 30 py "
import h5py, numpy as np
rng = np.random.default_rng(20240611)
n, F, C = $N, 8, 4
X = (rng.normal(size=(n, F)) * rng.uniform(0.5, 2.0, size=F) + rng.uniform(-1.0, 1.0, size=F)).astype(np.float32)
W = rng.normal(scale=0.5, size=(F, C))
b = np.array([2.2, 0.8, -0.8, -1.6])
Z = X.astype(np.float64) @ W + b
P = np.exp(Z - Z.max(axis=1, keepdims=True)); P /= P.sum(axis=1, keepdims=True)
y = (P.cumsum(axis=1) > rng.uniform(size=(n, 1))).argmax(axis=1).astype(np.int32)
assert np.bincount(y, minlength=C).min() > 50, np.bincount(y)
with h5py.File('$D', 'w') as f:
    f['X'] = X; f['y'] = y"

# sklearn's C = 0.05 is l2 = 1 / (C * N); and no penalty at all.
L2_SKLEARN_C=$("$PY" -c "print(repr(1.0 / (0.05 * $N)))")
for case in "c005:$L2_SKLEARN_C" "none:0"; do
  name=${case%%:*}; l2=${case##*:}
  run "reference_$name" 0 120 "$PY" "$REFERENCE" fit "$D" "$WORK/ref_$name.json" --l2 "$l2" --fit-intercept
  run "reference_no_intercept_$name" 0 120 "$PY" "$REFERENCE" fit "$D" "$WORK/ref_noint_$name.json" --l2 "$l2"
  run "fit_$name" 0 180 "$SPMD" logreg --data "$D" --fit-intercept --l2 "$l2" --maxiter 3000 --tol 1e-7 \
    --weights-out "$WORK/w_$name.h5" --json "$WORK/fit_$name.json" --quiet
  expect_in "fit_$name: the start-up lines say the intercept is fitted" 'intercept fitted \(not penalised\)'
  expect_in "fit_$name: the summary counts it" 'features \+ intercept'
  "$PY" "$REFERENCE" objective "$D" "$WORK/w_$name.h5" --l2 "$l2" >"$WORK/obj_$name.json"
  "$PY" "$REFERENCE" objective "$D" "$WORK/w_$name.h5" --l2 "$l2" --drop-intercept >"$WORK/obj_dropped_$name.json"
  run "sklearn_objective_$name" 0 20 py "
import json
ref = json.load(open('$WORK/ref_$name.json')); ours = json.load(open('$WORK/obj_$name.json'))['value']
fit = json.load(open('$WORK/fit_$name.json'))
assert ref['converged'] and ref['gradient_norm'] < 1e-7, ref
assert fit['fit_intercept'] is True and fit['status'] in ('converged', 'precision_limit'), fit['status']
rel = (ours - ref['value']) / ref['value']
print('l2 %.6g: scipy float64 %.12f, spmd %.12f (float64 objective of its weights; its own float32 value %.12f), '
      'relative difference %.2e' % ($l2, ref['value'], ours, fit['value'], rel))
assert abs(rel) <= 1e-6, rel"
  cat "$LAST_OUT"
  # The intercept matters here: the best model without one, and ours with b dropped, are
  # clearly worse; so a b that were ignored anywhere (training, the file, the objective) fails.
  run "intercept_matters_$name" 0 20 py "
import json
ref = json.load(open('$WORK/ref_$name.json'))['value']
no_intercept = json.load(open('$WORK/ref_noint_$name.json'))['value']
dropped = json.load(open('$WORK/obj_dropped_$name.json'))['value']
print('without intercept: best %.6f, ours with b = 0 %.6f, with intercept %.6f' % (no_intercept, dropped, ref))
assert no_intercept > ref * 1.05, (no_intercept, ref)
assert dropped > ref * 1.5, (dropped, ref)"
  cat "$LAST_OUT"
done

# b is not penalised: at the minimum its gradient, mean_i (p_i - onehot(y_i)), is zero, so the
# mean predicted probabilities are the class frequencies (a penalised b would miss them by
# l2 * b, ~1e-2 here).
run file_holds_b 0 20 py "
import h5py, numpy as np
f = h5py.File('$WORK/w_c005.h5', 'r'); W = f['W'][()]; b = f['b'][()]
assert W.shape == (8, 4) and b.shape == (4,) and W.dtype == np.float32 and b.dtype == np.float32, (W.shape, b.shape)
assert f.attrs['fit_intercept'] == 1, dict(f.attrs)
d = h5py.File('$D', 'r'); X = d['X'][()].astype(np.float64); y = d['y'][()]
Z = X @ W + b; P = np.exp(Z - Z.max(axis=1, keepdims=True)); P /= P.sum(axis=1, keepdims=True)
observed = np.bincount(y, minlength=4) / len(y)
assert np.abs(P.mean(axis=0) - observed).max() < 1e-4, (P.mean(axis=0), observed)
assert b[0] - b[3] > 2, b   # the priors show in b"

# Bitwise the same on every layout: every iterate (CSV, %.17g), the final value, W and b.
for layout in "1 1" "2 3" "3 1"; do
  set -- $layout
  run "layout_np$1_d$2" 0 180 mpi $1 "$SPMD" logreg --data "$D" --fit-intercept --l2 "$L2_SKLEARN_C" --maxiter 60 \
    --tol 1e-7 --devices $2 --verify-replicas --metrics-csv "$WORK/l$1$2.csv" --json "$WORK/l$1$2.json" \
    --weights-out "$WORK/l$1$2.h5" --quiet
done
run layouts_identical 0 20 "$PY" "$SPMD_SOURCE_DIR/tests/support/logreg_same_bits.py" 20 "$WORK/l" 11 23 31

# spmd eval predicts with b: its count is numpy's argmax of x W + b, up to rows whose two best
# logits are too close for float32 to order them alike.
for layout in "1 1" "2 1"; do
  set -- $layout
  run "eval_np$1_d$2" 0 60 mpi $1 "$SPMD" eval --data "$D" --features-key X --labels-key y --model logreg \
    --weights "$WORK/w_c005.h5" --devices $2 --json "$WORK/eval$1$2.json"
done
run eval_uses_b 0 20 py "
import json, h5py, numpy as np
f = h5py.File('$WORK/w_c005.h5', 'r'); W = f['W'][()]; b = f['b'][()]
d = h5py.File('$D', 'r'); X = d['X'][()]; y = d['y'][()]
Z = X @ W + b; top2 = np.sort(Z, axis=1)[:, -2:]
correct = int((Z.argmax(axis=1) == y).sum()); near_ties = int((top2[:, 1] - top2[:, 0] < 1e-4).sum())
without_b = int(((X @ W).argmax(axis=1) == y).sum())
for k in ('11', '21'):
    e = json.load(open('$WORK/eval%s.json' % k))
    assert e['total'] == $N and abs(e['correct'] - correct) <= near_ties, (k, e['correct'], correct, near_ties)
print('eval correct %d of %d; numpy argmax(x W + b) %d (near ties %d); without b %d' %
      (e['correct'], $N, correct, near_ties, without_b))
assert abs(without_b - correct) > 100, (without_b, correct)   # b changes the predictions"
cat "$LAST_OUT"

# CPU and CUDA reach the same objective with the intercept (needs a GPU; skipped visibly without).
if "$SPMD" info --backend cuda >/dev/null 2>&1; then
  for backend in cpu cuda; do
    run "backend_$backend" 0 120 mpi 2 "$SPMD" logreg --data "$D" --fit-intercept --l2 "$L2_SKLEARN_C" \
      --backend $backend --maxiter 60 --json "$WORK/b_$backend.json" --weights-out "$WORK/b_$backend.h5" --quiet
  done
  run cpu_equals_cuda 0 10 py "
import json, h5py, numpy as np
a = json.load(open('$WORK/b_cpu.json')); b = json.load(open('$WORK/b_cuda.json'))
assert abs(a['value'] - b['value']) <= 1e-5 * abs(a['value']), (a['value'], b['value'])
ba = h5py.File('$WORK/b_cpu.h5', 'r')['b'][()]; bb = h5py.File('$WORK/b_cuda.h5', 'r')['b'][()]
assert np.abs(ba - bb).max() <= 1e-3 * np.abs(ba).max(), (ba, bb)"
else
  echo "SKIP cpu_equals_cuda: no GPU here (spmd info --backend cuda fails)"
fi

# Without the option: no intercept, as before (no b in the file, the start-up line says so).
run no_intercept 0 120 "$SPMD" logreg --data "$D" --maxiter 20 --weights-out "$WORK/w_plain.h5" \
  --json "$WORK/plain.json" --quiet
expect_in "no_intercept: the start-up lines say so" 'intercept none'
run no_intercept_file 0 20 py "
import h5py, json
f = h5py.File('$WORK/w_plain.h5', 'r'); assert 'b' not in f and f.attrs['fit_intercept'] == 0, list(f)
assert json.load(open('$WORK/plain.json'))['fit_intercept'] is False"
finish
