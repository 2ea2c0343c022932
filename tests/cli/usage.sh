#!/usr/bin/env bash
# First contact with spmd (issue 18): `spmd` alone lists the commands on stdout and exits 0,
# `spmd --version` / `-V` says the version (CMake's project VERSION) and the backends built,
# once under mpirun, and every --help shows float defaults as written (0.1, not 0.100000001).
source "$(dirname "$0")/../support/cli_lib.sh"
SOURCE=${SPMD_SOURCE_DIR:?}
VERSION=$(sed -nE 's/^project\([^)]*VERSION ([0-9.]+).*/\1/p' "$SOURCE/CMakeLists.txt")
[ -n "$VERSION" ] || { fail "no project VERSION in $SOURCE/CMakeLists.txt"; finish; exit 1; }

# Output on stdout and on stderr apart: the usage belongs on stdout (a request, not an error).
streams() { "$@" >"$WORK/stdout" 2>"$WORK/stderr"; }
check_streams() {  # NAME: stdout has the command list, stderr is empty
  LAST_OUT=$WORK/stdout
  expect_in "$1: commands on stdout" '^commands:'
  expect_in "$1: lists eval" '^  eval '
  expect_in "$1: usage names --version" 'spmd --version'
  checks=$((checks + 1))
  if [ -s "$WORK/stderr" ]; then LAST_OUT=$WORK/stderr; fail "$1: stderr not empty"; else echo "ok   $1: stderr empty"; fi
}
run no_arguments 0 30 streams "$SPMD"
check_streams no_arguments
run help 0 30 streams "$SPMD" --help
check_streams help
run no_arguments_np2 0 60 streams mpirun -np 2 --oversubscribe "$SPMD"
check_streams no_arguments_np2
checks=$((checks + 1))
n=$(grep -c '^commands:' "$WORK/stdout")
[ "$n" = 1 ] && echo "ok   no_arguments_np2: rank 0 alone prints" || fail "no_arguments_np2: the command list printed $n times"
run unknown_command 2 30 "$SPMD" frobnicate
expect_in "unknown command still an error" "unknown command 'frobnicate'"

for flag in --version -V; do
  run "version[$flag]" 0 30 streams "$SPMD" $flag
  LAST_OUT=$WORK/stdout
  checks=$((checks + 1))
  first=$(head -n 1 "$WORK/stdout")
  [ "$first" = "spmd (SPMD Kit) $VERSION" ] && echo "ok   version[$flag]: first line" ||
    fail "version[$flag]: first line is '$first', expected 'spmd (SPMD Kit) $VERSION'"
  expect_in "version[$flag]: names the backends" '^backends compiled in: cpu'
done
run version_np3 0 60 streams mpirun -np 3 --oversubscribe "$SPMD" --version
LAST_OUT=$WORK/stdout
checks=$((checks + 1))
n=$(grep -c "^spmd (SPMD Kit) $VERSION\$" "$WORK/stdout")
[ "$n" = 1 ] && echo "ok   version_np3: rank 0 alone prints" || fail "version_np3: printed $n times"

# Every command's --help: defaults as users write them. A float default printed from its
# binary value shows a run of zeros or nines (0.100000001, 0.899999976).
for command in info data "data fashion-mnist" "data make-classification" "data info" eval logreg ensemble; do
  run "help[$command]" 0 30 "$SPMD" $command --help
  expect_not_in "help[$command]: defaults as written" '[0-9]\.[0-9]*(00000|99999)'
done
run help_ensemble 0 30 "$SPMD" ensemble --help
expect_in "ensemble learning rate default 0.1" '--learning-rate arg \(=0\.1\)'
expect_in "ensemble momentum default 0.9" '--momentum arg \(=0\.9\)'
run help_logreg 0 30 "$SPMD" logreg --help
expect_in "logreg tol default exact" '--tol arg \(=0\.001\)'
finish
