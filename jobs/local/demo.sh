#!/usr/bin/env bash
# The demo: what tools/demo.sh runs after building.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
section "spmd info under mpirun -np 2"
mpirun -np 2 "$SPMD" info
section "Fashion-MNIST from Debian's dataset-fashion-mnist -> $DATA_DIR/fashion-mnist"
ensure_fashion_mnist
"$SPMD" data info "$DATA_DIR/fashion-mnist/test.h5"
