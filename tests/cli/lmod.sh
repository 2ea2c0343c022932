#!/usr/bin/env bash
# The Lmod module of an installed prefix (share/modulefiles/spmd-kit/VERSION.lua), under
# Debian's lmod as a cluster's user meets it: `module use`, `module load spmd-kit`, then
# spmdrun and spmd from PATH; `module unload` takes it all back.
source "$(dirname "$0")/../support/cli_lib.sh"
LMOD_INIT=/usr/share/lmod/lmod/init/bash
[ -f "$LMOD_INIT" ] || { fail "Lmod is not installed ($LMOD_INIT; Debian: apt-get install lmod, as tools/setup.sh does)"; finish; exit 1; }
PREFIX=$WORK/prefix
unset SPMD_KIT_ROOT OMPI_MCA_oob_tcp_keepalive_time OMPI_MCA_hwloc_base_binding_policy
run install 0 60 cmake --install "$(dirname "$SPMD")" --prefix "$PREFIX"
version=$("$PREFIX/bin/spmd" --version | sed -n 's/^spmd (SPMD Kit) //p')

# Lmod's functions are defined in this shell, so each check is a function run here.
set +u
source "$LMOD_INIT"
module use "$PREFIX/share/modulefiles"
spmd_avail() { module -t avail spmd-kit 2>&1; }
run avail 0 30 spmd_avail
expect_in "module avail lists spmd-kit/$version" "spmd-kit/$version"
module load spmd-kit
where() { echo "spmd=$(command -v spmd) spmdrun=$(command -v spmdrun) root=$SPMD_KIT_ROOT"; env | grep '^OMPI_MCA_' | sort; }
run loaded 0 10 where
expect_in "spmd and spmdrun come from the prefix, SPMD_KIT_ROOT is set" \
  "^spmd=$PREFIX/bin/spmd spmdrun=$PREFIX/bin/spmdrun root=$PREFIX\$"
expect_in "the keepalive spmdrun uses is set for plain mpirun too" '^OMPI_MCA_oob_tcp_keepalive_time=5$'
expect_in "no binding, as spmdrun's --bind-to none" '^OMPI_MCA_hwloc_base_binding_policy=none$'
run spmdrun_info 0 60 spmdrun -np 2 spmd info
expect_in "spmdrun -np 2 spmd info: 2 ranks" '^# ranks 2 '
expect_in "the prefix's spmd reports its version" "^# spmd info +version $version"
run mpirun_keepalive 0 30 ompi_info --param oob tcp --level 9
expect_in "mpirun reads the keepalive from the module's environment" 'keepalive_time" \(current value: "5", data source: environment'
run example_pkgconfig 0 10 pkg-config --variable=includedir spmd-kit
expect_in "pkg-config finds the prefix" "^$PREFIX/lib/pkgconfig/\.\./\.\./include\$"
module unload spmd-kit
run unloaded 0 10 where
expect_not_in "unload takes the prefix off PATH and the variables away" "$PREFIX|OMPI_MCA_oob"
set -u

finish
