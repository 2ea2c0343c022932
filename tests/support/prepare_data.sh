#!/usr/bin/env bash
# Test fixture (ctest FIXTURES_SETUP test_data): the data every test shares, made by the
# project itself, once per build tree, into $SPMD_TEST_DATA_DIR.
set -euo pipefail
out=${SPMD_TEST_DATA_DIR:?}
spmd=${SPMD_CLI:?}
mkdir -p "$out"
if [ ! -f "$out/fashion/test.h5" ] || [ ! -f "$out/fashion/train.h5" ]; then
  "$spmd" data fashion-mnist --out "$out/fashion"
fi
# A small logreg problem whose row count is not divisible by 2, 3, 4 or 6.
[ -f "$out/logreg-small.h5" ] ||
  "$spmd" data make-classification --samples 5003 --features 20 --informative 6 --redundant 2 --classes 4 \
    --seed 7 --out "$out/logreg-small.h5"
# The multi-host case of Flax's full-dataset evaluation guide: 4097 examples.
[ -f "$out/rows4097.h5" ] ||
  "$spmd" data make-classification --samples 4097 --features 4 --informative 2 --redundant 0 --classes 3 \
    --clusters-per-class 1 --seed 1 --out "$out/rows4097.h5"
