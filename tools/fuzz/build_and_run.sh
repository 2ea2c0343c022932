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
#     TARGET              fuzz_idx, fuzz_config_file, fuzz_command_line (default: all)
#   FUZZ_BUILD_DIR  objects, binaries, corpora, logs (default: build-fuzz in the repository)
#   FUZZ_CXX        the compiler (default: clang++-14, else clang++)
#   FUZZ_FLAGS      libFuzzer flags (default: -rss_limit_mb=2048 -timeout=10). To go on past
#                   known findings: -fork=1 -ignore_ooms=1 -ignore_timeouts=1 -malloc_limit_mb=256
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_idx fuzz_config_file fuzz_command_line)
out=${FUZZ_BUILD_DIR:-$root/build-fuzz}
cxx=${FUZZ_CXX:-$(command -v clang++-14 || command -v clang++ || true)}
[ -n "$cxx" ] || { echo "no clang++: apt-get install clang-14 libclang-rt-14-dev" >&2; exit 2; }
mkdir -p "$out/obj" "$out/bin"

# The library sources the targets need, instrumented like the targets themselves.
support_sources=(src/data/fashion_mnist.cpp src/data/h5_writer.cpp src/data/h5_file.cpp src/data/h5_reader.cpp
                 src/data/element_type.cpp src/runtime/agree.cpp src/runtime/check.cpp src/runtime/collectives.cpp
                 src/runtime/context.cpp src/runtime/devices.cpp src/runtime/mpi.cpp src/runtime/watchdog.cpp
                 src/cli/command.cpp)
mpi_cflags=$(mpicxx -showme:compile)
mpi_libs=$(mpicxx -showme:link)
hdf5_dir=/usr/lib/x86_64-linux-gnu/hdf5/openmpi
cflags=(-std=c++20 -O1 -g -fno-omit-frame-pointer -fsanitize=address,fuzzer-no-link -DSPMD_VERSION=\"fuzz\"
        -I"$root/include" -I/usr/include/hdf5/openmpi $mpi_cflags)
# What the targets do not exercise (the backend registry and the models behind it) comes
# uninstrumented from the main build's libspmd.so; the instrumented objects above take
# precedence for the symbols they define.
spmd_build=${SPMD_BUILD_DIR:-$root/build}
[ -f "$spmd_build/libspmd.so" ] || { echo "no $spmd_build/libspmd.so: run tools/setup.sh first" >&2; exit 2; }
libs=($mpi_libs -L"$hdf5_dir/lib" -Wl,-rpath,"$hdf5_dir/lib" -L"$spmd_build" -Wl,-rpath,"$spmd_build" -lspmd
      -lhdf5 -lz -lboost_program_options -lopenblas -lpthread -ldl)

objects=()
for src in "${support_sources[@]}"; do
  obj="$out/obj/$(echo "$src" | tr / _).o"
  if [ ! -f "$obj" ] || [ "$root/$src" -nt "$obj" ]; then
    echo "compile $src"
    "$cxx" "${cflags[@]}" -c "$root/$src" -o "$obj"
  fi
  objects+=("$obj")
done
for t in "${targets[@]}"; do
  bin="$out/bin/$t"
  if [ ! -f "$bin" ] || [ "$root/tools/fuzz/$t.cpp" -nt "$bin" ] || [ -n "$(find "${objects[@]}" -newer "$bin")" ]; then
    echo "link $t"
    "$cxx" "${cflags[@]}" -fsanitize=address,fuzzer "$root/tools/fuzz/$t.cpp" "${objects[@]}" "${libs[@]}" -o "$bin"
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
      fuzz_idx) seed_idx "$corpus" ;;
      fuzz_config_file) seed_options "$corpus" config ;;
      fuzz_command_line) seed_options "$corpus" args ;;
    esac
  fi
  echo "== $t: ${seconds}s (log: $out/$t.log)"
  # shellcheck disable=SC2086
  (cd "$crashes" && "$out/bin/$t" ${FUZZ_FLAGS:--rss_limit_mb=2048 -timeout=10} -max_total_time="$seconds" \
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
