# Shared by the local job scripts: root-safe Open MPI, the binary, the launcher, the data folder.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# More ranks than cores is fine for correctness runs; timings then share cores.
export OMPI_MCA_rmaps_base_oversubscribe=1
# On Ctrl-C (or a dead rank) Open MPI 4.1 sends the ranks SIGCONT, SIGTERM after
# odls_base_sigkill_timeout seconds, then SIGKILL after up to as long again (default 1 s).
# spmd ensemble checkpoints on SIGTERM; give it time to finish (the cost: a failed run
# takes about twice that long to be torn down).
export OMPI_MCA_odls_base_sigkill_timeout=${OMPI_MCA_odls_base_sigkill_timeout:-5}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SPMD=${SPMD:-$root/build/spmd}
# mpirun with the options a job needs (tools/spmdrun: keepalive, no binding, root-safe).
SPMDRUN=${SPMDRUN:-$root/tools/spmdrun}
DATA_DIR=${SPMD_DATA_DIR:-$root/inputs/data}
[ -x "$SPMD" ] || { echo "error: $SPMD not built; run tools/setup.sh" >&2; exit 1; }
section() { printf '\n==== %s ====\n' "$*"; }
# Fashion-MNIST from Debian's dataset-fashion-mnist, converted once.
ensure_fashion_mnist() {
  if [ ! -f "$DATA_DIR/fashion-mnist/test.h5" ] || [ ! -f "$DATA_DIR/fashion-mnist/train.h5" ]; then
    "$SPMD" data fashion-mnist --out "$DATA_DIR/fashion-mnist"
  fi
}
# The logreg reference problem: make_classification(50000, 784, 10, informative 50, seed 0).
ensure_classification() {
  local f="$DATA_DIR/classification-50000x784-c10-i50-s0.h5"
  [ -f "$f" ] || "$SPMD" data make-classification --samples 50000 --features 784 --classes 10 --informative 50 \
    --seed 0 --out "$f"
}
