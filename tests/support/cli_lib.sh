# Helpers for the end-to-end CLI tests (sourced). Each check prints what it tested; the
# first failure prints the command's output and exits 1.
set -uo pipefail
SPMD=${SPMD_CLI:?SPMD_CLI must point to the spmd binary}
DATA=${SPMD_TEST_DATA_DIR:?}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
WORK=$(mktemp -d "${TMPDIR:-/tmp}/spmd-cli-test.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
failures=0
checks=0

# run NAME EXPECTED_RC TIMEOUT_S CMD...: runs CMD, output in $WORK/NAME.out, checks rc.
run() {
  local name=$1 want=$2 limit=$3; shift 3
  [ "$1" = mpi ] && set -- mpirun -np "$2" --oversubscribe "${@:3}"
  local start=$(date +%s.%N)
  local rc
  if declare -F "$1" >/dev/null; then
    "$@" >"$WORK/$name.out" 2>&1; rc=$?   # a shell function of the test (a quick check)
  else
    timeout -k 5 "$limit" "$@" >"$WORK/$name.out" 2>&1; rc=$?
  fi
  # awk, not bc: the lent GPU machine runs these scripts and has no bc.
  LAST_SECONDS=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.2f", e - s }')
  LAST_OUT="$WORK/$name.out"
  checks=$((checks + 1))
  if [ "$want" = nonzero ]; then
    if [ $rc -eq 0 ] || [ $rc -eq 124 ] || [ $rc -eq 137 ] || [ $rc -eq 126 ] || [ $rc -eq 127 ]; then
      fail "$name: expected a non-zero exit (not a timeout or a missing command), got rc=$rc"
      return 1
    fi
  elif [ $rc -ne "$want" ]; then
    fail "$name: expected rc=$want, got rc=$rc"
    return 1
  fi
  echo "ok   $name (rc=$rc, ${LAST_SECONDS}s)"
}

# start_job NAME CMD...: launches CMD in the background (output in $WORK/NAME.out), sets JOB
# (CMD's own pid: the target of the signals a test sends; the caller bounds its time).
start_job() {
  local name=$1; shift
  LAST_OUT=$WORK/$name.out
  "$@" >"$LAST_OUT" 2>&1 &
  JOB=$!
}

# expect_in NAME PATTERN: the last output contains PATTERN (grep -E).
expect_in() {
  checks=$((checks + 1))
  if grep -qE -- "$2" "$LAST_OUT"; then echo "ok   $1"; else fail "$1: output lacks /$2/"; fi
}
expect_not_in() {
  checks=$((checks + 1))
  if grep -qE -- "$2" "$LAST_OUT"; then fail "$1: output has /$2/"; else echo "ok   $1"; fi
}

fail() {
  failures=$((failures + 1))
  echo "FAIL $1"
  [ -n "${LAST_OUT:-}" ] && [ -f "$LAST_OUT" ] && sed 's/^/     | /' "$LAST_OUT" | head -60
}

finish() {
  echo "$((checks - failures)) passed, $failures failed"
  [ $failures -eq 0 ]
}

# fashion_subset ROWS OUT: the first ROWS images and labels of the Fashion-MNIST test set,
# with its attributes (class_names), as an HDF5 file at OUT.
fashion_subset() {
  /usr/bin/python3 - "$DATA/fashion/test.h5" "$1" "$2" <<'PYEOF'
import sys, h5py
src, rows, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with h5py.File(src) as f, h5py.File(out, "w") as g:
    g["images"] = f["images"][:rows]
    g["labels"] = f["labels"][:rows]
    g.attrs.update(f.attrs)
PYEOF
}
