#!/usr/bin/env bash
# The main job on the embedded default data, on this machine: installs what is missing,
# builds, then runs the local job scripts (mpirun, root-safe) one after the other.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/tools/setup.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export SPMD="$root/build/spmd"
cd "$root"
bash jobs/local/demo.sh
