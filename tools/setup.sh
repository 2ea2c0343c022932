#!/usr/bin/env bash
# Installs what is missing (Debian 12, apt-get), then configures and builds SPMD Kit in
# build/. Idempotent: with everything present it only runs the (incremental) build. Prints a
# line per phase and the build's progress every 10%, so a fresh machine is never silent.
#   tools/setup.sh            # everything the test suite needs; builds every target
#   tools/setup.sh --demo     # only what tools/demo.sh runs: fewer packages, the spmd target
#   SPMD_SKIP_BUILD=1 tools/setup.sh   # install only
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
start=$(date +%s)
say() { echo "setup: $* ($(( $(date +%s) - start )) s)"; }

profile=all
case "${1:-}" in
  "") ;;
  --demo) profile=demo ;;
  *) echo "setup: error: unknown argument '$1' (use --demo or nothing)" >&2; exit 2 ;;
esac

# What the spmd program and the demo need.
packages=(
  build-essential cmake ninja-build pkg-config
  openmpi-bin libopenmpi-dev                 # MPI
  libhdf5-openmpi-dev                        # parallel HDF5 (not libhdf5-dev: FindHDF5 would pick serial)
  libboost-program-options-dev nlohmann-json3-dev
  libopenblas-dev zlib1g-dev
  libonnx-dev libprotobuf-dev              # ONNX model exchange (the ONNX library's protobuf types, checker)
  dataset-fashion-mnist                      # the embedded default data
  python3-numpy python3-matplotlib           # the scaling report and its plots
)
# What only the test suite needs.
if [ "$profile" = all ]; then
  packages+=(
    libgtest-dev hdf5-tools
    slurm-wlm munge                          # one-node Slurm for the job-script tests
    iproute2                                 # emulated nodes (tools/cluster/) for the multinode tests
    strace                                   # cli.startup_io: which ranks touch the input files
    bc                                       # the fault tests' deadlines (priority standard: not in minimal images)
    lmod                                     # cli.lmod: the installed prefix's module
    python3-scipy python3-h5py               # references, user-made files
    python3-onnx libonnx-testdata            # the ONNX checker; ONNX's backend node tests
    python3-torch                            # PyTorch: models exported as users export them
    python3-sklearn                          # cli.logreg_float64: scikit-learn's optimum
    python3-anndata                          # cli.logreg_sparse: .h5ad files as AnnData writes them
  )
fi
missing=()
for p in "${packages[@]}"; do
  [[ $p == \#* ]] && continue
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${#missing[@]} missing package(s) with apt-get: ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "setup: error: need root or sudo to apt-get install: ${missing[*]}" >&2; exit 1; }
    SUDO=sudo
  fi
  export DEBIAN_FRONTEND=noninteractive
  # Package scripts must not start daemons (munge, slurm) on machines without systemd.
  [ -e /usr/sbin/policy-rc.d ] || { printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null; $SUDO chmod +x /usr/sbin/policy-rc.d; }
  $SUDO apt-get update -qq >/dev/null
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  say "packages installed"
fi

# ONNX Runtime (npm, CPU library inside the package): the judge of exported models in tests.
if [ "$profile" = all ] && [ ! -d tools/onnx/node_modules/onnxruntime-node ]; then
  if command -v npm >/dev/null; then
    npm install --prefix tools/onnx --ignore-scripts --no-audit --no-fund --silent >/dev/null && say "onnxruntime-node installed"
  else
    say "npm not found: the ONNX Runtime checks will skip"
  fi
fi

[ "${SPMD_SKIP_BUILD:-0}" = 1 ] && exit 0

# Open MPI refuses root unless told; these are ignored by other launchers.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
build=${SPMD_BUILD_DIR:-$root/build}
# Without a GPU the demo runs on the CPU, so its first build leaves the CUDA module out (its
# nvcc compiles are ~10 s of a ~110 s build here); the full build turns it back on (AUTO) in
# the same folder, as CI needs the CUDA code compiled.
cuda=() marker="$build/.spmd-demo-without-cuda"
configure=false
[ -f "$build/build.ninja" ] || configure=true
if [ "$profile" = demo ] && $configure && ! ls /dev/nvidia[0-9]* >/dev/null 2>&1; then
  cuda=(-DSPMD_CUDA=OFF)
elif [ "$profile" = all ] && [ -f "$marker" ]; then
  cuda=(-DSPMD_CUDA=AUTO) configure=true
fi
if $configure; then
  say "configuring $build (cmake, Release${cuda[*]:+, ${cuda[*]}})"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${cuda[@]}" ${SPMD_CMAKE_ARGS:-} \
    >"$build.configure.log" 2>&1 ||
    { cat "$build.configure.log" >&2; echo "setup: error: cmake failed (log above, also in $build.configure.log)" >&2; exit 1; }
  rm -f "$build.configure.log" "$marker"
  if [ "${cuda[*]:-}" = -DSPMD_CUDA=OFF ]; then touch "$marker"; fi
fi
targets=()
what="every target (spmd, tests, benchmarks)"
if [ "$profile" = demo ]; then
  targets=(--target spmd)
  what="the spmd target"
fi
say "building $what with $(nproc) jobs"
# Ninja's "[done/total]" lines become one line per 10%; everything else (warnings, errors)
# passes through.
set +o pipefail
cmake --build "$build" -j "$(nproc)" "${targets[@]}" 2>&1 | {
  shown=0
  while IFS= read -r line; do
    if [[ $line =~ ^\[([0-9]+)/([0-9]+)\] ]]; then
      step=$(( 10 * BASH_REMATCH[1] / BASH_REMATCH[2] ))
      if [ "$step" -gt "$shown" ]; then
        shown=$step
        say "build $(( 10 * step ))% (${BASH_REMATCH[1]}/${BASH_REMATCH[2]})"
      fi
    else
      printf '%s\n' "$line"
    fi
  done
}
status=${PIPESTATUS[0]}
set -o pipefail
[ "$status" -eq 0 ] && [ -x "$build/spmd" ] || { echo "setup: error: build failed (no $build/spmd; output above)" >&2; exit 1; }
say "built $build/spmd"
