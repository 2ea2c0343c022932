#!/usr/bin/env bash
# Runs a command in the carried runtime's environment: bin/ (libspmd, the CUDA module), the
# machine's CUDA libraries, the Debian prefix's libraries, its mpirun and Open MPI's plugins.
# Only the steps that run our binaries go through here; python3 and NVIDIA's tools keep the
# machine's own environment (the prefix's libraries could shadow theirs). tools/device/lib.sh
# exports RT_LD_LIBRARY_PATH, RT_PATH and RT_OPAL_PREFIX (empty: this machine's own Open MPI).
export LD_LIBRARY_PATH=${RT_LD_LIBRARY_PATH:?run through tools/device/run.sh} PATH=${RT_PATH:?}
[ -n "${RT_OPAL_PREFIX:-}" ] && export OPAL_PREFIX=$RT_OPAL_PREFIX
exec "$@"
