#!/usr/bin/env bash
# The main job on the embedded default data, on this machine: installs what is missing,
# builds the spmd program (only: tools/test.sh builds the rest), then runs the local demo
# (jobs/local/demo.sh: spmdrun, root-safe). Every phase prints a line as it starts.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
start=$(date +%s)
"$root/tools/setup.sh" --demo
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export SPMD="${SPMD_BUILD_DIR:-$root/build}/spmd"
cd "$root"
bash jobs/local/demo.sh
echo "demo: done in $(( $(date +%s) - start )) s (install, build and runs)"
