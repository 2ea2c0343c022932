#!/usr/bin/env bash
# Every config in inputs/ is accepted by its command (Boost's INI parser refuses unknown
# keys, so a renamed option would otherwise surface only in a Slurm job). Data paths are
# pointed at the test data; each run is the cheapest one that parses the whole file.
source "$(dirname "$0")/../support/cli_lib.sh"
ROOT=${SPMD_SOURCE_DIR:?}
cd "$ROOT" || exit 1

# Each inputs/NAME.ini belongs to the command before the first '-' of NAME.
for ini in inputs/*.ini; do
  name=$(basename "$ini" .ini)
  command=${name%%-*}
  if "$SPMD" "$command" --help 2>&1 | grep -q "not implemented"; then
    echo "SKIP $ini: spmd $command is not implemented yet"
    continue
  fi
  case "$command" in
    info) run "$name" 0 30 "$SPMD" info --config "$ini" ;;
    eval) run "$name" 0 60 mpi 2 "$SPMD" eval --config "$ini" --data "$DATA/fashion/test.h5" --dry-run ;;
    logreg) run "$name" 0 60 mpi 2 "$SPMD" logreg --config "$ini" --data "$DATA/logreg-small.h5" --maxiter 2 ;;
    ensemble)
      # A missing test set is reported after the whole config was read: cheaper than training.
      run "$name" nonzero 60 "$SPMD" ensemble --config "$ini" --train "$DATA/fashion/train.h5" --test "$WORK/no-such-test.h5"
      expect_in "$name: only the missing file is wrong" 'no-such-test\.h5'
      ;;
    *) fail "$ini: no command '$command' to check it with" ;;
  esac
  expect_not_in "$name: every key known" 'unrecognised|unknown option|not allowed'
done
finish
