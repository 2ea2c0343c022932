#!/usr/bin/env bash
# The demo (jobs/local/demo.sh, what tools/demo.sh runs after building) end to end: every
# section has its plain sentence, every table its header, and the sentences that state
# results say what the runs' summaries say (drop-remainder's undercount, the same logreg
# objective on 1 and 2 ranks, the checkpoint's eval equal to the ensemble's), and the speed-ups
# come from repeated runs with their ranges, the same figures in sections 4 and 6.
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
expect_in "the checkpoint's eval equals the ensemble's" "spmd eval of the checkpoint counts [0-9]+ of 10000 right, accuracy [0-9.]+, the same\."
expect_in "the scaling report explains the 2-rank run" '^  2 ranks x 1 dev: the whole run took'
logreg_words="an iteration \\(the first ignored\\) takes [0-9.]+ ms on 1 rank \([0-9.]+\.\.[0-9.]+ ms over 3 runs\) and [0-9.]+ ms on 2 \([0-9.]+\.\.[0-9.]+ ms over 3 runs\): speed-up [0-9.]+x \\(range [0-9.]+\\.\\.[0-9.]+x, (within|beyond) the noise\\); the host's noise, the spread of the 1-rank runs, is [0-9]+%"
expect_in "logreg: the median speed-up of 3 runs each, its range, the host's noise" "^>> The same objective on 1 and 2 ranks \\([0-9.]+, [0-9]+ iterations, bit for bit, in all 6 runs\\); $logreg_words\\. "
expect_in "ensemble: the median weak-scaling efficiency of 3 runs each and its range" "Ensemble: a training step \\(one batch per member\\) takes [0-9.]+ ms with 1 member on 1 rank \([0-9.]+\.\.[0-9.]+ ms over 3 runs\) and [0-9.]+ ms per member with 2 on 2 ranks \([0-9.]+\.\.[0-9.]+ ms over 3 runs\): weak-scaling efficiency \\(1 is perfect\\) [0-9.]+ \\(range [0-9.]+\\.\\.[0-9.]+, (within|beyond) the noise\\)"
# One measurement, reported twice: section 6 says exactly what section 4 said.
said4=$(grep '^>> The same objective' "$LAST_OUT" | grep -oE "$logreg_words")
said6=$(grep '^>> logreg: ' "$LAST_OUT" | grep -oE "$logreg_words")
checks=$((checks + 1))
if [ -n "$said4" ] && [ "$said4" = "$said6" ]; then echo "ok   sections 4 and 6 give the same logreg speed-up"
else fail "section 4 says '$said4', section 6 '$said6'"; fi
expect_in "scaling tables give medians with ranges" '^\| 2 \| 1 \| 2 \| [0-9.n/a]+ \| [0-9.]+ \([0-9.]+\.\.[0-9.]+\) \|'
expect_in "the host's noise beside the speed-ups" '^Host noise: the 3 runs of 1 rank x 1 dev took'
expect_in "what memory bandwidth allows logreg on 2 ranks" '^Bandwidth model: an iteration reads X \(50000 x 784 float32, 157 MB\)'
expect_not_in "no zero-model confusion matrix" '^ +label +0 +1 +2'
expect_not_in "no error" 'error:|Error|Traceback|NOT the same'
finish
