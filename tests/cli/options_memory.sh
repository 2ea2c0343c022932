#!/usr/bin/env bash
# Options and memory checked up front (issue 32, sections 3 and 5): numbers Boost accepts
# but no option means (inf, a wrapped -1, a sub-second --hang-timeout) are refused naming the
# option; a batch beyond the data is capped (drop-remainder: refused); --config files with a
# byte-order mark or a '#' inside a value; the memory a run needs is estimated from the
# shapes before anything is allocated and refused past `ulimit -v` or the node's memory,
# naming the need and the limit. A sparse HDF5 file of 2.3e9 rows (no disk: unwritten
# chunks read as fill values) stands for data past 2^31 rows. Every refusal: every rank
# exits non-zero within 20 s, no output file.
source "$(dirname "$0")/../support/cli_lib.sh"
source "$(dirname "$0")/../support/rank_exits.sh"
OUT=$WORK/out
RC=$WORK/rc
mkdir -p "$OUT" "$RC"
SMALL=$WORK/small.h5
"$SPMD" data make-classification --out "$SMALL" --samples 1003 --features 8 --informative 4 --classes 3 >/dev/null ||
  { echo "FAIL make-classification"; exit 1; }
HUGE=$WORK/huge.h5
/usr/bin/python3 - "$HUGE" <<'PY' || { echo "FAIL making the sparse file"; exit 1; }
import sys, h5py
with h5py.File(sys.argv[1], "w") as f:
    f.create_dataset("X", shape=(2_300_000_000, 4), dtype="u1", chunks=(1 << 20, 4))
    f.create_dataset("y", shape=(2_300_000_000,), dtype="u1", chunks=(1 << 22,))
PY

logreg_small() { "$SPMD" logreg --data "$SMALL" --features-key X --labels-key y --json "$OUT/r.json" --weights-out "$OUT/w.h5" "$@"; }
eval_small() { "$SPMD" eval --data "$SMALL" --features-key X --labels-key y --classes 3 --json "$OUT/r.json" "$@"; }
export -f logreg_small eval_small
export SPMD SMALL HUGE OUT

# --- Numbers: finite, in range, named ---
refuse l2_inf 2 "--l2 must be a finite number \(got inf\)" bash -c 'logreg_small --l2 inf'
refuse tol_nan 2 "--tol must be a finite number \(got nan\)" bash -c 'logreg_small --tol nan'
refuse hang_timeout_tiny 2 "--hang-timeout must be 0 \(no watchdog\) or at least 1 second \(got 0.001\)" \
  bash -c 'logreg_small --hang-timeout 0.001'
refuse seed_negative 2 "--seed must be a whole number >= 0 \(got '-1'\)" \
  bash -c '"$SPMD" ensemble --train "$SMALL" --test "$SMALL" --json "$OUT/r.json" --seed -1'
refuse data_seed_negative 2 "--seed must be a whole number >= 0 \(got '-3'\)" \
  bash -c '"$SPMD" data make-classification --out "$OUT/m.h5" --seed=-3'
refuse drop_remainder_batch 2 "--per-device-batch 600 is more than the smallest rank's rows per device \(501" \
  bash -c 'eval_small --strategy drop-remainder --per-device-batch 600'

# A batch far above the rows: capped at a device's rows (502 on 2 ranks), little memory.
run batch_max 0 60 mpi 2 "$SPMD" eval --data "$SMALL" --features-key X --labels-key y --classes 3 \
  --per-device-batch 9223372036854775807 --json "$WORK/batch_max.json"
expect_in "batch_max: capped, said" "per-device-batch 9223372036854775807 is more than a device's rows \(502\): batches of 502 rows"
expect_in "batch_max: every example counted" "every example counted exactly once: total 1003"
# Each rank's peak resident memory in its own file (rss.RANK, kB).
run batch_2e9 0 60 mpi 2 bash -c 'exec /usr/bin/time -f "%M" -o "$0.$OMPI_COMM_WORLD_RANK" "$SPMD" eval --data "$SMALL" \
  --features-key X --labels-key y --classes 3 --per-device-batch 2000000000' "$WORK/rss"
checks=$((checks + 1))
peaks=$(cat "$WORK"/rss.* | tr '\n' ' ')
[ "$(cat "$WORK"/rss.* | awk '$1 < 400000' | wc -l)" = 2 ] && echo "ok   batch_2e9: each rank under 400 MB ($peaks kB)" ||
  fail "batch_2e9: the ranks' peak memory: $peaks kB"

# --- --config: byte-order mark, '#' comments only at a line's start or after whitespace ---
printf '\xef\xbb\xbf# a config saved by a Windows editor\ndata = %s\nfeatures-key = X  # the matrix\nlabels-key = y\nclasses = 3\njson = %s/run#7.json\n' \
  "$SMALL" "$OUT" >"$WORK/bom.ini"
rm -rf "$OUT"; mkdir -p "$OUT"
run config_bom_hash 0 60 "$SPMD" eval --config "$WORK/bom.ini" --quiet
checks=$((checks + 1))
[ "$(ls -A "$OUT")" = "run#7.json" ] && echo "ok   config: '#' inside a value kept (run#7.json)" ||
  fail "config: files left: $(ls -A "$OUT")"
printf 'data = x.h5\nbogus = 1\n' >"$WORK/unknown.ini"
refuse config_unknown 2 "--config '.*unknown.ini' line 2: unrecognised option 'bogus'" \
  bash -c '"$SPMD" eval --config "$0" --json "$OUT/r.json"' "$WORK/unknown.ini"
# A config is untrusted too: only a regular file of at most 1 MiB is read, without blocking.
mkfifo "$WORK/cfg.fifo"; mkdir -p "$WORK/cfg.dir"
head -c 2097152 /dev/zero | tr '\0' '#' >"$WORK/big.ini"
printf 'data = %s\0.bak\nclasses = 3\n' "$SMALL" >"$WORK/nul.ini"
printf 'config = %s\n' "$WORK/bom.ini" >"$WORK/nested.ini"
{ printf 'devices = '; head -c 900000 /dev/zero | tr '\0' '9'; printf '\n'; } >"$WORK/long.ini"
for c in "fifo:$WORK/cfg.fifo:is not a regular file \(a FIFO\)" "dir:$WORK/cfg.dir:is a directory, not a file" \
         "device:/dev/zero:is not a regular file \(a device\)" "big:$WORK/big.ini:is 2097152 bytes; at most 1048576" \
         "nul:$WORK/nul.ini:line 1 holds a NUL byte" "nested:$WORK/nested.ini:line 1: 'config' names another file" \
         "long_value:$WORK/long.ini:\[\.\.\. 899[0-9]* bytes \.\.\.\].* for option '(--)?devices' is invalid"; do
  IFS=: read -r name path pattern <<<"$c"
  refuse "config_$name" 2 "--config '$path'.*$pattern|--config '$path' $pattern" \
    bash -c '"$SPMD" eval --config "$0" --json "$OUT/r.json"' "$path"
done
checks=$((checks + 1))
[ "$(wc -c <"$LAST_OUT")" -lt 4000 ] && echo "ok   config_long_value: the value is not echoed whole ($(wc -c <"$LAST_OUT") bytes)" ||
  fail "config_long_value: $(wc -c <"$LAST_OUT") bytes of output"

# --- Past 2^31 rows, sparse: described in bounded memory; memory refused up front ---
run info_huge 0 120 /usr/bin/time -f "maxrss_kb %M" "$SPMD" data info "$HUGE"
expect_in "info_huge: histogram over every row" "^ +0 +2300000000$"
checks=$((checks + 1))
awk '/maxrss_kb/ { exit !($2 < 400000) }' "$LAST_OUT" && echo "ok   info_huge: under 400 MB" ||
  fail "info_huge: $(grep maxrss_kb "$LAST_OUT")"
refuse eval_huge_ulimit 2 "rank [01] \(.*\) needs 4\.3 GiB \(labels 4\.3 GiB.*ulimit -v \(RLIMIT_AS" \
  bash -c 'ulimit -v 3000000; "$SPMD" eval --data "$HUGE" --classes 3 --json "$OUT/r.json"'
refuse eval_huge_node 2 "the 2 rank\(s\) on .* need .* together .* (MemAvailable|memory cgroup).*lower --per-device-batch" \
  bash -c '"$SPMD" eval --data "$HUGE" --classes 3 --min-device-batch 2000000000 --json "$OUT/r.json"'
refuse logreg_huge 2 "not enough memory for this run: .*features 17\.1 GiB" \
  bash -c '"$SPMD" logreg --data "$HUGE" --json "$OUT/r.json" --weights-out "$OUT/w.h5"'
# The ensemble holds both sets whole on every rank: 2e8 sparse images refused before loading.
BIGIMG=$WORK/bigimg.h5
/usr/bin/python3 - "$BIGIMG" <<'PY' || { echo "FAIL making the sparse images"; exit 1; }
import sys, h5py
with h5py.File(sys.argv[1], "w") as f:
    f.create_dataset("images", shape=(200_000_000, 28, 28), dtype="u1", chunks=(4096, 28, 28))
    f.create_dataset("labels", shape=(200_000_000,), dtype="u1", chunks=(1 << 20,))
PY
export BIGIMG
refuse ensemble_huge 2 "not enough memory for this run: the 2 rank\(s\) on .* need .* \(training set 146\.8 GiB \+ test set 146\.8 GiB.*lower --train-limit" \
  bash -c '"$SPMD" ensemble --train "$BIGIMG" --test "$BIGIMG" --json "$OUT/r.json" --checkpoint "$OUT/ck.h5"'
# Ids as labels: 50000 inferred classes, refused under a limit once the classes are known,
# naming the cause and the fix (not a bare std::bad_alloc after 21 s).
IDS=$WORK/ids.h5
/usr/bin/python3 - "$IDS" <<'PY' || { echo "FAIL making the ids file"; exit 1; }
import sys, h5py, numpy as np
rng = np.random.default_rng(0)
y = rng.integers(0, 10, 2000)
y[5] = 49999
with h5py.File(sys.argv[1], "w") as f:
    f["X"] = rng.standard_normal((2000, 200)).astype("f4")
    f["y"] = y.astype("i8")
PY
export IDS
refuse logreg_ids_as_labels 2 "needs 2\.0 GiB \(solver 1\.9 GiB.*ulimit -v \(RLIMIT_AS.*50000 classes = 1 \+ the largest label.*np.unique" \
  bash -c 'ulimit -v 2000000; "$SPMD" logreg --data "$IDS" --json "$OUT/r.json" --weights-out "$OUT/w.h5"'
[ "$(echo "$LAST_SECONDS < 15" | bc)" = 1 ] && echo "ok   logreg_ids_as_labels: refused in ${LAST_SECONDS}s" ||
  fail "logreg_ids_as_labels: took ${LAST_SECONDS}s"
# --dry-run prints each rank's need and the node's room before any data is read.
run dry_run_memory 0 60 mpi 2 "$SPMD" eval --data "$IDS" --classes 50000 --dry-run
expect_in "dry_run_memory: the need and its parts" "# memory: rank 0 needs [0-9.]+ MiB \(labels [0-9.]+ KiB \+ prefetched blocks [0-9.]+ MiB \+ device batches [0-9.]+ KiB \+ model [0-9.]+ [KM]iB\); its node's 2 rank\(s\) [0-9.]+ MiB of [0-9.]+ GiB"
finish
