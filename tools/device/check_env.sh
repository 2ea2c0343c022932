#!/usr/bin/env bash
# run.sh's environment step: every check counts (the exit status is the number that failed),
# so a missing nvidia-smi, CUDA library or Open MPI ends the step as FAIL, not as a last line.
# Needs GPU (1 or 0), BIN, CUDA_LIB_DIRS and the RT_* variables of tools/device/lib.sh.
set -u
RT="$(dirname "$0")/rtenv.sh"
bad=0
check() {  # check WHAT CMD...: CMD's output, then ok or FAIL
  local what=$1; shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; bad=$((bad + 1)); fi
}
if [ "$GPU" = 1 ]; then
  check "nvidia-smi lists the GPU" nvidia-smi -L
else
  echo "SKIP nvidia-smi: no GPU visible"
fi
if command -v nvcc >/dev/null; then nvcc --version | tail -1; else echo "note: no nvcc on PATH (the carried binaries do not need it)"; fi
if [ -n "$CUDA_LIB_DIRS" ]; then
  echo "ok   CUDA libraries (libcudart.so.13, libcublas.so.13) from $CUDA_LIB_DIRS"
elif [ "$GPU" = 1 ]; then
  echo "FAIL CUDA libraries: libcudart.so.13 or libcublas.so.13 not found (ldconfig -p, /usr/local/cuda*/lib64," \
       "targets/x86_64-linux/lib, the Python environment's nvidia/*/lib); set SPMD_CUDA_LIB_DIRS"
  bad=$((bad + 1))
else
  echo "SKIP CUDA libraries: not found, and no GPU visible"
fi
# Every carried file and Open MPI's launcher: a library "not found" fails here, not mid-run.
resolves() {
  local out rc
  out=$("$RT" ldd "$1" 2>&1); rc=$?
  if [ $rc -ne 0 ] || grep -q "not found" <<<"$out"; then
    grep -E "not found|error|not a dynamic" <<<"$out" | sed 's/^/       /'
    [ $rc -ne 0 ] && echo "       ldd exited $rc"
    return 1
  fi
}
for f in "$BIN"/*; do check "ldd $(basename "$f"): every library found" resolves "$f"; done
launcher=$("$RT" bash -c 'command -v orterun || command -v mpirun')
if [ -n "$launcher" ]; then
  check "ldd $launcher: every library found" resolves "$launcher"
  check "mpirun runs" "$RT" mpirun --version
else
  echo "FAIL no mpirun in the runtime's PATH"; bad=$((bad + 1))
fi
exit $bad
