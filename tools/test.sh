#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite through ctest.
# Extra arguments go to ctest (e.g. tools/test.sh -R mpi).
# tools/test.sh --mutants [OPTIONS]: mutation testing instead (tools/mutants.sh, slow, not
# part of the default run; its own scratch build in build-mutants/).
# tools/test.sh --packaging: the Debian package built with CPack, installed with apt-get on a
# clean Debian 12 root made by debootstrap, and run there (tools/packaging_test.sh; root, minutes).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ "${1:-}" = --mutants ]; then
  shift
  exec "$root/tools/mutants.sh" "$@"
fi
if [ "${1:-}" = --packaging ]; then
  exec "$root/tools/packaging_test.sh"
fi
start=$(date +%s)
"$root/tools/setup.sh"
echo "setup+build: $(( $(date +%s) - start )) s"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
cd "${SPMD_BUILD_DIR:-$root/build}"
ctest --output-on-failure -j "$(nproc)" "$@"
echo "total: $(( $(date +%s) - start )) s"
