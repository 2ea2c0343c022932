#!/usr/bin/env bash
# Replays the inputs the fuzzers (tools/fuzz/) once crashed or hung on, kept in
# tests/fuzz_regressions/<target>/, through the normal spmd binary: each must end within
# 10 s in a clean accept (rc 0) or a clean error (rc 1, the message naming the file or
# option), never a crash, a hang, or an out-of-memory; IDX inputs must also stay within
# 512 MB of memory (a damaged header must not make the importer reserve what it claims).
source "$(dirname "$0")/../support/cli_lib.sh"
REG=${SPMD_SOURCE_DIR:?}/tests/fuzz_regressions
py() { /usr/bin/python3 -c "$1"; }
have_time=1
[ -x /usr/bin/time ] || { have_time=0; echo "SKIP memory bounds: /usr/bin/time is missing (apt-get install time)"; }

clean_end() {  # clean_end NAME: rc 0, or rc 1 with an spmd error line and no crash report
  local name=$1 rc=$2
  checks=$((checks + 1))
  if [ "$rc" -eq 0 ] || { [ "$rc" -eq 1 ] && grep -q '^spmd .*error' "$LAST_OUT"; }; then echo "ok   $name: clean end (rc=$rc)"
  else fail "$name: rc=$rc (a crash, a timeout or an unclear failure)"; fi
  expect_not_in "$name: no crash report" 'bad_alloc|Sanitizer|terminate called|Segmentation|core dumped|MPI_ABORT'
}
# replay NAME CMD...: runs CMD with a 10 s limit (and its peak memory measured).
replay() {
  local name=$1 rc; shift
  LAST_OUT=$WORK/$name.out
  if [ $have_time = 1 ]; then
    timeout -k 5 10 /usr/bin/time -f '%M' -o "$WORK/$name.rss" "$@" >"$LAST_OUT" 2>&1; rc=$?
  else
    timeout -k 5 10 "$@" >"$LAST_OUT" 2>&1; rc=$?
  fi
  REPLAY_RC=$rc
  clean_end "$name" "$rc"
}
memory_below() {  # memory_below NAME MB
  [ $have_time = 1 ] || return 0
  checks=$((checks + 1))
  local kb; kb=$(tail -1 "$WORK/$1.rss" 2>/dev/null || echo 0)
  if [ "${kb:-0}" -lt $(($2 * 1024)) ]; then echo "ok   $1: peak memory $((kb / 1024)) MB"
  else fail "$1: peak memory $((kb / 1024)) MB, above $2 MB"; fi
}

# IDX importer (spmd data fashion-mnist): each input as the training images, then as the
# training labels, next to valid files for the rest.
py "
import gzip, struct
open('$WORK/images.gz','wb').write(gzip.compress(struct.pack('>IIII', 2051, 2, 28, 28) + bytes(2 * 784)))
open('$WORK/labels.gz','wb').write(gzip.compress(struct.pack('>II', 2049, 2) + bytes([3, 7])))"
n=0
for input in "$REG"/fuzz_idx/*; do
  [ -f "$input" ] || continue
  n=$((n + 1))
  for role in images labels; do
    name="idx[$(basename "$input") as $role]"
    src=$WORK/src_${n}_$role; out=$WORK/out_${n}_$role
    mkdir -p "$src"
    for split in train t10k; do
      cp "$WORK/images.gz" "$src/$split-images-idx3-ubyte.gz"; cp "$WORK/labels.gz" "$src/$split-labels-idx1-ubyte.gz"
    done
    kind=idx3; [ $role = labels ] && kind=idx1
    cp "$input" "$src/train-$role-$kind-ubyte.gz"
    replay "$name" "$SPMD" data fashion-mnist --source "$src" --out "$out"
    [ "$REPLAY_RC" = 1 ] && expect_in "$name: names the file" "train-$role-$kind-ubyte\.gz"
    [ "$REPLAY_RC" = 1 ] && { [ ! -e "$out/train.h5" ] || fail "$name: $out/train.h5 written for a bad input"; }
    memory_below "$name" 512
  done
done

# Option parser: fuzz_command_line inputs are arguments, one per line, then (after an empty
# line) an INI file given as --config; fuzz_config_file inputs are INI files. Each goes
# through spmd info (no input files needed) and spmd logreg (numeric options).
split_input() {  # split_input FILE ARGS_OUT CONFIG_OUT: NUL-separated args; the config if any
  py "
import sys
data = open('$1', 'rb').read().replace(b'\0', b'')
head, sep, config = data.partition(b'\n\n')
args = [a for a in head.split(b'\n') if a]
if sep:
    open('$3', 'wb').write(config)
    args += [b'--config', b'$3']
open('$2', 'wb').write(b''.join(a + b'\0' for a in args))"
}
for input in "$REG"/fuzz_command_line/*; do
  [ -f "$input" ] || continue
  base=$(basename "$input")
  split_input "$input" "$WORK/$base.args" "$WORK/$base.ini"
  mapfile -d '' args <"$WORK/$base.args"
  for cmd in info logreg; do replay "cmdline[$base, $cmd]" "$SPMD" $cmd "${args[@]}"; done
done
for input in "$REG"/fuzz_config_file/*; do
  [ -f "$input" ] || continue
  base=$(basename "$input")
  for cmd in info logreg; do replay "config[$base, $cmd]" "$SPMD" $cmd --config "$input"; done
done
# HDF5 data files (fuzz_h5_file): each through spmd data info and spmd eval. Some crash the
# HDF5 library itself (a heap overflow in its global-heap read): start-up's walk in a child
# process must refuse them naming the file, before any rank opens them.
for input in "$REG"/fuzz_h5_file/*; do
  [ -f "$input" ] || continue
  name="h5[$(basename "$input")]"
  replay "$name info" "$SPMD" data info "$input"
  replay "$name eval" "$SPMD" eval --data "$input" --classes 3 --predictions "$WORK/h5_pred.h5"
  [ "$REPLAY_RC" = 1 ] && { [ ! -e "$WORK/h5_pred.h5" ] || fail "$name: predictions written for a bad input"; }
  rm -f "$WORK/h5_pred.h5"
done

# ONNX models (fuzz_onnx_model): each through spmd model info and spmd eval on 20 images.
fashion_subset 20 "$WORK/sub.h5"
for input in "$REG"/fuzz_onnx_model/*; do
  [ -f "$input" ] || continue
  name="onnx[$(basename "$input")]"
  replay "$name info" "$SPMD" model info "$input"
  replay "$name eval" "$SPMD" eval --data "$WORK/sub.h5" --model onnx --weights "$input" --predictions "$WORK/onnx_pred.h5"
  rm -f "$WORK/onnx_pred.h5"
done

finish
