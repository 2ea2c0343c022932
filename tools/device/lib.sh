# Sourced by tools/device/run.sh: the runtime prefix, the machine's CUDA libraries, and the
# step runner (per-step limit, the call's deadline, the log, the JSON record).
DEVICE_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DEADLINE_S=${SPMD_DEVICE_DEADLINE_S:-530}  # the device tool stops a command at 600 s
PY=${SPMD_DEVICE_PYTHON:-python3}
failed=0

# python_with MODULES...: the first python3 that imports them (the device machine's venv has
# h5py and numpy as python3; Debian keeps them under /usr/bin/python3).
python_with() {
  local p
  for p in "$PY" python3 /usr/bin/python3 /opt/torch/.venv/bin/python3; do
    command -v "$p" >/dev/null && "$p" -c "import $(IFS=,; echo "$*")" 2>/dev/null && { echo "$p"; return 0; }
  done
  return 1
}

# The record needs only the standard library: the system's python3 where there is one, which
# starts in ~0.05 s where a pyenv shim took 0.25 s (a run makes two calls or more per step).
REC_PY=$PY
[ -z "${SPMD_DEVICE_PYTHON:-}" ] && [ -x /usr/bin/python3 ] && REC_PY=/usr/bin/python3
rec() { local c=$1; shift; "$REC_PY" "$DEVICE_DIR/record.py" "$c" "$RECORD" "$@"; }

# unpack_prefix RT PREFIX: the carried Debian packages, unpacked once (never into /: they would
# overwrite the machine's own libraries). Sets RT_PREFIX_LD, RT_PATH and RT_OPAL_PREFIX.
unpack_prefix() {
  local rt=$1 prefix=$2 deb tmp
  if ! ls "$rt"/debs/*.deb >/dev/null 2>&1; then
    echo "note: no $rt/debs: this machine's own Open MPI, HDF5, Boost and OpenBLAS (a local check)"
    RT_PREFIX_LD="" RT_PATH=$PATH RT_OPAL_PREFIX=""
    return 0
  fi
  if [ ! -f "$prefix/.unpacked" ]; then
    mkdir -p "$prefix"
    for deb in "$rt"/debs/*.deb; do
      if command -v dpkg-deb >/dev/null; then dpkg-deb -x "$deb" "$prefix"
      else tmp=$(mktemp -d); (cd "$tmp" && ar x "$deb" && tar -xf data.tar.* -C "$prefix"); rm -rf "$tmp"; fi ||
        { echo "run.sh: cannot unpack $deb" >&2; return 1; }
    done
    # dpkg -x sets up no alternatives: mpirun and mpiexec are orterun's links there.
    for name in mpirun mpiexec; do [ -e "$prefix/usr/bin/$name" ] || ln -s orterun "$prefix/usr/bin/$name"; done
    touch "$prefix/.unpacked"
  fi
  local lib=$prefix/usr/lib/x86_64-linux-gnu
  RT_PREFIX_LD=$lib:$lib/openmpi/lib:$lib/openblas-pthread:$prefix/lib/x86_64-linux-gnu
  RT_PATH=$prefix/usr/bin:$PATH RT_OPAL_PREFIX=$prefix/usr
}

# cuda_lib_dir SONAME: the folder of the machine's SONAME (SPMD_CUDA_LIB_DIRS first, then
# ldconfig, the toolkit's folders, the Python environment's nvidia/*/lib wheels).
cuda_lib_dir() {
  local so=$1 d hit dirs=()
  IFS=: read -ra dirs <<<"${SPMD_CUDA_LIB_DIRS:-}"
  for d in "${dirs[@]}"; do [ -e "$d/$so" ] && { echo "$d"; return 0; }; done
  hit=$(ldconfig -p 2>/dev/null | awk -v so="$so" '$1 == so && /x86-64/ {print $NF; exit}')
  [ -n "$hit" ] && { dirname "$hit"; return 0; }
  for d in /usr/local/cuda*/lib64 /usr/local/cuda*/targets/x86_64-linux/lib /usr/local/cuda*/lib; do
    [ -e "$d/$so" ] && { echo "$d"; return 0; }
  done
  local roots
  roots=$("$PY" -c 'import nvidia; print("\n".join(nvidia.__path__))' 2>/dev/null) || return 1
  for d in $roots; do
    hit=$(find "$d" -maxdepth 4 -name "$so" 2>/dev/null | head -1)
    [ -n "$hit" ] && { dirname "$hit"; return 0; }
  done
  return 1
}

# find_sanitizer: compute-sanitizer on PATH or in the toolkit's folders.
find_sanitizer() {
  local c
  for c in "$(command -v compute-sanitizer)" /usr/local/cuda*/bin/compute-sanitizer \
           /usr/local/cuda*/compute-sanitizer/compute-sanitizer /opt/nvidia/*/compute-sanitizer/compute-sanitizer; do
    [ -n "$c" ] && [ -x "$c" ] && { echo "$c"; return 0; }
  done
  return 1
}

# selected NAME: SPMD_DEVICE_ONLY (an extended regex) picks steps for a spare call.
selected() { [ -z "${SPMD_DEVICE_ONLY:-}" ] || grep -qE "^(${SPMD_DEVICE_ONLY})$" <<<"$1"; }

# verdict NAME STATUS SECONDS RC [NOTE]: the line here, the record's entry, the failure count.
verdict() {
  local name=$1 status=$2 secs=$3 rc=$4 note=${5:-}
  case $status in
    ok) echo "ok   $name (${secs}s)" ;;
    skip) echo "SKIP $name: $note" ;;
    *) echo "FAIL $name ($status, rc=$rc, ${secs}s)${note:+: $note}"; failed=$((failed + 1)) ;;
  esac
  echo "===== $name: $status rc=$rc ${secs}s $note" >>"$LOG"
  rec step "$name" "$status" "$secs" "$rc" "$note" >/dev/null
}

skip() { selected "$1" && verdict "$1" skip 0 0 "$2"; return 0; }

# host_step NAME LIMIT_S CMD...: CMD in the machine's own environment, at most LIMIT_S seconds
# and never past the call's deadline; its output in $WORK/NAME.out and the log.
# With SKIP_IF_OK set, a passing run is recorded as a skip saying so (a CUDA binary run
# without a GPU: it loaded, and its tests skipped themselves).
host_step() {
  local name=$1 limit=$2; shift 2
  selected "$name" || return 0
  local left=$((CALL_START + DEADLINE_S - $(date +%s)))
  if [ $left -lt 20 ]; then
    verdict "$name" deadline 0 0 "not run: ${left}s left of the call's ${DEADLINE_S}s (run it in the spare call)"
    return 1
  fi
  [ "$limit" -gt $((left - 10)) ] && limit=$((left - 10))
  local out=$WORK/$name.out t0 rc status note=""
  echo "===== $name (limit ${limit}s): $*" >>"$LOG"
  t0=$(date +%s.%N)
  timeout -k 10 "$limit" "$@" >"$out" 2>&1; rc=$?
  local secs
  secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
  cat "$out" >>"$LOG"
  case $rc in
    0) status=ok; [ -n "${SKIP_IF_OK:-}" ] && { status=skip; note=$SKIP_IF_OK; } ;;
    124|137) status=timeout; note="stopped at its ${limit}s limit" ;;
    *) status=fail ;;
  esac
  verdict "$name" $status "$secs" $rc "$note"
  [ $status = ok ] || tail -n 8 "$out" | sed 's/^/     | /'
  return $rc
}

# step NAME LIMIT_S CMD...: the same in the carried runtime's environment (tools/device/rtenv.sh).
step() { local name=$1 limit=$2; shift 2; host_step "$name" "$limit" "$DEVICE_DIR/rtenv.sh" "$@"; }
# gpu_step: a step that needs the GPU; a visible SKIP without one.
gpu_step() { if [ "$GPU" = 1 ]; then step "$@"; else skip "$1" "no GPU visible"; fi; }
# gpu_host_step: the same in the machine's own environment (comparisons in python3).
gpu_host_step() { if [ "$GPU" = 1 ]; then host_step "$@"; else skip "$1" "no GPU visible"; fi; }

# setup_runtime RT: the prefix, the CUDA libraries and bin/ on the runtime's library path
# (exported for rtenv.sh), the GPU's name and driver into the record.
setup_runtime() {
  local rt=$1 d
  unpack_prefix "$rt" "${SPMD_RT_PREFIX:-/tmp/spmd-rt}" || return 1
  CUDA_LIB_DIRS=""
  for so in libcudart.so.13 libcublas.so.13; do
    d=$(cuda_lib_dir $so) || continue
    [[ ":$CUDA_LIB_DIRS:" == *":$d:"* ]] || CUDA_LIB_DIRS=${CUDA_LIB_DIRS:+$CUDA_LIB_DIRS:}$d
  done
  echo "CUDA libraries: ${CUDA_LIB_DIRS:-not found}"
  RT_LD_LIBRARY_PATH=$BIN${CUDA_LIB_DIRS:+:$CUDA_LIB_DIRS}${RT_PREFIX_LD:+:$RT_PREFIX_LD}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export RT_LD_LIBRARY_PATH RT_PATH RT_OPAL_PREFIX CUDA_LIB_DIRS BIN
  # The prefix's PMIx finds no help files of its compression component and says so each run.
  export PMIX_MCA_pcompress_base_silence_warning=1
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  # No InfiniBand or other fabric there: shared memory and TCP only, without the probing noise.
  export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_pml=ob1 OMPI_MCA_mtl=^ofi,psm,psm2
  GPU=0
  nvidia-smi -L 2>/dev/null | grep -q '^GPU ' && GPU=1
  export GPU
  if [ $GPU = 1 ]; then
    local q
    q=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)
    rec put device "$("$PY" -c 'import json,sys; print(json.dumps(sys.argv[1].split(", ")[0]))' "$q")"
    rec put driver "$("$PY" -c 'import json,sys; print(json.dumps(sys.argv[1].split(", ")[1]))' "$q")"
    rec put gpu_memory "$("$PY" -c 'import json,sys; print(json.dumps(sys.argv[1].split(", ")[2]))' "$q")"
  else
    echo "NOTE no GPU visible: every CUDA step is a SKIP line (a check of the scripts and the prefix)"
    rec put device null; rec put driver null
  fi
  rec put cuda_lib_dirs "$("$PY" -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$CUDA_LIB_DIRS")"
}
