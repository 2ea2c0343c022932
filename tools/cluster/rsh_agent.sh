#!/usr/bin/env bash
# Open MPI's remote-shell agent for an emulated cluster (mpirun --mca plm_rsh_agent THIS):
# mpirun calls it as `THIS HOST COMMAND...` to start its daemon on HOST, the way it would
# call ssh; the command is one shell string, as ssh would pass it. The cluster comes from
# SPMD_CLUSTER (set by mpirun.sh, and passed down because mpirun inherits the environment).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ -n "${SPMD_CLUSTER:-}" ] || { echo "rsh_agent: SPMD_CLUSTER is not set (use tools/cluster/mpirun.sh)" >&2; exit 1; }
host=$1
shift
exec "$here/on.sh" "$SPMD_CLUSTER" "$host" /bin/sh -c "$*"
