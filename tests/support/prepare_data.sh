#!/usr/bin/env bash
# Test fixture: converts Debian's Fashion-MNIST into $SPMD_TEST_DATA_DIR once per build tree.
set -euo pipefail
out=${SPMD_TEST_DATA_DIR:?}
mkdir -p "$out"
if [ ! -f "$out/fashion/test.h5" ] || [ ! -f "$out/fashion/train.h5" ]; then
  "${SPMD_CLI:?}" data fashion-mnist --out "$out/fashion"
fi
