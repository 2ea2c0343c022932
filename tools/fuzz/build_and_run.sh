#!/usr/bin/env bash
# Builds the libFuzzer targets in tools/fuzz/ with clang (Debian: apt-get install clang-14
# libclang-rt-14-dev) outside the main CMake build, runs each for a bounded time, and keeps
# every input that crashed, hung or ran out of memory in FUZZ_BUILD_DIR/crashes/<target>/.
# FUZZ_KEEP=1 also copies them into tests/fuzz_regressions/<target>/, which
# tests/cli/fuzz_regressions.sh replays through the normal spmd binary (keep one or two
# per distinct bug, under a name that says what it is).
#
#   tools/fuzz/build_and_run.sh [SECONDS_PER_TARGET] [TARGET...]
#     SECONDS_PER_TARGET  default 60; 0 builds only
#     TARGET              fuzz_onnx_model, fuzz_h5_file, fuzz_idx, fuzz_config_file,
#                         fuzz_command_line (default: all)
#   FUZZ_BUILD_DIR  objects, binaries, corpora, logs (default: build-fuzz in the repository)
#   FUZZ_CXX        the compiler (default: clang++-14, else clang++)
#   FUZZ_FLAGS      libFuzzer flags (default: -rss_limit_mb=2048 -timeout=10). To go on past
#                   known findings: -fork=1 -ignore_ooms=1 -ignore_timeouts=1 -malloc_limit_mb=256
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_onnx_model fuzz_h5_file fuzz_idx fuzz_config_file fuzz_command_line)
out=${FUZZ_BUILD_DIR:-$root/build-fuzz}
cxx=${FUZZ_CXX:-$(command -v clang++-14 || command -v clang++ || true)}
[ -n "$cxx" ] || { echo "no clang++: apt-get install clang-14 libclang-rt-14-dev" >&2; exit 2; }
mkdir -p "$out/obj" "$out/bin"

# The library sources the targets exercise, instrumented like the targets themselves: the
# data layer (HDF5 opening, linked files, readers), the ONNX loader and runner with the graph
# ops under it, the runtime, the CLI's option parsing.
cd "$root"
support_sources=(src/data/*.cpp src/runtime/*.cpp src/models/onnx_*.cpp src/ops/graph_*.cpp)
cd - >/dev/null
# The option parsers' targets also take the CLI's parsing (not its commands: those are the
# spmd program's, outside libspmd.so).
cli_sources=(src/cli/command.cpp src/cli/option_checks.cpp)
# clang 14 with GCC 12's library has no std::source_location: these come from libspmd.so.
uninstrumented=(src/runtime/collectives.cpp)
for u in "${uninstrumented[@]}"; do support_sources=("${support_sources[@]/$u}"); done
mpi_cflags=$(mpicxx -showme:compile)
mpi_libs=$(mpicxx -showme:link)
hdf5_dir=/usr/lib/x86_64-linux-gnu/hdf5/openmpi
# Undefined behaviour is a finding too (a shape product that overflows int64 is one).
sanitizers=address,undefined
cflags=(-std=c++20 -O1 -g -fno-omit-frame-pointer -fsanitize=$sanitizers,fuzzer-no-link -fno-sanitize-recover=undefined
        -DSPMD_VERSION=\"fuzz\" -DONNX_ML=1 -DONNX_NAMESPACE=onnx
        -I"$root/include" -I/usr/include/hdf5/openmpi $mpi_cflags)
# What the targets do not exercise (the backend registry and the models behind it) comes
# uninstrumented from the main build's libspmd.so; the instrumented objects above take
# precedence for the symbols they define.
spmd_build=${SPMD_BUILD_DIR:-$root/build}
[ -f "$spmd_build/libspmd.so" ] || { echo "no $spmd_build/libspmd.so: run tools/setup.sh first" >&2; exit 2; }
libs=($mpi_libs -L"$hdf5_dir/lib" -Wl,-rpath,"$hdf5_dir/lib" -L"$spmd_build" -Wl,-rpath,"$spmd_build" -lspmd
      -lhdf5 -lz -lboost_program_options -lopenblas -lonnx -lonnx_proto -lprotobuf -lpthread -ldl)

# An object is stale when it is missing or older than its source or than any header.
stale() {  # OBJECT SOURCE
  [ ! -f "$1" ] || [ "$2" -nt "$1" ] ||
    [ -n "$(find "$root/include" "$root/src" -name '*.hpp' -newer "$1" -print -quit)" ]
}
objects=()
cli_objects=()
failed=0
jobs_max=${FUZZ_JOBS:-$(nproc)}
for src in "${support_sources[@]}" "${cli_sources[@]}"; do
  [ -n "$src" ] || continue
  obj="$out/obj/$(echo "$src" | tr / _).o"
  case $src in src/cli/*) cli_objects+=("$obj") ;; *) objects+=("$obj") ;; esac
  stale "$obj" "$root/$src" || continue
  echo "compile $src"
  "$cxx" "${cflags[@]}" -c "$root/$src" -o "$obj" &
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n || failed=1; done
done
for pid in $(jobs -p); do wait "$pid" || failed=1; done
[ "$failed" = 0 ] || { echo "build_and_run: a library source did not compile" >&2; exit 2; }
for t in "${targets[@]}"; do
  bin="$out/bin/$t"
  linked=("${objects[@]}")
  case $t in fuzz_command_line|fuzz_config_file) linked+=("${cli_objects[@]}") ;; esac
  if [ ! -f "$bin" ] || [ "$root/tools/fuzz/$t.cpp" -nt "$bin" ] || [ -n "$(find "${linked[@]}" -newer "$bin")" ]; then
    echo "link $t"
    "$cxx" "${cflags[@]}" -fsanitize=$sanitizers,fuzzer "$root/tools/fuzz/$t.cpp" "${linked[@]}" "${libs[@]}" -o "$bin"
  fi
done
[ "$seconds" -gt 0 ] || exit 0

# Seed corpora: small valid inputs the mutations start from.
seed_idx() {
  local dir=$1
  /usr/bin/python3 - "$dir" <<'PY'
import gzip, os, struct, sys
d = sys.argv[1]
def images(n): return struct.pack(">IIII", 2051, n, 28, 28) + bytes((i * 7) % 256 for i in range(n * 784))
def labels(n): return struct.pack(">II", 2049, n) + bytes(i % 10 for i in range(n))
for name, blob in (("images2", images(2)), ("labels5", labels(5)), ("images0", images(0)), ("labels0", labels(0))):
    open(os.path.join(d, name), "wb").write(blob)
    open(os.path.join(d, name + ".gz"), "wb").write(gzip.compress(blob))
PY
}
seed_onnx() {  # ONNX's own backend test models (libonnx-testdata), the small ones
  local dir=$1 testdata=/usr/share/libonnx-testdata/data m name
  [ -d "$testdata" ] || { echo "no $testdata: apt-get install libonnx-testdata" >&2; exit 2; }
  for m in "$testdata"/{node,simple,pytorch-operator,pytorch-converted}/*/model.onnx; do
    [ "$(stat -c %s "$m")" -le 65536 ] || continue
    name=${m%/model.onnx}
    cp "$m" "$dir/$(basename "$(dirname "$name")")_$(basename "$name").onnx"
  done
}
seed_h5() {  # small files as h5py, scipy.sparse and AnnData lay them out
  /usr/bin/python3 - "$1" <<'PY'
import sys, h5py, numpy as np
d = sys.argv[1]
rng = np.random.default_rng(0)
X = rng.normal(size=(6, 4)).astype(np.float32)
y = np.array([0, 1, 2, 0, 1, 2], np.int64)
with h5py.File(f"{d}/dense.h5", "w") as f:
    f["X"] = X; f["y"] = y
with h5py.File(f"{d}/images_u8_gzip.h5", "w") as f:
    f.create_dataset("images", data=rng.integers(0, 256, (5, 8, 8, 1), dtype=np.uint8), chunks=(2, 8, 8, 1), compression="gzip", shuffle=True)
    f.create_dataset("labels", data=np.array([0, 1, 0, 1, 1], np.uint8))
with h5py.File(f"{d}/data_target_f64.h5", "w") as f:
    f["data"] = X.astype(">f8"); f["target"] = y.astype(np.int32)
with h5py.File(f"{d}/chunked_partial.h5", "w") as f:
    x = f.create_dataset("X", shape=(6, 4), dtype="f4", chunks=(2, 4), fletcher32=True); x[:2] = X[:2]
    f["y"] = y
def csr(f, name, shape, anndata):
    g = f.create_group(name)
    indptr = np.array([0, 1, 3, 3, 4, 6, 7], np.int64)
    g["indptr"], g["indices"], g["data"] = indptr, np.array([0, 2, 3, 1, 0, 3, 2], np.int32), np.arange(7, dtype=np.float32) + 1
    if anndata:
        g.attrs["encoding-type"], g.attrs["encoding-version"] = "csr_matrix", "0.1.0"
    g.attrs["shape"] = np.array(shape, np.int64)
with h5py.File(f"{d}/csr.h5", "w") as f:
    csr(f, "X", (6, 4), False); f["y"] = y
with h5py.File(f"{d}/anndata.h5ad", "w") as f:
    f.attrs["encoding-type"], f.attrs["encoding-version"] = "anndata", "0.1.0"
    csr(f, "X", (6, 4), True)
    obs = f.create_group("obs")
    obs.attrs["encoding-type"], obs.attrs["encoding-version"], obs.attrs["_index"] = "dataframe", "0.2.0", "_index"
    obs.attrs["column-order"] = np.array(["kind"], dtype=object)
    obs["_index"] = np.array([f"c{i}" for i in range(6)], dtype=object)
    kind = obs.create_group("kind")
    kind.attrs["encoding-type"], kind.attrs["encoding-version"], kind.attrs["ordered"] = "categorical", "0.2.0", False
    kind["codes"] = np.array([0, 1, 2, 0, 1, 2], np.int8)
    kind["categories"] = np.array(["a", "b", "c"], dtype=object)
with h5py.File(f"{d}/virtual_self_file.h5", "w") as f:
    f["A"] = X
    layout = h5py.VirtualLayout(shape=X.shape, dtype="f4")
    layout[:] = h5py.VirtualSource(".", "A", shape=X.shape)
    f.create_virtual_dataset("X", layout); f["y"] = y
PY
}
seed_options() {
  local dir=$1 kind=$2 i=0
  for ini in "$root"/inputs/*.ini; do
    i=$((i + 1))
    if [ "$kind" = config ]; then cp "$ini" "$dir/ini$i"; else printf -- '--devices\n2\n\n' | cat - "$ini" > "$dir/ini$i"; fi
  done
  if [ "$kind" = config ]; then
    printf 'devices = 2\nclasses=3\n# comment\n[section]\n' > "$dir/simple"
  else
    printf -- '--data\nx.h5\n--per-device-batch=7\n--simulate-stall\n1:eval step 3\n--dry-run\n' > "$dir/args"
    printf -- '--tol\n1e-9\n\ndevices = 3\nlearning-rate = 0.5\n' > "$dir/args_config"
  fi
}

# The harnesses write each input to a file named after their pid (fork mode: many pids).
export TMPDIR="$out/tmp"
mkdir -p "$TMPDIR"
status=0
for t in "${targets[@]}"; do
  corpus="$out/corpus/$t"
  crashes="$out/crashes/$t"
  mkdir -p "$corpus" "$crashes"
  if [ -z "$(ls -A "$corpus")" ]; then
    case $t in
      fuzz_onnx_model) seed_onnx "$corpus" ;;
      fuzz_h5_file) seed_h5 "$corpus" ;;
      fuzz_idx) seed_idx "$corpus" ;;
      fuzz_config_file) seed_options "$corpus" config ;;
      fuzz_command_line) seed_options "$corpus" args ;;
    esac
  fi
  echo "== $t: ${seconds}s (log: $out/$t.log)"
  # The HDF5 library asks malloc for what a damaged header claims (2^51 bytes) and takes a NULL
  # as an error: ASan must answer as glibc does, and only the resident memory counts. Leaks are
  # not looked for there: MPI_Init's own are reported at exit.
  asan=${ASAN_OPTIONS:-}
  flags=${FUZZ_FLAGS:--rss_limit_mb=2048 -timeout=10}
  if [ "$t" = fuzz_h5_file ]; then
    asan=${ASAN_OPTIONS:+$ASAN_OPTIONS:}allocator_may_return_null=1
    flags="$flags -malloc_limit_mb=1000000 -detect_leaks=0"  # Open MPI's own leaks at exit
  fi
  # shellcheck disable=SC2086
  # OMPI_MCA_opal_signal: MPI_Init must leave SIGABRT and SIGSEGV to libFuzzer, which keeps
  # the input that raised them.
  (cd "$crashes" && ASAN_OPTIONS=$asan OMPI_MCA_opal_signal="" "$out/bin/$t" $flags -max_total_time="$seconds" \
      -artifact_prefix="$crashes/" -print_final_stats=1 "$corpus") >"$out/$t.log" 2>&1 || status=1
  grep -E '^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::new_units_added)' "$out/$t.log" || true
  keep="$root/tests/fuzz_regressions/$t"
  found=$(find "$crashes" -type f | wc -l)
  [ "$found" -eq 0 ] && continue
  echo "   $found finding(s) in $crashes: $(grep -m1 -E 'ERROR: (AddressSanitizer|libFuzzer)' "$out/$t.log" || echo 'see the log')"
  if [ "${FUZZ_KEEP:-0}" = 1 ]; then
    mkdir -p "$keep"
    cp "$crashes"/* "$keep/"
    echo "   copied to tests/fuzz_regressions/$t/"
  fi
done
exit $status
