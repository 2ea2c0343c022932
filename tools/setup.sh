#!/usr/bin/env bash
# Installs what is missing (Debian 12, apt-get), then configures and builds SPMD Kit in
# build/. Idempotent and quiet: with everything present it only runs the (incremental) build.
#   tools/setup.sh            # install + build
#   SPMD_SKIP_BUILD=1 tools/setup.sh   # install only
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

packages=(
  build-essential cmake ninja-build pkg-config
  openmpi-bin libopenmpi-dev                 # MPI
  libhdf5-openmpi-dev hdf5-tools             # parallel HDF5 (not libhdf5-dev: FindHDF5 would pick serial)
  libboost-program-options-dev libgtest-dev nlohmann-json3-dev
  libopenblas-dev zlib1g-dev
  dataset-fashion-mnist                      # the embedded default data
  slurm-wlm munge                            # one-node Slurm for the job-script tests
  iproute2                                   # emulated nodes (tools/cluster/) for the multinode tests
  python3-numpy python3-scipy python3-matplotlib python3-h5py   # references, reports, plots
)
missing=()
for p in "${packages[@]}"; do
  [[ $p == \#* ]] && continue
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${#missing[@]} missing package(s): ${missing[*]}"
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
fi

[ "${SPMD_SKIP_BUILD:-0}" = 1 ] && exit 0

# Open MPI refuses root unless told; these are ignored by other launchers.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
build=${SPMD_BUILD_DIR:-$root/build}
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release ${SPMD_CMAKE_ARGS:-} >/dev/null
fi
cmake --build "$build" -j "$(nproc)" | grep -vE '^\[[0-9]+/[0-9]+\]' || true
test -x "$build/spmd" || { echo "setup: error: build failed (no $build/spmd)" >&2; exit 1; }
