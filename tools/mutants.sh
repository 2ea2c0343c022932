#!/usr/bin/env bash
# Mutation testing: applies each mutant of tools/mutants.txt (found by its code) in a scratch
# copy of this tree, rebuilds incrementally, runs the tests named for it and prints killed /
# survived and the score. Slow (a rebuild per mutant): not part of the default test run.
#   tools/mutants.sh                    every mutant
#   tools/mutants.sh --only 'pad|split' the mutants whose name matches
#   tools/mutants.sh --check            only check that every snippet is still in its file
# Options: tools/mutants.sh --help. Needs what tools/setup.sh installs (cmake, ninja, ctest).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=$(command -v python3 || true)
[ -n "$python" ] || { echo "mutants: python3 is needed" >&2; exit 2; }
exec "$python" "$root/tools/mutants.py" "$@"
