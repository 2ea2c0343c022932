#!/usr/bin/env bash
# Learning works: 1 epoch on the whole of Fashion-MNIST with 2 members on 2 ranks reaches
# an ensemble test accuracy >= 0.85 (PyTorch with the same model, data and optimiser:
# 0.86), and the ensemble is at least as accurate as its average member.
source "$(dirname "$0")/../support/cli_lib.sh"
run learn 0 900 mpi 2 "$SPMD" ensemble --train "$DATA/fashion/train.h5" --test "$DATA/fashion/test.h5" --epochs 1 \
  --json "$WORK/learn.json" --progress-every 500
run learn_accuracy 0 10 /usr/bin/python3 -c "
import json; e=json.load(open('$WORK/learn.json'))['epochs'][0]
avg=sum(e['member_test_accuracy'])/len(e['member_test_accuracy'])
print('ensemble test accuracy', e['test_accuracy'], 'members', e['member_test_accuracy'])
assert e['test_accuracy'] >= 0.85, e['test_accuracy']
assert e['test_accuracy'] >= avg, (e['test_accuracy'], avg)"
cat "$LAST_OUT"
finish
