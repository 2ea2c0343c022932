#!/usr/bin/env bash
# The demo (jobs/local/demo.sh, what tools/demo.sh runs after building) end to end: every
# section has its plain sentence, every table its header, and the sentences that state
# results say what the runs' summaries say (drop-remainder's undercount, the same logreg
# objective on 1 and 2 ranks, the checkpoint's eval equal to the ensemble's).
source "$(dirname "$0")/../support/cli_lib.sh"
ROOT=${SPMD_SOURCE_DIR:?}
mkdir -p "$WORK/data"
ln -s "$DATA/fashion" "$WORK/data/fashion-mnist"
run demo 0 300 env SPMD="$SPMD" SPMD_RUN_DIR="$WORK/run" SPMD_DATA_DIR="$WORK/data" bash "$ROOT/jobs/local/demo.sh"
sections=$(grep -c '^==== ' "$LAST_OUT")
sentences=$(grep -A1 '^==== ' "$LAST_OUT" | grep -c '^>> ')
checks=$((checks + 1))
if [ "$sections" -eq 6 ] && [ "$sentences" -eq 6 ]; then echo "ok   6 sections, each opening with a sentence"
else fail "sections $sections, sentences right after a section title $sentences (want 6 and 6)"; fi
expect_in "start-up table with its header" '^#  rank  host +local  devices'
expect_in "eval results table header" '^# +strategy +correct +total +accuracy'
expect_in "logreg results table header" '^# +status iterations +value'
expect_in "ensemble epoch table header" '^# epoch train loss'
expect_in "time breakdown table header" '^#   category +min +mean +max'
expect_in "scaling table header" '^\| ranks \| devices/rank \|'
expect_in "the undercount said in words" "^>> drop-remainder undercounts: 9[0-9]{3} of 10000 examples"
expect_in "the exact strategies said in words" "pad and infinite-pad count 10000 and 10000 of 10000"
expect_in "the same objective on 1 and 2 ranks" '^>> The same objective on 1 and 2 ranks \([0-9.]+, [0-9]+ iterations, bit for bit\)'
expect_in "the checkpoint's eval equals the ensemble's" "spmd eval of the checkpoint counts [0-9]+ of 10000 right, accuracy [0-9.]+, the same\."
expect_in "the scaling report explains the 2-rank run" '^  2 ranks x 1 dev: the whole run took'
expect_not_in "no zero-model confusion matrix" '^ +label +0 +1 +2'
expect_not_in "no error" 'error:|Error|Traceback|NOT the same'
finish
