#!/usr/bin/env bash
# Outputs never destroy a user's file (issue 32, sections 1 and 3):
#  - an output that is an input (also as ./X, through a symbolic link or a hard link), or
#    another output, or a device / FIFO, is refused before any work, on every rank, naming
#    both options and the file; the input stays byte for byte, nothing is left beside it;
#  - an existing checkpoint is not replaced without --resume or --overwrite;
#  - the outputs of one run appear together or not at all (a full disk for the last one
#    leaves none, and the files under those names before stay as they were);
#  - a name too long for a layer (NAME_MAX with the temporary's suffix, Open MPI's MPI-IO
#    buffer) is refused up front naming the limit, and the longest accepted one works;
#  - ranks in different working directories write one file where rank 0 would.
source "$(dirname "$0")/../support/cli_lib.sh"
source "$(dirname "$0")/../support/rank_exits.sh"
RC=$WORK/rc
D=$WORK/d
mkdir -p "$RC" "$D"
cd "$D" || exit 1
IMG=$DATA/fashion/test.h5
"$SPMD" data make-classification --out x.h5 --samples 600 --features 6 --classes 3 --informative 3 --seed 3 >/dev/null ||
  { echo "FAIL make-classification"; exit 1; }
"$SPMD" logreg --data x.h5 --maxiter 5 --quiet --weights-out w.h5 >/dev/null || { echo "FAIL logreg weights"; exit 1; }
ln -s x.h5 link.h5
ln x.h5 hard.h5
cp "$IMG" img.h5
mkfifo fifo
printf 'classes = 3\n' >cfg.ini
printf 'samples = 50\n' >make.ini
sums() { md5sum x.h5 w.h5 img.h5 cfg.ini make.ini; }
sums >"$WORK/sums.before"

# refused NAME NP PATTERN CMD...: every rank fails within 20 s, the message matches
# PATTERN, the inputs are unchanged and no new file (final or temporary) appears in $D.
refused() {
  local name=$1 np=$2 pattern=$3; shift 3
  local before; before=$(ls -A "$D")
  rm -rf "$RC/$name"; mkdir -p "$RC/$name"
  run "$name" nonzero 30 job "$RC/$name" "$np" "$@" || return 0
  expect_in "$name: says why" "$pattern"
  every_rank_failed "$name" "$np"
  checks=$((checks + 1))
  if sums | cmp -s - "$WORK/sums.before" && [ "$(ls -A "$D")" = "$before" ]; then echo "ok   $name: inputs intact, nothing left"
  else fail "$name: files changed: $(ls -A "$D" | tr '\n' ' ')"; sums | diff - "$WORK/sums.before"; fi
}

EVAL=("$SPMD" eval --classes 3 --data x.h5)
same_input="is the same file as the input"
refused pred_is_data 2 "--predictions 'x.h5' $same_input --data 'x.h5'" "${EVAL[@]}" --predictions x.h5
refused pred_is_dot_data 3 "--predictions './x.h5' $same_input --data" "${EVAL[@]}" --predictions ./x.h5
refused pred_is_symlink 2 "--predictions 'link.h5' $same_input --data 'x.h5'" "${EVAL[@]}" --predictions link.h5
refused pred_is_hard_link 2 "--predictions 'hard.h5' $same_input --data" "${EVAL[@]}" --predictions hard.h5
refused data_through_symlink 2 "--json 'x.h5' $same_input --data 'link.h5'" "$SPMD" eval --classes 3 --data link.h5 --json x.h5
refused json_is_data 2 "--json 'x.h5' $same_input --data" "${EVAL[@]}" --json x.h5
refused pred_is_weights 2 "--predictions 'w.h5' $same_input --weights 'w.h5'" "${EVAL[@]}" --model logreg --weights w.h5 --predictions w.h5
refused json_is_config 2 "--json 'cfg.ini' $same_input --config 'cfg.ini'" "${EVAL[@]}" --config cfg.ini --json cfg.ini
refused weights_out_is_data 2 "--weights-out 'x.h5' $same_input --data" "$SPMD" logreg --data x.h5 --weights-out x.h5
refused csv_is_data 3 "--metrics-csv 'x.h5' $same_input --data" "$SPMD" logreg --data x.h5 --metrics-csv x.h5
refused checkpoint_is_train 2 "--checkpoint 'img.h5' $same_input --train" "$SPMD" ensemble --train img.h5 --test "$IMG" --checkpoint img.h5
refused checkpoint_is_test 2 "--checkpoint './img.h5' $same_input --test" "$SPMD" ensemble --train "$IMG" --test img.h5 --checkpoint ./img.h5
refused make_out_is_config 1 "--out 'make.ini' $same_input --config" "$SPMD" data make-classification --config make.ini --out make.ini
refused pred_and_json 2 "--json 'p.h5' and --predictions 'p.h5' are the same file" "${EVAL[@]}" --predictions p.h5 --json p.h5
refused weights_and_json 2 "--json './o.h5' and --weights-out 'o.h5' are the same file" "$SPMD" logreg --data x.h5 --weights-out o.h5 --json ./o.h5
refused csv_and_json 2 "--json 'm.csv' and --metrics-csv 'm.csv' are the same file" "$SPMD" logreg --data x.h5 --metrics-csv m.csv --json m.csv
refused json_dev_null 2 "--json '/dev/null': is a character device" "${EVAL[@]}" --json /dev/null
run dev_null_still_a_device 0 5 test -c /dev/null
refused pred_fifo 2 "--predictions 'fifo': is a FIFO" "${EVAL[@]}" --predictions fifo
refused csv_fifo 2 "--metrics-csv 'fifo': is a FIFO" "$SPMD" logreg --data x.h5 --metrics-csv fifo
run fifo_still_a_fifo 0 5 test -p fifo
# What stays allowed: an output beside its input, and a resumed checkpoint that is both.
run output_beside_input 0 60 mpirun -np 2 "${EVAL[@]}" --predictions p.h5 --json p.json
run beside_input_written 0 5 test -f p.h5 -a -f p.json
rm -f p.h5 p.json

# --- A finished training is not replaced by accident ---
ENS=("$SPMD" ensemble --train "$IMG" --test "$IMG" --train-limit 64 --test-limit 32 --batch-size 16 --quiet)
run first_training 0 120 mpirun -np 2 "${ENS[@]}" --epochs 1 --checkpoint ck.h5
md5sum ck.h5 >"$WORK/ck.sum"
refused existing_checkpoint 2 "--checkpoint 'ck.h5' already exists: a checkpoint of 2 members after 1 epochs, written [0-9]+ s ago .*--resume.*--overwrite" \
  "${ENS[@]}" --epochs 1 --checkpoint ck.h5
run existing_checkpoint_kept 0 5 md5sum -c "$WORK/ck.sum"
refused existing_other_file 1 "--checkpoint 'cfg.ini' already exists: a file that is not an HDF5 checkpoint" "${ENS[@]}" --checkpoint cfg.ini
refused resume_and_overwrite 2 "--resume and --overwrite contradict" "${ENS[@]}" --checkpoint ck.h5 --resume --overwrite
run overwrite_replaces 0 120 mpirun -np 2 "${ENS[@]}" --epochs 1 --checkpoint ck.h5 --overwrite --seed 5
run overwrite_replaced 0 5 bash -c "! md5sum -c '$WORK/ck.sum' >/dev/null 2>&1"
run resume_allowed 0 120 mpirun -np 2 "${ENS[@]}" --checkpoint ck.h5 --resume --seed 5 --epochs 2
rm -f ck.h5

# --- Too long for a layer: refused before any work, naming the limit ---
name_of() { printf "%${1}s" "" | tr ' ' "$2"; }
long_json=$(name_of 245 j).json                       # 250 characters: over NAME_MAX with '.tmp.PID'
refused json_name_max 2 "the file name is 250 characters; this file system allows 255 \(NAME_MAX\)" "${EVAL[@]}" --json "$long_json"
refused weights_name_max 2 "--weights-out '.*': the file name is 250 characters" "$SPMD" logreg --data x.h5 --weights-out "$(name_of 247 w).h5"
# The temporary './.NAME.tmp.PID' of a 227-character name would reach 245 characters with a
# 10-digit pid: Open MPI 4.1 then aborts with '*** buffer overflow detected ***'.
refused predictions_mpi_io 2 "too long for MPI-IO: Open MPI 4.1 opens names of at most 244 characters with 2 ranks.* at most 226 characters" \
  "${EVAL[@]}" --predictions "$(name_of 224 p).h5"
refused checkpoint_mpi_io 2 "--checkpoint '.*': the path is 227 characters, too long for MPI-IO" "${ENS[@]}" --checkpoint "$(name_of 224 c).h5"
mkdir -p "$(name_of 120 a)"
ln -s "$D/x.h5" "$(name_of 120 a)/$(name_of 125 b).h5"
refused data_mpi_io 2 "--data '.*': the path is 249 characters, too long for MPI-IO" "$SPMD" eval --classes 3 --data "$(name_of 120 a)/$(name_of 125 b).h5"
rm -rf "$(name_of 120 a)"
# The longest accepted name (226 characters on 2 ranks) is written, with no crash.
longest=$(name_of 223 p).h5
run predictions_longest_accepted 0 60 mpirun -np 2 "${EVAL[@]}" --predictions "$longest"
run longest_written 0 5 test -f "$longest"
rm -f "$longest"

# --- Ranks in different working directories: one file, where rank 0 would write it ---
mkdir -p A B
run two_directories 0 60 mpirun -np 1 -wdir "$D/A" "$SPMD" eval --classes 3 --data "$D/x.h5" --hang-timeout 20 \
  --predictions p.h5 --json r.json : -np 1 -wdir "$D/B" "$SPMD" eval --classes 3 --data "$D/x.h5" --hang-timeout 20 \
  --predictions p.h5 --json r.json
expect_in "two_directories: says so" "different working directories: relative outputs are written where rank 0 would \($D/A\): --predictions '$D/A/p.h5' --json '$D/A/r.json'"
run two_directories_one_place 0 5 bash -c "test -f A/p.h5 -a -f A/r.json && [ -z \"\$(ls -A B)\" ]"
rm -rf A B

# --- The outputs of a run appear together, or not at all ---
FULL=$WORK/full
mkdir -p "$FULL"
if mount -t tmpfs -o size=64k tmpfs "$FULL" 2>/dev/null; then
  trap 'umount "$FULL" 2>/dev/null; rm -rf "$WORK"' EXIT
  echo "previous" >p.h5
  echo "previous" >w.h5.prev
  cat /dev/zero >"$FULL/filler" 2>/dev/null  # to the last byte
  run eval_json_full nonzero 60 mpirun -np 2 "${EVAL[@]}" --predictions p.h5 --json "$FULL/j.json"
  expect_in "eval_json_full: says why" "cannot write '.*j.json'.*No space left on device"
  run eval_predictions_not_published 0 5 bash -c "[ \"\$(cat p.h5)\" = previous ]"
  run logreg_json_full nonzero 60 mpirun -np 2 "$SPMD" logreg --data x.h5 --weights-out w2.h5 --metrics-csv m.csv --json "$FULL/j.json"
  run logreg_nothing_published 0 5 bash -c "[ ! -e w2.h5 ] && [ ! -e m.csv ]"
  run no_temporaries 0 5 bash -c "! ls -A . '$FULL' | grep -q '\.tmp\.'"
  rm -f p.h5 w.h5.prev
  umount "$FULL"
else
  echo "SKIP outputs published together: this machine cannot mount a tmpfs (needs root with CAP_SYS_ADMIN)"
fi
# A stdout that cannot take the report (a full disk: /dev/full) is a failed run, said on stderr.
run stdout_full nonzero 60 bash -c '"$0" eval --classes 3 --data x.h5 >/dev/full' "$SPMD"
expect_in "stdout_full: says so" "writing standard output failed \(No space left on device\)"
run stdout_full_2_ranks nonzero 60 mpi 2 bash -c '"$0" eval --classes 3 --data x.h5 >/dev/full' "$SPMD"
expect_in "stdout_full_2_ranks: says so" "error on rank 0: writing standard output failed"

# A name that is not UTF-8 (Linux names are bytes): the run and its JSON are written, the bytes
# JSON cannot hold as U+FFFD.
bad_name=$(printf 'out\xff.json')
run json_non_utf8_name 0 60 "$SPMD" eval --classes 3 --data x.h5 --json "$bad_name" --predictions "$(printf 'p\xfe.h5')"
run json_non_utf8_valid 0 10 /usr/bin/python3 -c "import json, sys; d = json.load(open(sys.argv[1], 'rb')); print(d['outputs'] if 'outputs' in d else 'ok')" "$bad_name"
rm -f "$bad_name" "$(printf 'p\xfe.h5')"

# An output that cannot be replaced (chattr +i / +a, where this file system and user allow
# them): refused at start-up, on every rank, naming it and what lifts it; nothing written.
put_flag() { chattr "$1" "$2" 2>/dev/null; }
echo previous > frozen.json; echo previous > appended.h5
if put_flag +i frozen.json && put_flag +a appended.h5; then
  run immutable_json nonzero 60 mpi 2 "$SPMD" eval --classes 3 --data x.h5 --predictions fresh.h5 --json frozen.json
  expect_in "immutable_json: names it" "--json 'frozen.json' is immutable .*chattr -i.*nothing was started"
  run append_only_predictions nonzero 60 mpi 2 "$SPMD" eval --classes 3 --data x.h5 --predictions appended.h5 --json fresh.json
  expect_in "append_only_predictions: names it" "--predictions 'appended.h5' is append-only .*chattr -a"
  run immutable_nothing_written 0 5 bash -c "[ ! -e fresh.h5 ] && [ ! -e fresh.json ] && ! ls -A . | grep -q '\.tmp\.'"
  chattr -i frozen.json; chattr -a appended.h5
else
  echo "SKIP immutable outputs: chattr +i/+a not possible here (needs root and ext4, xfs or btrfs)"
fi
rm -f frozen.json appended.h5

finish
